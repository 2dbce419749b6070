"""A solver-neutral mixed-integer linear model: named variables and named rows.

The formulation writes into this; a backend (solver/optimize/backends) translates it to one
OR-Tools solver. Keeping the two apart lets us swap SCIP/HiGHS/CP-SAT freely.
"""

from __future__ import annotations

from dataclasses import field

from solver.dataclass_repr import dataclass

INF = float("inf")


@dataclass
class Variable:
    """One variable of a LinearModel: its bounds and whether it is integer."""

    name: str
    lb: float
    ub: float
    integer: bool


@dataclass
class Row:
    """One constraint of a LinearModel: lb <= sum of coefficient x variable <= ub."""

    name: str  # deterministic label, e.g. "demand[chat]", "pack[aws/p5.48xlarge]"
    terms: list[tuple[int, float]]
    lb: float = -INF
    ub: float = INF


@dataclass
class LinearModel:
    """A solver-independent MIP: variables, constraint rows and an objective to minimise."""

    variables: list[Variable] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    objective: dict[int, float] = field(default_factory=dict)  # minimised

    def var(self, name: str, lb: float = 0.0, ub: float = INF, integer: bool = False) -> int:
        self.variables.append(Variable(name, lb, ub, integer))
        return len(self.variables) - 1

    def row(self, name: str, terms: list[tuple[int, float]], lb: float = -INF, ub: float = INF) -> None:
        self.rows.append(Row(name, [(i, c) for i, c in terms if c != 0.0], lb, ub))

    @property
    def size(self) -> dict[str, int]:
        return {
            "variables": len(self.variables),
            "integer_variables": sum(v.integer for v in self.variables),
            "constraints": len(self.rows),
            "nonzeros": sum(len(r.terms) for r in self.rows),
        }


@dataclass(frozen=True)
class Progress:
    """Reported during a solve: the best plan's cost so far and the proven lower bound."""

    elapsed_s: float
    best_usd_per_hour: float | None
    bound_usd_per_hour: float | None
    solutions_found: int
    fleet: tuple[dict, ...] = ()  # the improving plan's instances: {"offer_id": ..., "instances": ...}


@dataclass
class SolveOutcome:
    """What a backend's solve returned: status, values, objective, bound and time."""

    status: str  # "optimal" | "feasible" | "infeasible" | "no_solution" | "cancelled"
    values: list[float] | None
    objective: float | None
    bound: float | None
    solve_time_s: float
    backend: str
    detail: str = ""
    duals: list[float] | None = None  # LP solves only: one price per row
