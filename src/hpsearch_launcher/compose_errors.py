"""Hydra's refusals of an hpsearch setting, in hpsearch's words, in any app.

Hydra composes `hydra.launcher` and `hydra.sweeper` from hpsearch's dataclasses before either
plugin runs, so a typo there (`hydra.launcher.n_job=2`, or `n_job: 2` under `hydra.launcher` in
the app's YAML) got Hydra's six lines and its hint to add the key with `+`, and a value of the
wrong type (`hydra.launcher.n_jobs=two`) OmegaConf's. Hydra has no hook before it composes, so
the plugin wraps `ConfigLoaderImpl.load_configuration` once: an error of a key under hpsearch's
nodes is refused in one line, as the launcher refuses a setting (`hpsearch: error: ...`, exit status
2; raised to a caller of Hydra's compose API): the nearest setting, as the hpsearch app's own
check words it, or the value, its type and an example, and a plain key under a mapping setting
(`hydra.sweeper.pruner_args.n_warmup_steps=2`, `hydra.launcher.env.FOO=1`) is added as if given
with `++`: the keys of a mapping setting are the user's. Anything else is Hydra's to report.

Light: the plugin's scan imports it in every Hydra process; the settings' checks are imported
for a refusal only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from .hydra_line import COMPOSE_METHOD
from .launcher_conf import HpsearchLauncherConf
from .one_line import refuse
from .search.config import HpsearchSweeperConf
from .setting_checks import refusal

SECTIONS = {"launcher": HpsearchLauncherConf, "sweeper": HpsearchSweeperConf}
# An OmegaConf value node's class -> what its value must be, and an example value.
TYPES = {
    "IntegerNode": ("must be an integer", "2"),
    "FloatNode": ("must be a number", "0.5"),
    "BooleanNode": ("must be true or false", "true"),
    "StringNode": ("must be a string", "name"),
}


def install() -> None:
    """Wrap the method every composition goes through (`ConfigLoaderImpl.load_configuration` on
    Hydra 1.3, `_load_configuration` on 1.4: hydra_line.COMPOSE_METHOD), once per process, as the
    module says."""
    original = getattr(ConfigLoaderImpl, COMPOSE_METHOD)
    if getattr(original, "hpsearch_words", False):
        return

    @functools.wraps(original)
    def load_configuration(
        self: ConfigLoaderImpl, config_name: Any, overrides: list[str], *args: Any, **kwargs: Any
    ) -> Any:
        while True:  # each pass adds one more mapping key with ++, or ends
            try:
                return original(self, config_name, overrides, *args, **kwargs)
            except ConfigCompositionException as err:
                bad = setting_error(err)
                added = None if bad is None else added_to_mapping(bad, overrides)
                if added is None:
                    words = None if bad is None else in_our_words(bad)
                    if words is None:
                        raise
                    if not kwargs.get("from_shell", args[1] if len(args) > 1 else True):
                        raise words from None  # the compose API's caller handles it
                    refuse(str(words), err)
                overrides = added
                if kwargs.get("parsed_overrides") is not None:  # 1.4: parsed before; again now
                    kwargs["parsed_overrides"] = None

    load_configuration.hpsearch_words = True  # type: ignore[attr-defined]
    setattr(ConfigLoaderImpl, COMPOSE_METHOD, load_configuration)


def setting_error(err: BaseException) -> OmegaConfBaseException | None:
    """OmegaConf's error behind Hydra's `err` where it is about a key of hpsearch's launcher or
    sweeper node (Hydra raises from it, or while handling it)."""
    for link in _chain(err):
        key = str(getattr(link, "full_key", None) or "")
        if isinstance(link, OmegaConfBaseException) and key.split(".")[:1] == ["hydra"]:
            section = key.split(".")[1] if key.count(".") > 1 else ""
            if section in SECTIONS and _under(link.parent_node, SECTIONS[section]):
                return link
    return None


def added_to_mapping(bad: OmegaConfBaseException, overrides: list[str]) -> list[str] | None:
    """`overrides` with the plain one that `bad` refused as a new key of a mapping setting
    given with `++` instead; None where `bad` is no such refusal."""
    missing = isinstance(bad, (ConfigKeyError, ConfigAttributeError))
    if not missing or OmegaConf.get_type(bad.parent_node) is not dict:
        return None
    plain = [i for i, o in enumerate(overrides) if o.split("=", 1)[0] == bad.full_key]
    if not plain:
        return None  # from the YAML, where a mapping takes any key
    return [f"++{o}" if i == plain[0] else o for i, o in enumerate(overrides)]


def in_our_words(bad: OmegaConfBaseException) -> Exception | None:
    """The one-line refusal of `bad`: a key no setting has, with the nearest one; a value of
    the wrong type, with its type's rule and an example. None where hpsearch has no words."""
    section, path = str(bad.full_key).split(".", 2)[1:]
    if isinstance(bad, (ConfigKeyError, ConfigAttributeError)):
        try:
            _check_key(section, path)
        except Exception as words:
            return words
        return None
    node = bad.parent_node._get_node(bad.key) if bad.parent_node is not None else None
    rule, example = TYPES.get(type(node).__name__, (None, ""))
    if rule is None or bad.value is None:
        return None
    rule += ", or null" if node._is_optional() else ""  # type: ignore[union-attr]
    return _error(section)(refusal(section, path, bad.value, rule, f"{path}={example}"))


def _check_key(section: str, path: str) -> None:
    """The launcher's or the sweeper's own check of a dotted key (the hpsearch app's too)."""
    if section == "launcher":
        from .plan.settings import check_setting_key
    else:
        from .search.settings import check_setting_key
    check_setting_key(path)


def _error(section: str) -> type[Exception]:
    if section == "launcher":
        from .plan.refusal import LauncherSettingsError as error
    else:
        from .search.refusal import SearchSettingsError as error  # type: ignore[assignment]
    return error


def _under(node: Any, kind: type) -> bool:
    """Whether `node` is, or is inside, a config node of the type `kind`."""
    while node is not None:
        if OmegaConf.get_type(node) is kind:
            return True
        node = node._get_parent()
    return False


def _chain(err: BaseException | None) -> Iterator[BaseException]:
    while err is not None:
        yield err
        err = err.__cause__ or err.__context__
