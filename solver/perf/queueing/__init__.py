"""Queueing model of one continuous-batching LLM replica: latency percentiles at a load.

`percentiles_at_rate(replica, classes, rate_per_s)` gives TTFT, TPOT and end-to-end
latency percentiles (p50/p90/p95/p99 over all requests: the classes' shares weigh the
tail) when `rate_per_s` requests/s are routed to one replica; `max_rate_for_slo(...)` is
the inverse the planner needs: the largest rate per replica at which every stated bound
holds at a percentile. docs/formulation.md ("Latency under load") has the maths;
`solver.sim.replica` is the discrete-event simulator that checks it
(bench/queueing_accuracy.py, docs/queueing.md).

In short, for rate lambda and request classes k (share pi_k, prompt P_k, output O_k):

* Physics: the engine step as a function of (decoding sequences, their context tokens,
  prompt tokens prefilled, prompt attention pairs) - the performance model's roofline,
  reduced to its linear pieces (`StepCost`, read off `solver.perf.llm.step_time_fn` by
  twelve probes). At most N sequences run at once: N = min(engine cap, KV-cache tokens /
  tokens a sequence reserves).
* Step content: each step carries the prompts that arrived during the step before
  (chunked prefill), so prefill slows decode; step lengths form a short Markov chain.
* Batch: centred on the fluid point m = lambda x L(m), L(n) the time a request holds its
  slot at batch n. A surge of arrivals stretches every stay (decode slows as the batch
  grows; the surge's prompts slow every step), which widens the batch; a tempered
  birth-death chain carries that spread. Requests that find all N slots busy wait: the
  chain's mass at N, a geometric queue beyond it draining at the saturation rate.
* TTFT = wait for a slot (if any) + the rest of the step in progress (length-biased) +
  the step(s) that prefill the prompt with those that arrived alongside it.
* TPOT = the mean step over a request's decode: the batch over its stay and the prompt
  work arriving during it.
* Percentiles over all requests: the mixture CDF sum_k pi_k F_k(x) = p, solved for x.

The package: `physics` (the step as linear pieces, the replica's limits), `contents`
(what a step carries: counts and compositions of prompts), `model` (the replica at a
rate), `numerics` (distributions and quantiles), `search` (the public functions).
"""

from solver.perf.queueing.model import METRICS, PERCENTILES, LoadPercentiles, ReplicaLoadModel
from solver.perf.queueing.physics import Replica, StepCost, TrafficClass, fit_step_cost, replica_for
from solver.perf.queueing.search import (DEFAULT_MAX_UTILIZATION, class_rate_caps, load_model, max_rate_for_slo,
                                         percentiles_at_rate, percentiles_slowed, saturation_rate)

__all__ = ["DEFAULT_MAX_UTILIZATION", "METRICS", "PERCENTILES", "LoadPercentiles", "Replica", "ReplicaLoadModel",
           "StepCost", "TrafficClass", "class_rate_caps", "fit_step_cost", "load_model", "max_rate_for_slo",
           "percentiles_at_rate", "percentiles_slowed", "replica_for", "saturation_rate"]
