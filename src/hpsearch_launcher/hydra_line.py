"""What differs between the Hydra lines hpsearch runs on (hydra-core 1.3 and 1.4), in one place.

Each difference is found by looking at the installed Hydra (and OmegaConf) for the feature, not
at version numbers. Light: Hydra's plugin scan imports this module (through the plugin's).

- 1.4 deprecates `@hydra.main(version_base=...)` (1.3 warns when it is left out), and asks for
  an execution whitelist: the config-selected targets (`_target_`, logging handler classes)
  that trusted code allows `instantiate()` to call. 1.3 has neither the parameter nor the check.
- 1.4 warns when a config is stored twice under one name without `replace=` (the plugin's
  modules store theirs again in a job's process: its ConfigStore came from the sweep).
- OmegaConf 2.4 renames `register_new_resolver` to `register_resolver` (2.3's
  `register_resolver` is the legacy one, without `replace`).
- 1.4's JobReturn carries the task's traceback and exception chain across processes.
- 1.4 composes through `ConfigLoaderImpl._load_configuration` (its `load_configuration` calls
  it, and so does `Hydra.compose_config` with overrides it parsed already); 1.3 through
  `load_configuration`.
- hydra-optuna-sweeper 1.4 reads `range(a,b)` as Hydra's own `range` does, b left out; 1.3 (and
  every earlier release) searches b too. hpsearch's sweeper reads it as the line's does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import hydra
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from omegaconf import OmegaConf

HAS_EXECUTION_WHITELIST = "execution_whitelist" in inspect.signature(hydra.main).parameters
_STORE_REPLACES = "replace" in inspect.signature(ConfigStore.store).parameters
_RESOLVER_RENAMED = "replace" in inspect.signature(OmegaConf.register_resolver).parameters
# The ConfigLoaderImpl method every composition goes through (see above).
COMPOSE_METHOD = (
    "_load_configuration"
    if hasattr(ConfigLoaderImpl, "_load_configuration")
    else "load_configuration"
)
# range(a,b)'s stop is searched, as the line's hydra-optuna-sweeper searches it (see above).
RANGE_STOP_INCLUDED = not HAS_EXECUTION_WHITELIST
# JobReturn's field for the task's traceback, serialised in the job's process (1.4).
CARRIES_TASK_TRACEBACK = "_remote_traceback" in getattr(JobReturn, "__dataclass_fields__", {})


def main_options(execution_whitelist: Sequence[str]) -> dict[str, Any]:
    """`@hydra.main`'s keyword arguments beyond the config's path and name: on 1.4 the app's
    trusted targets (its version base is the current one, as version_base is deprecated); on
    1.3 the version base 1.3, whose defaults 1.4 keeps (a job does not chdir)."""
    if HAS_EXECUTION_WHITELIST:
        return {"execution_whitelist": list(execution_whitelist)}
    return version_base_option()


def version_base_option() -> dict[str, Any]:
    """The version base keyword of `@hydra.main` and `hydra.initialize_config_dir`: 1.3 on 1.3
    (which warns without one), none on 1.4 (which deprecates it, and warns with one)."""
    return {} if HAS_EXECUTION_WHITELIST else {"version_base": "1.3"}


def instantiate_trusted(config: Any, execution_whitelist: Sequence[str]) -> Any:
    """`hydra.utils.instantiate(config)`, allowed on 1.4 only the targets named (a trailing
    `.*`: a package's), as Hydra's own plugins call it."""
    from hydra.utils import instantiate

    if HAS_EXECUTION_WHITELIST:
        return instantiate(config, _execution_whitelist_=tuple(execution_whitelist))
    return instantiate(config)


def store(name: str, node: Any, group: str, provider: str) -> None:
    """Store a config node, replacing the same node stored earlier in this process."""
    extra: dict[str, Any] = {"replace": True} if _STORE_REPLACES else {}
    ConfigStore.instance().store(name=name, node=node, group=group, provider=provider, **extra)


def register_resolver(name: str, resolver: Callable[..., Any]) -> None:
    """An OmegaConf resolver, replacing one of the same name."""
    register: Any = (
        OmegaConf.register_resolver if _RESOLVER_RENAMED else OmegaConf.register_new_resolver
    )
    register(name, resolver, replace=True)
