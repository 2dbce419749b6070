"""Discrete-event simulation of serving replicas: the check on the queueing model.

`replica.simulate_replica` runs one continuous-batching LLM replica step by step with the
performance model's step times; `servers.simulate_servers` runs a measured-profile
replica as c parallel servers; `fleet.simulate_plan` replays a plan's fleet at its
demand and reports each service's achieved percentiles against its SLO.
"""
