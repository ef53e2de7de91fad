"""The launcher's surface for an app built on it (the hpsearch app: its command line, preflight,
`--help` and report): what an app may import beyond the job-side API of `hpsearch_launcher`
itself. Neither that package nor the Hydra plugins import this module, so Hydra's plugin scan
and a job's process do not pay for it; an app that imports it loads Hydra and OmegaConf.

- Settings, checked before anything runs: `check_launcher_key` and `check_sweeper_key` (a
  `hydra.launcher.*` or `hydra.sweeper.*` key the user typed; `LauncherSettingsError`,
  `SearchSettingsError`), `parse_gpus` (the `gpus` setting's value), `LauncherSettings` and
  `SearchSettings` (their one declaration), `SWEEPER_DEFAULTS` (the sweeper's defaults list),
  `declared_settings()` (hydra.launcher's settings classes, each backend's section's too, by
  their keys' prefix), `user_fields(cls)` (a settings class's fields a user sets).
- Devices: `nvml_gpu_ids()` (the GPUs NVML sees), `visible_gpus(environ, nvml_ids)`.
- The output dir: `dirs_to_make(path, key)` (`OutputDirError` for one that cannot be made).
- Hydra's lines: `main_options(whitelist)` (`@hydra.main`'s keywords), `version_base_option()`
  (the compose API's), `register_resolver`.
- Values: `finite_float(value)` (a finite float, or None).
- A config's keys: `has_key`, `dotted_keys`, `nearest_key` (the key closest to a mistyped
  one), `no_such_key` (the refusal's words).
"""

from __future__ import annotations

from . import nvml
from .config import LauncherSettings, user_fields
from .config_keys import dotted_keys, has_key, nearest_key, no_such_key
from .finite import finite_float
from .hydra_line import main_options, register_resolver, version_base_option
from .output_dir import OutputDirError, dirs_to_make
from .plan.backends import declared_settings
from .plan.settings import LauncherSettingsError, parse_gpus
from .plan.settings import check_setting_key as check_launcher_key
from .plan.slots import visible_gpus
from .search.config import SWEEPER_DEFAULTS, SearchSettings
from .search.refusal import SearchSettingsError
from .search.settings import check_setting_key as check_sweeper_key


def nvml_gpu_ids() -> list[str]:
    """The ids of the GPUs NVML sees ([] without a driver or pynvml)."""
    return nvml.nvml_gpu_ids()  # looked up at each call: a test stands a fake in for NVML


__all__ = [
    "SWEEPER_DEFAULTS",
    "LauncherSettings",
    "LauncherSettingsError",
    "OutputDirError",
    "SearchSettings",
    "SearchSettingsError",
    "check_launcher_key",
    "check_sweeper_key",
    "declared_settings",
    "dirs_to_make",
    "dotted_keys",
    "finite_float",
    "has_key",
    "main_options",
    "nearest_key",
    "no_such_key",
    "nvml_gpu_ids",
    "parse_gpus",
    "register_resolver",
    "user_fields",
    "version_base_option",
    "visible_gpus",
]
