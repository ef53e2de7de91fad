"""The launcher's settings, checked before any job starts. Pure: no processes, no GPUs."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import Any

from hydra.errors import CompactHydraException

from ..config import DEFAULT_MEMORY_SHARE, LauncherSettings, RaySettings
from ..contract import OWNED_VARIABLES, RESERVED_PREFIX
from .preload import denied
from .pruning import RULES

# What a job retried alone after running out of memory gets: its whole GPU, but the headroom.
WHOLE_GPU_FRACTION = 0.95
AUTO = "auto"  # jobs_per_gpu=auto: GPUs packed by their jobs' measured memory
GPU_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


class LauncherSettingsError(CompactHydraException):
    """A bad hydra.launcher.* value: the message names the value, the rule and the fix.
    (Compact: Hydra prints the message alone, no traceback.)"""


def _fail(key: str, value: Any, rule: str, example: str) -> LauncherSettingsError:
    # As the user typed it: OmegaConf makes `timeout=-1` the float -1.0.
    shown = int(value) if isinstance(value, float) and value.is_integer() else value
    return LauncherSettingsError(
        f"hydra.launcher.{key}={shown!r}: {rule} (e.g. hydra.launcher.{example})"
    )


def _integer(key: str, value: Any, example: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(key, value, "must be an integer >= 1", example)
    return value


def _count(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(key, value, "must be an integer >= 0", f"{key}=1")
    return value


def parse_gpus(value: Any) -> tuple[str, ...] | None:
    """ "auto" -> None; a list (or one id) -> the ids as strings, checked."""
    if value == "auto":
        return None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    ids: list[str] = []
    for item in items:
        text = str(item).strip()  # an index >= 0 is all digits (True and -1 are not)
        if not (text.isdigit() or GPU_UUID.match(text)):
            raise _fail(
                "gpus",
                value,
                f"{item!r} is not a GPU id (an index >= 0 or a GPU-/MIG- UUID, as "
                "nvidia-smi -L lists them; or auto)",
                "gpus=[0,1]",
            )
        ids.append(str(int(text)) if text.isdigit() else text)
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise _fail(
            "gpus",
            value,
            f"GPU {', '.join(duplicates)} listed twice; "
            "use jobs_per_gpu to run several jobs on one GPU",
            "gpus=[0,1] hydra.launcher.jobs_per_gpu=2",
        )
    return tuple(ids)


def defaults() -> dict[str, Any]:
    """The launcher's defaults, as `LauncherSettings` declares them (the one source)."""
    return dataclasses.asdict(LauncherSettings())


def _refuse_unknown(given: Mapping[str, Any], known: Mapping[str, Any], prefix: str) -> None:
    """A key that is no setting (`+hydra.launcher.jobs_per_gpus=2` gets past Hydra): refused,
    with the nearest setting's name, rather than silently ignored."""
    for key in given:
        if key not in known:
            near = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"did you mean {prefix}{near[0]}?" if near else f"settings: {', '.join(known)}"
            raise LauncherSettingsError(f"hydra.launcher.{prefix}{key}: no such setting; {hint}")


def check_setting_key(path: str) -> None:
    """Refuse `hydra.launcher.<path>`, a dotted key as a command line names it, as
    parse_settings would, if it names no setting: for a check made before Hydra composes
    (Hydra's own refusal names no setting). Keys below a mapping setting (env.*,
    ray.init.*) are the user's; `_target_` is Hydra's."""
    head, _, rest = path.partition(".")
    if head == "_target_":
        return
    _refuse_unknown({head: None}, defaults(), "")
    if head == "ray" and rest:
        _refuse_unknown({rest.partition(".")[0]: None}, defaults()["ray"], "ray.")


def cpu_count() -> int:
    """CPU cores this process may use: affinity and cgroup (container) quotas counted."""
    from loky import cpu_count as loky_cpu_count

    return int(loky_cpu_count())


