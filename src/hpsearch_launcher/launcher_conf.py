"""The launcher's options as Hydra registers them in hydra/launcher: `hpsearch` (the launcher's
settings, config.LauncherSettings, with each backend's section from the backend table,
hydra.launcher.ray.*, ...) and, for a section that asks for one, `hpsearch_<name>` (its keys in
hydra.launcher itself, as a migrated config holds them: hpsearch_slurm). Derived field by field
when this module is imported (by the plugin, in Hydra's plugin scan): OmegaConf rejects a value
of the wrong type on the command line, and no setting is written twice.

Each class is bound here by its name (HpsearchLauncherConf, RayConf, ...): Hydra's state, the
classes in it, is pickled for each job, and unpickled by importing this module."""

from typing import Any

from .config import TARGET, LauncherSettings, hydra_config_class
from .plan.backends import SECTIONS


def _bound(settings: type, name: str, **options: Any) -> type:
    """hydra_config_class's class, bound in this module by its name."""
    conf = hydra_config_class(settings, name, __name__, **options)
    globals()[name] = conf
    return conf


def _title(name: str) -> str:
    return name.replace("_", " ").title().replace(" ", "")


def launcher_confs() -> dict[str, type]:
    """Each hydra/launcher option hpsearch registers, by name -> its config class, from the
    backend table as it is now."""
    nested = {
        name: _bound(section.settings, f"{_title(name)}Conf") for name, section in SECTIONS.items()
    }
    confs = {
        "hpsearch": _bound(LauncherSettings, "HpsearchLauncherConf", target=TARGET, sections=nested)
    }
    for name, section in SECTIONS.items():
        if section.flat is not None:
            confs[f"hpsearch_{name}"] = _bound(
                LauncherSettings,
                f"Hpsearch{_title(name)}LauncherConf",
                target=TARGET,
                sections={n: conf for n, conf in nested.items() if n != name},
                flat=section.settings,
                values=dict(section.flat),
            )
    return confs


LAUNCHER_CONFS = launcher_confs()
HpsearchLauncherConf = LAUNCHER_CONFS["hpsearch"]
