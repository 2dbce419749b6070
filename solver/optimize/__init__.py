"""The MIP: a solver-neutral linear model, its formulation, the greedy warm start,
backends and the tie-break helpers."""