def parse_settings(given: Mapping[str, Any]) -> LauncherSettings:
    """Check hydra.launcher's values; raise LauncherSettingsError on the first bad one."""
    _refuse_unknown(given, defaults(), "")
    params = defaults() | dict(given)
    jobs_per_gpu = parse_jobs_per_gpu(params["jobs_per_gpu"])
    fraction = params["memory_fraction"]
    if fraction is not None and jobs_per_gpu == AUTO:
        raise _fail(
            "memory_fraction",
            fraction,
            "is set by jobs_per_gpu=auto (each job's cap is its kind's measured peak plus a "
            "margin); drop memory_fraction, or give jobs_per_gpu a number",
            "jobs_per_gpu=auto",
        )
    if params["memory_keys"] and jobs_per_gpu != AUTO:
        raise _fail(
            "memory_keys",
            params["memory_keys"],
            "is read only with jobs_per_gpu=auto (it says which keys change a job's memory)",
            "jobs_per_gpu=auto hydra.launcher.memory_keys=[model]",
        )
    if fraction is not None:
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not (0 < fraction <= 1)
        ):
            raise _fail(
                "memory_fraction",
                fraction,
                "must be a number in (0, 1] or null",
                "memory_fraction=0.45",
            )
        per = int(jobs_per_gpu)  # a number: auto refuses memory_fraction above
        if per * fraction > 1 + 1e-9:
            raise _fail(
                "memory_fraction",
                fraction,
                f"jobs_per_gpu x memory_fraction = {per} x {fraction} = "
                f"{per * fraction:g} > 1: the jobs on one GPU would not fit; "
                f"use at most {1 / per:.3g}",
                f"memory_fraction={DEFAULT_MEMORY_SHARE / per:.3g}",
            )
    n_jobs = params["n_jobs"]
    n_jobs = cpu_count() if n_jobs is None else _integer("n_jobs", n_jobs, "n_jobs=4")
    timeout = params["timeout"]
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise _fail(
            "timeout", timeout, "must be a number of seconds > 0, or null for none", "timeout=3600"
        )
    return LauncherSettings(
        gpus=parse_gpus(params["gpus"]),
        jobs_per_gpu=jobs_per_gpu,
        memory_keys=parse_memory_keys(params["memory_keys"]),
        memory_fraction=None if fraction is None else float(fraction),
        n_jobs=n_jobs,
        timeout=None if timeout is None else float(timeout),
        allow_growth=_flag("allow_growth", params["allow_growth"]),
        env=parse_env(params["env"]),
        resume=_flag("resume", params["resume"]),
        max_oom_retries=_count("max_oom_retries", params["max_oom_retries"]),
        max_retries=_count("max_retries", params["max_retries"]),
        warm_start=parse_warm_start(params["warm_start"]),
        wait_for_free_memory=_flag("wait_for_free_memory", params["wait_for_free_memory"]),
        preload=parse_preload(params["preload"]),
        **parse_prune(params),
        backend=parse_backend(params["backend"], params["gpus"]),
        ray=parse_ray(values_of("ray", params["ray"])),
    )


WARM_STARTS = ("spawn", "fork")


def parse_warm_start(value: Any) -> str:
    """hydra.launcher.warm_start: true or spawn -> "spawn", fork -> "fork", false -> "off"."""
    if value is True or value in WARM_STARTS:
        return "spawn" if value is True else str(value)
    if value is False:
        return "off"
    raise _fail("warm_start", value, "must be true, false, spawn (true) or fork", "warm_start=fork")


def parse_jobs_per_gpu(value: Any) -> int | str:
    """hydra.launcher.jobs_per_gpu: an integer >= 1, or auto (packed by measured memory)."""
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail("jobs_per_gpu", value, "must be an integer >= 1, or auto", "jobs_per_gpu=auto")
    return value


