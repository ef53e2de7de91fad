"""A searched key the app's config lacks, refused before the study starts.

Hydra would refuse it only when the first trial's config is composed, after the study and the
sweep's records began, and advise a sampled number (`+z=0.6708356665223677`) instead of the
search. A key added with `+` is searched on purpose, and a config group's choice (`model=...`)
is no key of the config: both go through.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ..config_keys import dotted_keys, has_key, no_such_key
from .refusal import SearchSpaceError
from .space import SearchSpace


def check_searched_keys(space: SearchSpace, config: DictConfig) -> None:
    """SearchSpaceError for the first searched key that `config`, the sweep's composed config
    (its `hydra` node aside), lacks."""
    groups = set(OmegaConf.select(config, "hydra.runtime.choices", default=None) or {})
    plain = OmegaConf.to_container(config, resolve=False)
    assert isinstance(plain, dict)
    plain.pop("hydra", None)
    for param in space.params.values():
        key = param.name
        if param.key.startswith("+") or "@" in key or key in groups or has_key(plain, key):
            continue
        raise SearchSpaceError(
            f"{no_such_key(key, dotted_keys(plain))} (to search a key the config lacks, add it "
            f"with +: '+{key}=...')"
        )
