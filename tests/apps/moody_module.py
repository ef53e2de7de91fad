"""A module that imports fine inside a job but not ahead of one, in a waiting process (no job
yet: HPSEARCH_REPORTS unset): there it raises, or sleeps forever, as PROBE_MOODY says."""

import os
import time

if not os.environ.get("HPSEARCH_REPORTS"):
    if os.environ.get("PROBE_MOODY") == "hang":
        time.sleep(3600)
    raise ImportError("moody_module: imported outside a job")