def parse_memory_keys(value: Any) -> tuple[str, ...]:
    """hydra.launcher.memory_keys: config keys, as dotted names (`model`, `data.batch`)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, str) or not re.fullmatch(r"[\w-]+(\.[\w-]+)*", item):
            raise _fail(
                "memory_keys", value, f"{item!r} is not a config key", "memory_keys=[model,batch]"
            )
    return tuple(items)


PRUNERS = tuple(RULES)  # plan/pruning.py's rules


def parse_prune(params: Mapping[str, Any]) -> dict[str, Any]:
    """hydra.launcher.prune*: the stopping rule for a launcher's own jobs (a grid's)."""
    if params["prune"] not in PRUNERS:
        raise _fail(
            "prune", params["prune"], f"must be one of {', '.join(PRUNERS)}", "prune=median"
        )
    if params["prune_mode"] not in ("max", "min"):
        raise _fail("prune_mode", params["prune_mode"], "must be max or min", "prune_mode=min")
    grace = params["prune_grace"]
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
        raise _fail("prune_grace", grace, "must be a number of seconds >= 0", "prune_grace=5")
    return {
        "prune": params["prune"],
        "prune_mode": params["prune_mode"],
        "prune_warmup": _count("prune_warmup", params["prune_warmup"]),
        "prune_grace": float(grace),
    }


BACKENDS = ("local", "ray")


def parse_backend(value: Any, gpus: Any) -> str:
    """hydra.launcher.backend: where jobs run; Ray must be installed to pick it."""
    import importlib.util

    if value not in BACKENDS:
        raise _fail("backend", value, f"must be one of {', '.join(BACKENDS)}", "backend=ray")
    if value == "ray":
        if importlib.util.find_spec("ray") is None:
            raise LauncherSettingsError(
                "hydra.launcher.backend=ray: Ray is not installed here; install it with "
                'pip install "hpsearch[ray]", or use hydra.launcher.backend=local'
            )
        if gpus != "auto" and list(gpus if isinstance(gpus, (list, tuple)) else [gpus]):
            raise _fail(
                "gpus",
                gpus,
                "with backend=ray, Ray assigns each job its GPU: gpus must be auto (the "
                "cluster's GPUs) or [] (CPU only)",
                "gpus=auto",
            )
    return str(value)


def values_of(key: str, given: Any) -> dict[str, Any]:
    """A nested setting (hydra.launcher.ray): its defaults, overlaid with what was given."""
    if given is not None and not isinstance(given, Mapping):
        raise _fail(key, given, "must be a mapping", f"{key}.address=auto")
    return dict(defaults()[key]) | dict(given or {})


_RAY_ADDRESS = re.compile(r"^(auto|ray://\S+|[\w.-]+:\d+)$")


def parse_ray(params: Mapping[str, Any]) -> RaySettings:
    """hydra.launcher.ray: which cluster, what each job holds on it."""
    _refuse_unknown(params, defaults()["ray"], "ray.")
    address = params["address"]
    address = "" if address is None else address
    if not isinstance(address, str) or not (address == "" or _RAY_ADDRESS.match(address)):
        raise _fail(
            "ray.address",
            address,
            "must be empty (start a Ray for the sweep), auto (join this machine's cluster), "
            "ray://host:port (a Ray client) or host:port (the head's GCS)",
            "ray.address=auto",
        )
    num_cpus = params["num_cpus"]
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus <= 0:
        raise _fail("ray.num_cpus", num_cpus, "must be a number > 0", "ray.num_cpus=2")
    init = params["init"] or {}
    if not isinstance(init, Mapping):
        raise _fail(
            "ray.init", init, "must be a mapping of ray.init arguments", "ray.init.num_gpus=2"
        )
    if init and address:
        raise _fail(
            "ray.init",
            dict(init),
            f"is for the Ray a sweep starts itself (ray.address empty), not for {address!r}: "
            "a running cluster's resources are set where it was started (ray start)",
            "ray.address=''",
        )
    return RaySettings(address=address, num_cpus=float(num_cpus), init=dict(init))


_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def parse_preload(value: Any) -> tuple[str, ...] | None:
    """hydra.launcher.preload: "auto" -> None (learn what the jobs import); else module names,
    each checked to exist (without importing it) and to touch no GPU at import."""
    import importlib.util

    if value == "auto":
        return None
    names = [value] if isinstance(value, str) else list(value or [])
    for name in names:
        if not isinstance(name, str) or not _MODULE.match(name):
            raise _fail(
                "preload", value, f"{name!r} is not a module name (or auto)", "preload=[torch]"
            )
        if denied(name):
            raise _fail(
                "preload",
                value,
                f"{name!r} takes a GPU when imported, and a waiting process must touch none: "
                "import it in the task",
                "preload=auto",
            )
        if importlib.util.find_spec(name.split(".")[0]) is None:
            raise _fail(
                "preload", value, f"no module named {name.split('.')[0]!r} here", "preload=[]"
            )
    return tuple(names)


def _flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, value, "must be true or false", f"{key}=false")
    return value


def parse_env(value: Any) -> dict[str, str]:
    """hydra.launcher.env: extra variables for every job, none of those the launcher owns."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail("env", value, "must be a mapping of variable names to values", "env.FOO=1")
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
