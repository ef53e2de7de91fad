"""What the probe's task module does at import, in a job's (or the fork server's) process, not
the sweep's (PROBE_AT_IMPORT): "thread" starts a thread; "gpu" holds 10 MB of its simulated GPU
(as a CUDA context does); "hang_at_fork" makes every process forked from it hang (as a
library's at-fork handler that deadlocks would); "hang" hangs the import itself. A module of
its own: the probe's task is pickled by value (it is the script's), so only a module it imports
runs again in a job."""

import os
import threading
import time

DONE = os.environ.get("PROBE_AT_IMPORT", "") if os.environ.get("HPSEARCH_PARENT_PID") else ""
if DONE == "thread":
    threading.Thread(
        target=time.sleep, args=(3600,), name="probe-import-thread", daemon=True
    ).start()
elif DONE == "gpu":
    import pynvml

    pynvml.allocate(10)
elif DONE == "hang":
    time.sleep(3600)
elif DONE == "hang_at_fork":
    os.register_at_fork(after_in_child=lambda: time.sleep(3600))
