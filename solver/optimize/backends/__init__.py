"""MIP backends behind one small interface: `solve(model, options) -> SolveOutcome`."""

from solver.optimize.backends.base import Backend, SolveOptions, get_backend

__all__ = ["Backend", "SolveOptions", "get_backend"]
