"""A module that imports fine inside a job but not ahead of one, in a waiting process (no job
yet: HPSEARCH_REPORTS unset): there it raises, sleeps forever, or kills its process, as
PROBE_MOODY says."""

import os
import signal
import time

if not os.environ.get("HPSEARCH_REPORTS"):
    if os.environ.get("PROBE_MOODY") == "hang":
        time.sleep(3600)
    if os.environ.get("PROBE_MOODY") == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise ImportError("moody_module: imported outside a job")
