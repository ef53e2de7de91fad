"""hydra.launcher.ray: the Ray backend's own settings, checked before any job starts. Pure:
no Ray. plan/backends.py names this dataclass and parser for the backend's nested section."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import LauncherSettings
from ..finite import is_number
from .refusal import fail


@dataclass(frozen=True)
class RaySettings:
    # "" starts a Ray on this machine for the sweep (stopped after); "auto" joins the cluster
    # this machine is part of (`ray start`); "ray://host:10001" connects a Ray client.
    address: str = ""
    # CPUs each job holds on its node (a number > 0); also its thread count.
    num_cpus: float = 1.0
    # Keyword arguments for ray.init when the sweep starts its own Ray (address ""): e.g.
    # {num_gpus: 2, num_cpus: 8}. A running cluster's resources are its own to set.
    init: dict[str, Any] = field(default_factory=dict)


_RAY_ADDRESS = re.compile(r"^(auto|ray://\S+|[\w.-]+:\d+)$")


def parse_ray(params: Mapping[str, Any]) -> RaySettings:
    """hydra.launcher.ray, its keys already checked and its defaults overlaid (by
    plan/settings.py, as for any backend's section): which cluster, what each job holds on it."""
    address = params["address"]
    address = "" if address is None else address
    if not isinstance(address, str) or not (address == "" or _RAY_ADDRESS.match(address)):
        raise fail(
            "ray.address",
            address,
            "must be empty (start a Ray for the sweep), auto (join this machine's cluster), "
            "ray://host:port (a Ray client) or host:port (the head's GCS)",
            "ray.address=auto",
        )
    num_cpus = params["num_cpus"]
    if not is_number(num_cpus) or num_cpus <= 0:
        raise fail("ray.num_cpus", num_cpus, "must be a number > 0", "ray.num_cpus=2")
    init = params["init"] or {}
    if not isinstance(init, Mapping):
        raise fail(
            "ray.init", init, "must be a mapping of ray.init arguments", "ray.init.num_gpus=2"
        )
    if init and address:
        raise fail(
            "ray.init",
            dict(init),
            f"is for the Ray a sweep starts itself (ray.address empty), not for {address!r}: "
            "a running cluster's resources are set where it was started (ray start)",
            "ray.address=''",
        )
    return RaySettings(address=address, num_cpus=float(num_cpus), init=dict(init))


def ray_of(settings: LauncherSettings) -> RaySettings:
    """The sweep's Ray settings (hydra.launcher.ray), as parsed."""
    ray: RaySettings = settings.section("ray")
    return ray
