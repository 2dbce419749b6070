"""Domain errors. Each carries where the problem is and how to fix it.

The CLI maps them to exit codes, the gRPC server to status codes; nothing here
knows about either.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldViolation:
    """One problem with one field of the input, addressed by a dotted path."""

    field: str  # e.g. "services[0].demand.requests_per_s"
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{self.field}: {self.message}" if self.field else self.message
        return f"{text} To fix: {self.fix}" if self.fix else text


class PlannerError(Exception):
    """Base of every error the planner raises on purpose."""


class InputError(PlannerError):
    """The workload, catalog or request is invalid. Never a traceback for users."""

    def __init__(self, violations: list[FieldViolation]):
        self.violations = list(violations)
        super().__init__("; ".join(str(v) for v in self.violations))

    @classmethod
    def single(cls, field_path: str, message: str, fix: str = "") -> "InputError":
        return cls([FieldViolation(field_path, message, fix)])


@dataclass
class InfeasibilityReason:
    """Why no fleet fits: the service, the binding constraint, and what would fix it."""

    constraint: str  # deterministic label, e.g. "vram[llama-70b]", "budget", "quota[H100-SXM]"
    message: str
    fix: str = ""
    service: str | None = None

    def __str__(self) -> str:
        return f"{self.message} To fix: {self.fix}" if self.fix else self.message


class InfeasibleError(PlannerError):
    """No fleet satisfies the workload; carries the reasons and a partial result."""

    def __init__(self, reasons: list[InfeasibilityReason], result: object | None = None):
        self.reasons = list(reasons)
        self.result = result
        super().__init__("no feasible fleet: " + " | ".join(str(r) for r in self.reasons))


class SolverTimeout(PlannerError):
    """The time limit passed before any feasible plan was found."""


class Cancelled(PlannerError):
    """The caller cancelled the solve."""
