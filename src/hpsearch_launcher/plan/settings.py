"""The launcher's settings, checked before any job starts. Pure: no processes, no GPUs."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Mapping
from typing import Any

from ..config import DEFAULT_MEMORY_SHARE, LauncherSettings, user_fields
from ..contract import OWNED_VARIABLES, RESERVED_PREFIX
from ..finite import is_number
from .backends import BACKENDS, SECTIONS, Section, fold_flat
from .preload import denied
from .pruning import RULES

# LauncherSettingsError is plan/refusal.py's; the launcher's modules import it from here.
from .refusal import LAUNCHER, LauncherSettingsError, count, fail, flag, refuse_unknown, whole

# What a job retried alone after running out of memory gets: its whole GPU, but the headroom.
WHOLE_GPU_FRACTION = 0.95
AUTO = "auto"  # jobs_per_gpu=auto: GPUs packed by their jobs' measured memory
GPU_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


def parse_gpus(value: Any) -> tuple[str, ...] | None:
    """ "auto" -> None; a list (or one id) -> the ids as strings, checked."""
    if value == "auto":
        return None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    ids: list[str] = []
    for item in items:
        text = str(item).strip()  # an index >= 0 is all digits (True and -1 are not)
        if not (text.isdigit() or GPU_UUID.match(text)):
            raise fail(
                "gpus",
                value,
                f"{item!r} is not a GPU id (an index >= 0 or a GPU-/MIG- UUID, as "
                "nvidia-smi -L lists them; or auto)",
                "gpus=[0,1]",
            )
        ids.append(str(int(text)) if text.isdigit() else text)
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise fail(
            "gpus",
            value,
            f"GPU {', '.join(duplicates)} listed twice; "
            "use jobs_per_gpu to run several jobs on one GPU",
            "gpus=[0,1] hydra.launcher.jobs_per_gpu=2",
        )
    return tuple(ids)


def defaults() -> dict[str, Any]:
    """The launcher's defaults, as `LauncherSettings` declares them (the one source), each
    backend's section's as its dataclass does."""
    declared = dataclasses.asdict(LauncherSettings())
    own = {f.name: declared[f.name] for f in user_fields(LauncherSettings)}
    return own | {name: dataclasses.asdict(s.settings()) for name, s in SECTIONS.items()}


def check_setting_key(path: str) -> None:
    """Refuse `hydra.launcher.<path>`, a dotted key as a command line names it, as
    parse_settings would, if it names no setting: for a check made before Hydra composes
    (Hydra's own refusal names no setting). Keys below a mapping setting (env.*,
    ray.init.*) are the user's; `_target_` is Hydra's."""
    head, _, rest = path.partition(".")
    if head == "_target_":
        return
    refuse_unknown({head: None}, defaults(), "")
    if head in SECTIONS and rest:
        refuse_unknown({rest.partition(".")[0]: None}, defaults()[head], f"{head}.")


def cpu_count() -> int:
    """CPU cores this process may use: affinity and cgroup (container) quotas counted."""
    from loky import cpu_count as loky_cpu_count

    return int(loky_cpu_count())


def parse_settings(given: Mapping[str, Any]) -> LauncherSettings:
    """Check hydra.launcher's values; raise LauncherSettingsError on the first bad one."""
    given = fold_flat(given, defaults())
    refuse_unknown(given, defaults(), "")
    params = defaults() | dict(given)
    jobs_per_gpu = parse_jobs_per_gpu(params["jobs_per_gpu"])
    memory = parse_memory(params, jobs_per_gpu)
    n_jobs = params["n_jobs"]
    n_jobs = cpu_count() if n_jobs is None else whole("n_jobs", n_jobs, 1, "n_jobs=4")
    timeout = parse_timeout(params["timeout"])
    return LauncherSettings(
        gpus=parse_gpus(params["gpus"]),
        jobs_per_gpu=jobs_per_gpu,
        **memory,
        n_jobs=n_jobs,
        timeout=timeout,
        allow_growth=flag("allow_growth", params["allow_growth"]),
        env=parse_env(params["env"]),
        resume=flag("resume", params["resume"]),
        max_oom_retries=count("max_oom_retries", params["max_oom_retries"]),
        max_retries=count("max_retries", params["max_retries"]),
        warm_start=parse_warm_start(params["warm_start"]),
        wait_for_free_memory=flag("wait_for_free_memory", params["wait_for_free_memory"]),
        preload=parse_preload(params["preload"]),
        keep_daemons=flag("keep_daemons", params["keep_daemons"]),
        **parse_prune(params),
        backend=parse_backend(params["backend"], params["gpus"]),
        sections={name: parse_section(section, params[name]) for name, section in SECTIONS.items()},
    )


