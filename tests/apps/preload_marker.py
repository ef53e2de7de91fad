"""A module for hydra.launcher.preload in tests: a job can tell it was imported ahead of it.
Its import takes 50 ms, as a module worth importing ahead does (preload: auto stops importing
ahead one that costs next to nothing)."""

import time

IMPORTED_AT = time.time()
time.sleep(0.05)
