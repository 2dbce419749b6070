"""From a validated workload and a catalog to the planning problem: checks, filters,
candidate configurations and exact pruning."""
