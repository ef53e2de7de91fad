"""What a warm spare imports ahead of its job: the `preload` list as given, or (`auto`) the
modules the sweep's jobs were seen to import. Pure: the local backend feeds it what its
processes report and asks it what the next spare should import.

Learning (`auto`): each job's process reports the top-level packages it imported after it
began (its task's module and whatever its process had imported before were there already);
the spares made or waiting from then on import them, in the order the jobs first imported
them. A spare times each import: one that took next to nothing (a package an earlier one had
already pulled in, a small module) is not imported ahead again; one that failed, hung or killed
its process is dropped for good, with one warning.
"""

from __future__ import annotations

# Modules known to take a GPU (create a CUDA context) when imported: a spare must never touch
# one (it waits beside a running job, on the job's GPU), so these are never imported ahead.
# pycuda's autoinit and autoprimaryctx create a context; Theano with THEANO_FLAGS=device=cuda
# claims its GPU at import. (TensorFlow, PyTorch, JAX and CuPy touch none until first used.)
DENIED = ("pycuda.autoinit", "pycuda.autoprimaryctx", "theano")
# An import that took less than this in a spare (seconds) gains a job nothing worth the risk.
CHEAP_S = 0.02


def denied(name: str) -> str | None:
    """The deny-list entry `name` is or is inside of, if any."""
    return next((d for d in DENIED if name == d or name.startswith(d + ".")), None)


class PreloadPlan:
    """The modules a new (or waiting) spare imports ahead, kept up to date as jobs report."""

    def __init__(self, explicit: tuple[str, ...] | None) -> None:
        self.auto = explicit is None  # None: `preload: auto`
        self._explicit = frozenset(explicit or ())
        self._names: list[str] = list(explicit or ())  # in the order first given or seen
        self._dropped: set[str] = set()

    def learn(self, names: list[str]) -> None:
        """Top-level packages a job imported after it began (auto only)."""
        if not self.auto:
            return
        for name in names:
            if name not in self._names and not denied(name):
                self._names.append(name)

    def modules(self) -> list[str]:
        """What a spare should import now, in order."""
        return [n for n in self._names if n not in self._dropped]

    def imported(self, name: str, seconds: float) -> None:
        """A spare imported `name` in `seconds`."""
        if seconds < CHEAP_S and name not in self._explicit:
            self._dropped.add(name)

    def failed(self, name: str, why: str) -> str | None:
        """`name` failed in a spare (raised, hung, or its process died): dropped; the warning
        to give, the first time only."""
        if name in self._dropped:
            return None
        self._dropped.add(name)
        return (
            f"hpsearch: preload {name}: {why}; later jobs' processes no longer import it "
            "ahead (a job that needs it imports it itself)"
        )
