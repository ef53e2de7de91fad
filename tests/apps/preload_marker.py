"""A module for hydra.launcher.preload in tests: a job can tell it was imported ahead of it."""

import time

IMPORTED_AT = time.time()
