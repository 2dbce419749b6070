"""Warnings for plans far from sensible: replicas that run nearly empty.

A plan can be optimal and still absurd to a reader: when a latency bound leaves each
replica only a trickle of its capacity, the cheapest fleet is enormous (one workload of
the issue tracker planned 121,000 GPUs at 1.4 % utilization without a word). The plan then
says so, with the bound that forces it, so that the user can see which bound to relax.

The test is the real demand's rate (without constraints.headroom) over what the replicas
could sustain at all (their saturation rate under the queueing model,
`at_load.utilization`), over every replica of the service - measured profiles excluded
(their rate is measured, with no model behind it). The warning also quotes the plan's
utilization (the real demand / the planned capacity, as the table and the JSON report
it), a different figure where a latency bound caps replicas below saturation: both are
named, so that neither reads as the other.
"""

from __future__ import annotations

LOW_UTILIZATION = 0.10  # below this share of what its replicas could sustain, a service is flagged
_LABEL = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}


def low_utilization_warnings(s, views) -> list[str]:
    """`s`: the compiled service; `views`: its AssignmentViews with `at_load` set."""
    estimated = [v for v in views if v.source == "estimate" and v.at_load is not None and v.replicas > 0]
    if not estimated or s.raw_demand <= 0:
        return []
    replicas = sum(v.replicas for v in estimated)
    saturation = sum(v.at_load.utilization * v.replicas for v in estimated) / replicas
    if saturation >= LOW_UTILIZATION:
        return []
    utilization = sum(v.utilization * v.replicas for v in estimated) / replicas  # the table's figure
    # The real demand these replicas carry (their routing without headroom): the service's
    # demand, less what measured replicas or disaggregated pools take.
    carried = sum(sum(v.routed) for v in estimated) * (s.raw_demand / s.total_demand if s.total_demand > 0 else 1.0)
    return [f"replicas run at {saturation:.1%} of what they could sustain (utilization {utilization:.1%} of the "
            f"planned capacity; {replicas} replica(s) for {carried:.3g} {s.unit}): {_binding(s, estimated)}"]


def _binding(s, views) -> str:
    """What keeps the replicas this empty, and what to change."""
    all_replicas = sum(v.replicas for v in views)
    if s.min_replicas and all_replicas <= s.min_replicas:
        return (f"min_replicas {s.min_replicas} binds (the demand needs less). To fix: lower min_replicas if "
                "this many replicas is not meant for redundancy")
    # The bound whose predicted value is closest to its limit on the emptiest configuration.
    worst = min(views, key=lambda v: v.at_load.utilization)
    at = worst.at_load
    # Under a percentile SLO the bounds hold at the planned load; without one, on the
    # service times at the batch the estimate chose (the SLO checks).
    if s.slo.percentile:
        values = {name: getattr(at, name, None) for name, _ in s.slo.bounds()}
        how = f"at p{at.percentile} at the demand's load"
    else:
        values = {c.name: c.predicted_ms for c in worst.slo_checks}
        how = "without queueing, at the batch the bound allows"
    ratios = [(values[name] / bound, name, bound) for name, bound in s.slo.bounds()
              if values.get(name) is not None and bound > 0]
    if not ratios:
        return "no latency bound is stated; check the demand and the configurations allowed"
    ratio, name, bound = max(ratios)
    return (f"the {_LABEL[name]} bound of {bound:g} ms binds ({_LABEL[name]} {values[name]:.0f} ms {how} on "
            f"{worst.config}, {ratio:.0%} of the bound, at {at.utilization:.1%} of its saturation rate). To fix: relax "
            f"the {_LABEL[name]} bound, shorten the requests, or allow faster GPUs or more GPUs per replica")


def tail_class_warnings(s, config) -> list[str]:
    """Classes of a percentile service that miss a bound even without queueing on this
    configuration and were let sit in the percentile's tail (solver/compile/load_caps.py):
    said, so that nobody reads the tail as a promise for those requests."""
    if s.slo.percentile is None or config.source != "estimate":
        return []
    out = []
    for k, perf in enumerate(config.classes):
        if perf.reason and perf.throughput > 0 and k < len(s.class_names):
            out.append(f"class {s.class_names[k]} ({s.class_shares[k]:.3%} of requests) misses its bound on "
                       f"{config.key} even without queueing ({perf.reason}); it sits in the {100 - s.slo.percentile:g} % "
                       f"of requests the p{s.slo.percentile} SLO lets miss")
    return out


def verification_warnings(s, views) -> list[str]:
    """Configurations of the plan that simulation in the loop did not confirm at the rate
    the plan routes to them (solver/compile/verified_caps.py): the plan then does not claim
    the percentile SLO for them, and says what to do."""
    unconfirmed = [v for v in views if v.verified is not None and v.verified.verdict != "met"]
    if not unconfirmed:
        return []
    parts = [f"{v.config} {v.verified.verdict} ({v.verified.reason})" for v in unconfirmed]
    return [f"the simulator did not confirm p{unconfirmed[0].verified.percentile} at the planned rate on "
            f"{len(unconfirmed)} configuration(s): " + "; ".join(parts) + ". To fix: give the solve more time "
            "(solver.time_limit_s) so that verification can lower these caps and solve again, or check the plan "
            "with solver-cli simulate"]
