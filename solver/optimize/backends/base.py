"""The backend protocol and the choice between backends.

Measured on this problem's covering-and-packing structure (bench/backends.py; docs/benchmarks.md,
`backends`): SCIP proves optimality fastest, HiGHS several times slower (CP-SAT, measured
until 2026-12-05 and then withdrawn, stalled far from its bound on larger instances).
"auto" therefore starts SCIP — except for models that are mostly routing (continuous
variables of many request classes over few integer replica counts), where HiGHS's simplex
was about ten times faster (bench/many_classes.py: 100 classes, ~4,600 routing variables,
~80 integers). Both prove optimality, and each proves some models in seconds that the other
takes minutes over: a solve that runs long gets the other beside it on a spare core, and
the first proof ends both (`backend_for`, solver/optimize/backends/race.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import field
from typing import Protocol

from solver.dataclass_repr import dataclass
from solver.optimize.linear import LinearModel, Progress, SolveOutcome


@dataclass
class SolveOptions:
    """Limits and hints for one MIP solve, whatever the backend."""

    time_limit_s: float = 60.0
    absolute_gap: float = 1e-6  # $/hour: below any real price difference
    relative_gap: float = 0.0
    threads: int = 1
    node_limit: int | None = None  # deterministic effort limit (unlike a time limit)
    relax_integrality: bool = False  # solve the LP relaxation (a bound, in milliseconds)
    hint: list[float] | None = None
    objective_limit: float | None = None  # stop at the first plan at least this cheap
    extra_hints: list[list[float]] = field(default_factory=list)  # more starting plans, tried after `hint`
    # Called on each improving solution with its progress and the variables' values.
    on_progress: Callable[[Progress, list[float]], None] | None = None
    cancel: threading.Event | None = None  # set() stops the solve; the best plan so far is kept
    objective_scale: float = 1.0  # progress reports objective / scale


class Backend(Protocol):
    name: str

    def solve(self, model: LinearModel, options: SolveOptions) -> SolveOutcome: ...


# "auto" picks HiGHS when routing variables outnumber the integers this many times over.
ROUTING_HEAVY_RATIO = 8
ROUTING_HEAVY_MIN_CONTINUOUS = 500


def resolve_auto(name: str, model: LinearModel) -> str:
    """The backend "auto" means for this model (other names pass through)."""
    if name != "auto":
        return name
    size = model.size
    continuous = size["variables"] - size["integer_variables"]
    if continuous >= ROUTING_HEAVY_MIN_CONTINUOUS and continuous > ROUTING_HEAVY_RATIO * size["integer_variables"]:
        return "highs"
    return "scip"


def backend_for(name: str, model: LinearModel, race: bool = True) -> Backend:
    """The backend that solves `model` for the caller's choice `name`: "auto" is the one its
    features choose (resolve_auto), raced by the other on a spare core when a solve runs
    long and `race` allows it (solver/optimize/backends/race.py); any other name, that one."""
    chosen = resolve_auto(name, model)
    if name != "auto" or not race:
        return get_backend(chosen)
    from solver.optimize.backends.race import Race

    return Race(get_backend(chosen), get_backend("highs" if chosen == "scip" else "scip"))


def get_backend(name: str) -> Backend:
    from solver.backend_choices import withdrawn_backend
    from solver.errors import InputError
    from solver.optimize.backends.mathopt_backend import MathOptBackend

    if name in ("auto", "scip"):
        return MathOptBackend("scip")
    if name == "highs":
        return MathOptBackend(name)
    withdrawn = withdrawn_backend(name)
    if withdrawn:
        raise InputError.single("backend", *withdrawn)
    raise ValueError(f"unknown backend {name!r}")
