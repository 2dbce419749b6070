"""The MIP backends a user may choose, and why CP-SAT is not one of them. Stdlib only: the
CLI's argument parser, the workload schema and the gRPC service read it at start."""

from __future__ import annotations

BACKENDS = ("auto", "scip", "highs")


def withdrawn_backend(name: str) -> tuple[str, str] | None:
    """(message, fix) for a backend that is no longer offered, else None.

    CP-SAT (issue 25): it scales the model's real coefficients (prices, throughputs) to
    integers, so its optimality claim covers another model and was never reported as a
    proof; the planner's cap, verification and tie-break rounds need a proven plan, so with
    percentile SLOs it could give up at once with a false time-limit message. Measured on
    this machine: every example planned without proof where SCIP and HiGHS prove the same
    cost; bench/backends.py: $467.19/h after 60 s against SCIP's proven $443.672/h in 0.6 s."""
    if name == "cp-sat":
        return ("CP-SAT is not offered: it solves an integer-scaled copy of the model, so it proves nothing "
                "about the plan (SCIP and HiGHS prove every example).", "use scip, highs or auto")
    return None
