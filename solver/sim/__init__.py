"""Discrete-event simulation of serving replicas: the reference the planner checks its caps against.

`replica.simulate_replica` runs one continuous-batching LLM replica step by step (the
analytic model's StepCost physics, two schedulers) under synthetic traffic, and
`replica.simulate_requests` replays a request list; both run the compiled loop of
`kernel` (numba, or the same function as plain Python). `servers.simulate_servers` runs a
measured-profile replica as c parallel servers. `verify.verify_replica` judges latency
bounds at a percentile with confidence intervals from independent replications
(`stats`); `fleet.simulate_plan` replays a plan's fleet (or a `trace`) and judges each
service and assignment. Nothing here imports numba until a simulation runs.
"""
