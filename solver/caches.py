"""Every cache a process keeps between plans, in one place, to empty them all at once.

Plans reuse work across calls (candidate configurations, pruned offers, performance
estimates, setups per query group, queueing models, caps and values under load, groupings
of configurations, solves that ended in a proof). Each is keyed on what it depends on, so
a warm process answers exactly as a cold one; `clear_all` exists so that tests can check
that, and benchmarks can measure cold plans without a new process.
"""

from __future__ import annotations


def clear_all() -> None:
    """Empty every process-wide cache of the planner (the default catalog stays loaded)."""
    from solver.compile import load_caps
    from solver.compile.candidates import ESTIMATES, PRUNED_OFFERS, SHARED_CACHE, WHOLE_INSTANCE_PRUNING
    from solver.optimize import formulation, service_bounds
    from solver.optimize.backends.mathopt_backend import SOLVES
    from solver.perf.llm import GROUPS
    from solver.perf.queueing import contents, model, search

    SHARED_CACHE.clear()
    ESTIMATES.clear()
    PRUNED_OFFERS.clear()
    WHOLE_INSTANCE_PRUNING.clear()
    GROUPS.clear()
    load_caps._llm_cap.cache_clear()
    load_caps._sat_bounds.cache_clear()
    load_caps._first_bounds.cache_clear()
    load_caps._TERMS.clear()
    load_caps._SLOWED.clear()
    search.load_model.cache_clear()
    search._at_rate.cache_clear()
    contents._atoms.cache_clear()
    contents._count_values.cache_clear()
    model._batch_grid.cache_clear()
    with formulation._GROUPINGS_LOCK:
        formulation._GROUPINGS.clear()
    formulation._LAST_GROUPS = {}
    SOLVES.clear()
    service_bounds._solved.cache_clear()