def parse_memory(params: Mapping[str, Any], jobs_per_gpu: int | str) -> dict[str, Any]:
    """hydra.launcher.memory_fraction (a number's share) and memory_keys (auto's kinds): each
    is read with one kind of jobs_per_gpu only."""
    fraction = params["memory_fraction"]
    if fraction is not None and jobs_per_gpu == AUTO:
        raise fail(
            "memory_fraction",
            fraction,
            "is set by jobs_per_gpu=auto (each job's cap is its kind's measured peak plus a "
            "margin); drop memory_fraction, or give jobs_per_gpu a number",
            "jobs_per_gpu=auto",
        )
    if params["memory_keys"] and jobs_per_gpu != AUTO:
        raise fail(
            "memory_keys",
            params["memory_keys"],
            "is read only with jobs_per_gpu=auto (it says which keys change a job's memory)",
            "jobs_per_gpu=auto hydra.launcher.memory_keys=[model]",
        )
    if fraction is not None:
        if not is_number(fraction) or not (0 < fraction <= 1):
            raise fail(
                "memory_fraction",
                fraction,
                "must be a number in (0, 1] or null",
                "memory_fraction=0.45",
            )
        per = int(jobs_per_gpu)  # a number: auto refuses memory_fraction above
        if per * fraction > 1 + 1e-9:
            raise fail(
                "memory_fraction",
                fraction,
                f"jobs_per_gpu x memory_fraction = {per} x {fraction} = "
                f"{per * fraction:g} > 1: the jobs on one GPU would not fit; "
                f"use at most {1 / per:.3g}",
                f"memory_fraction={DEFAULT_MEMORY_SHARE / per:.3g}",
            )
    return {
        "memory_keys": parse_memory_keys(params["memory_keys"]),
        "memory_fraction": None if fraction is None else float(fraction),
    }


def parse_timeout(value: Any) -> float | None:
    """hydra.launcher.timeout: seconds a job may run, or null for no limit."""
    if value is not None and (not is_number(value) or value <= 0):
        raise fail(
            "timeout", value, "must be a number of seconds > 0, or null for none", "timeout=3600"
        )
    return None if value is None else float(value)


WARM_STARTS = ("spawn", "fork")


def parse_warm_start(value: Any) -> str:
    """hydra.launcher.warm_start: true or fork -> "fork", spawn -> "spawn", false -> "off"."""
    if value is True or value in WARM_STARTS:
        return "fork" if value is True else str(value)
    if value is False:
        return "off"
    raise fail("warm_start", value, "must be true, false, fork (true) or spawn", "warm_start=fork")


def parse_jobs_per_gpu(value: Any) -> int | str:
    """hydra.launcher.jobs_per_gpu: an integer >= 1, or auto (packed by measured memory)."""
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail("jobs_per_gpu", value, "must be an integer >= 1, or auto", "jobs_per_gpu=auto")
    return value


