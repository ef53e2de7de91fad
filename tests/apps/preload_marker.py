"""A module for hydra.launcher.preload in tests: a job can tell it was imported ahead of it.
Its import takes 50 ms, as a module worth importing ahead does (preload: auto stops importing
ahead one that costs next to nothing). With PROBE_MARKS set, each import leaves a mark there,
`preloaded-<pid>`: a test can tell how many spares have their imports done."""

import os
import time
from pathlib import Path

IMPORTED_AT = time.time()
if os.environ.get("PROBE_MARKS"):
    (Path(os.environ["PROBE_MARKS"]) / f"preloaded-{os.getpid()}").touch()
time.sleep(0.05)