def parse_memory_keys(value: Any) -> tuple[str, ...]:
    """hydra.launcher.memory_keys: config keys, as dotted names (`model`, `data.batch`)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, str) or not re.fullmatch(r"[\w-]+(\.[\w-]+)*", item):
            raise fail(
                "memory_keys", value, f"{item!r} is not a config key", "memory_keys=[model,batch]"
            )
    return tuple(items)


PRUNERS = tuple(RULES)  # plan/pruning.py's rules


def parse_prune(params: Mapping[str, Any]) -> dict[str, Any]:
    """hydra.launcher.prune*: the stopping rule for a launcher's own jobs (a grid's)."""
    settled = {
        "prune": LAUNCHER.choose("prune", params["prune"], PRUNERS, "median"),
        "prune_mode": LAUNCHER.choose("prune_mode", params["prune_mode"], ("max", "min")),
        "prune_warmup": count("prune_warmup", params["prune_warmup"]),
    }
    grace = params["prune_grace"]
    if not is_number(grace) or grace < 0:
        raise fail("prune_grace", grace, "must be a number of seconds >= 0", "prune_grace=5")
    return {**settled, "prune_grace": float(grace)}


def parse_backend(value: Any, gpus: Any) -> str:
    """hydra.launcher.backend: where jobs run, one of plan/backends.py's; what it needs must
    be installed, and a backend that assigns each job its GPU takes no list of them."""
    other = next(name for name in BACKENDS if name != defaults()["backend"])  # the usual fix
    entry = BACKENDS[LAUNCHER.choose("backend", value, BACKENDS, other)]
    if entry.package is not None and importlib.util.find_spec(entry.package) is None:
        raise LauncherSettingsError(
            f"hydra.launcher.backend={value}: {entry.title} is not installed here; install it "
            f"with {entry.install}, or use hydra.launcher.backend={defaults()['backend']}"
        )
    if (
        entry.assigns_gpus
        and gpus != AUTO
        and list(gpus if isinstance(gpus, (list, tuple)) else [gpus])
    ):
        raise fail(
            "gpus",
            gpus,
            f"with backend={value}, {entry.title} assigns each job its GPU: gpus must be auto "
            "(the cluster's GPUs) or [] (CPU only)",
            "gpus=auto",
        )
    return str(value)


def parse_section(section: Section, given: Any) -> Any:
    """A backend's nested settings (hydra.launcher.ray): its defaults, overlaid with what was
    given, its keys checked, then its own parser's."""
    if given is not None and not isinstance(given, Mapping):
        raise fail(section.name, given, "must be a mapping", section.example)
    values = dict(defaults()[section.name]) | dict(given or {})
    refuse_unknown(values, defaults()[section.name], f"{section.name}.")
    return section.parse(values)


_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def parse_preload(value: Any) -> tuple[str, ...] | None:
    """hydra.launcher.preload: "auto" -> None (learn what the jobs import); else module names,
    each checked to exist (without importing it) and to touch no GPU at import."""
    if value == "auto":
        return None
    names = [value] if isinstance(value, str) else list(value or [])
    for name in names:
        if not isinstance(name, str) or not _MODULE.match(name):
            raise fail(
                "preload", value, f"{name!r} is not a module name (or auto)", "preload=[torch]"
            )
        if denied(name):
            raise fail(
                "preload",
                value,
                f"{name!r} takes a GPU when imported, and a waiting process must touch none: "
                "import it in the task",
                "preload=auto",
            )
        if importlib.util.find_spec(name.split(".")[0]) is None:
            raise fail(
                "preload", value, f"no module named {name.split('.')[0]!r} here", "preload=[]"
            )
    return tuple(names)


def parse_env(value: Any) -> dict[str, str]:
    """hydra.launcher.env: extra variables for every job, none of those the launcher owns."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail("env", value, "must be a mapping of variable names to values", "env.FOO=1")
    env = {str(k): str(v) for k, v in value.items()}
    for name in env:
        if name in OWNED_VARIABLES:
            raise LauncherSettingsError(
                f"hydra.launcher.env.{name}: the launcher sets {name} for each job itself; "
                f"use {OWNED_VARIABLES[name]} instead"
            )
        if name.startswith(RESERVED_PREFIX):
            raise LauncherSettingsError(
                f"hydra.launcher.env.{name}: {RESERVED_PREFIX}* variables are reserved for "
                "the launcher's contract with its jobs; use another name"
            )
    return env
