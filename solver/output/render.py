"""Human-readable rendering of a plan (from its JSON dict, so remote plans render alike)."""

from __future__ import annotations

import math

from solver.output.safe_text import escape_controls


def _table(headers: list[str], rows: list[list[str]]) -> str:
    # Cells quote user names (offers, regions, models): escaped before measuring, so columns line up.
    rows = [[escape_controls(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def number(x: float) -> str:
    """A quantity people read: 1,300 not 1.3e+03; 19 not 19.0; three significant digits below 100."""
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if x == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def plural(n: int, word: str) -> str:
    """"1 GPU", "2 GPUs"."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _ms(x) -> str:
    return "-" if x is None else (f"{x:.1f}" if x < 100 else f"{x:.0f}")


def render_plan(d: dict, explain: bool = False) -> str:
    """The plan for a terminal; names from the workload may hold control characters, which are escaped."""
    if "periods" in d:
        text = render_horizon(d) + "\n\n" + _render_single(d, explain, first_period=d["periods"][0]["name"])
    else:
        text = _render_single(d, explain)
    return escape_controls(text)


def _unconfirmed(d: dict) -> str:
    """What the headline adds when the simulator refuted configurations the plan keeps: the
    proof is over the caps in force, which the time left could not lower."""
    keys = {a["config"] for s in d.get("services", []) for a in s.get("assignments", [])
            if (a.get("verified") or {}).get("verdict") not in (None, "met")}
    return f"; not confirmed by the simulator: {plural(len(keys), 'configuration')}, see the warnings" if keys else ""


def _render_single(d: dict, explain: bool, first_period: str | None = None) -> str:
    out = []
    gap = d.get("optimality_gap")
    status = d["status"].upper()
    if d["status"] == "optimal":
        proof = "proven optimal" if not gap else f"proven within {gap:.4%} of the optimum"
    else:
        proof = f"gap {gap:.2%}" if gap is not None else "no optimality proof"
    proof += _unconfirmed(d)
    if first_period is not None:
        out.append(f"First period ({first_period}, the fleet to run now): ${d['total_price_usd_per_hour']:.4f}/hour, "
                   f"{plural(d['gpus'], 'GPU')}")
    else:
        out.append(f"{d['workload']}: {status} ({proof}) — ${d['total_price_usd_per_hour']:.4f}/hour "
                   f"(${d['total_price_usd_per_minute']:.5f}/min, ${d['monthly_usd']:,.0f}/month), {plural(d['gpus'], 'GPU')}, "
                   f"{d['pricing'].replace('_', '-')} prices")
    out.append("")
    if first_period is not None:
        rows = [[f["offer_id"], f["region"], f["gpu"], str(f["gpus_per_instance"]), _tier(f["tier"]), str(f["instances"]),
                 f"{f['price_usd_per_hour']:.4f}", f"{f['subtotal_usd_per_hour']:.4f}"] for f in d["periods"][0]["fleet"]]
        out.append(_table(["offer", "region", "gpu", "gpus/inst", "tier", "instances", "$/h each", "$/h"], rows))
    else:
        rows = [[f["offer_id"], f["region"], f["gpu"], str(f["gpus_per_instance"]), str(f["instances"]),
                 f"{f['price_usd_per_hour']:.4f}", f"{f['subtotal_usd_per_hour']:.4f}"] for f in d["fleet"]]
        out.append(_table(["offer", "region", "gpu", "gpus/inst", "instances", "$/h each", "$/h"], rows))
    out.extend(_power_lines(d))
    out.append("")
    rows = []
    for s in d["services"]:
        for a in s["assignments"]:
            slo = ", ".join(f"{c['name'][:-3].upper()} {_ms(c['predicted_ms'])}/{_ms(c['slo_ms'])}" for c in a["slo_checks"]) or "-"
            tput = "/".join(number(t) for t in a["throughput_per_replica"])
            rows.append([s["name"], a["gpu"], f"{a['gpus_per_replica']}", a["precision"] or a["source"], str(a["replicas"]),
                         f"{tput} {s['unit']}", _util(a), slo, _at_load(a.get("at_load")),
                         a["binding_limit"] or "-"])
        if not s["assignments"]:
            split = any(x.get("serves") == s["name"] for x in d["services"])
            rows.append([s["name"], "-", "-", "-", "0", f"0 {s['unit']}", "-", "-", "-",
                         "disaggregated" if split else "no demand"])
    out.append(_table(["service", "gpu", "gpus/replica", "precision", "replicas", "per replica", "util",
                       "SLO ms (pred/limit)", "under load ms", "binding"], rows))
    out.append("")
    for s in d["services"]:
        planned = "" if s["demand_with_headroom"] == s["demand"] else \
            f" ({number(s['demand_with_headroom'])} with headroom)"
        out.append(f"  {s['name']}: capacity {number(s['capacity'])} for demand {number(s['demand'])} {s['unit']}"
                   f"{planned} (utilization {_util(s, ', ')})" + _confidence(s))
        checked = _verified(s)
        if checked:
            out.append(f"    {checked}")
        pool = _pool_line(s)
        if pool:
            out.append(f"    {pool}")
        red = s.get("redundancy")
        if red:
            out.append(f"    N+1 by {red['domain']}: the worst loss, {red['worst_domain']}, leaves "
                       f"{red['surviving_fraction']:.1%} of the demand served (needs {red['serve_fraction']:.0%})"
                       + ("" if red["exact"] else "; bounded, not enumerated"))
        cover = s.get("spot_interruptions")
        if cover:
            out.append("    spot reclaimed: " + (
                f"the worst pool, {cover['worst_domain']}, leaves {cover['surviving_fraction']:.1%} of the demand "
                f"served" if cover["worst_domain"] else "no spot instances to reclaim")
                + f" (needs {cover['serve_fraction']:.0%})")
        for warning in s.get("warnings", []):
            out.append(f"    WARNING: {warning}")
    solver = d.get("solver") or {}
    if solver:
        size = solver["model_size"]
        out.append("")
        out.append(f"solver: {solver['backend']}, {solver['solve_time_s']:.3f} s solve / {solver['total_time_s']:.3f} s total, "
                   f"{size['integer_variables']} integer vars, {size['constraints']} constraints, "
                   f"{solver['candidates']} candidate configurations ({solver['rejected']} ruled out); "
                   f"ties: {solver['tie_break']}; evaluator: {'ok' if d['evaluation'].get('ok') else 'FAILED'}")
    if explain:
        out.extend(_priced_difference(d.get("confidence_cost"), "margin_usd_per_hour", lambda c: (
            f"Confidence margin: ${c['margin_usd_per_hour']:.4f}/hour (the same workload with every service at "
            f"slo.confidence \"nominal\": ${c['nominal_price_usd_per_hour']:.4f}/hour)"), "Confidence margin"))
        out.extend(_priced_difference(d.get("redundancy_cost"), "extra_usd_per_hour", lambda c: (
            f"Redundancy cost: {c['note'].split(':')[0]} costs ${c['extra_usd_per_hour']:.4f}/hour more than the "
            f"same workload without failure domains (${c['without_usd_per_hour']:.4f}/hour)"), "Redundancy cost"))
        out.extend(_priced_difference(d.get("spot_cover_cost"), "extra_usd_per_hour", lambda c: (
            f"Spot cover cost: ${c['extra_usd_per_hour']:.4f}/hour more (per hour of the horizon) than the same "
            f"workload without spot_interruptions (${c['without_usd_per_hour']:.4f}/hour)"), "Spot cover cost"))
    choice = d.get("serving_choice")
    if explain and choice:
        out.append("")
        out.append(_serving_choice_text(choice, d.get("total_price_usd_per_hour")))
    if explain and "periods" in d:
        # The multi-period planner does not rank configurations per service: saying "none"
        # would claim that each service had a single configuration.
        out.append("")
        out.append("Alternatives not taken: not computed for multi-period plans (periods, pricing tiers or a "
                   "running fleet)")
    elif explain:
        out.append("")
        out.append("Alternatives not taken:")
        for s in d["services"]:
            out.append(f"  {s['name']}:")
            for alt in s.get("alternatives", []):
                if not alt["gpus_per_replica"]:
                    out.append(f"    - {alt['reason']}")
                    continue
                out.append(f"    - {_alternative_name(alt)}: {alt['reason']}")
            if not s.get("alternatives"):
                out.append("    (none: this was the only configuration)")
    return "\n".join(out)


def _power_lines(d: dict) -> list[str]:
    """The fleet's power and energy, the owned hardware's fixed cost and each owned site."""
    if d.get("power_kw") is None and not d.get("sites"):
        return []
    out = [""]
    if d.get("power_kw") is not None:
        energy = "" if "periods" in d else f", {number(d['power_kw'])} kWh per hour"
        if "periods" in d and d.get("energy_kwh") is not None:
            energy = f"; {number(d['energy_kwh'])} kWh over the {d['horizon_hours']:g}-hour horizon"
        out.append(f"power: {number(d['power_kw'])} kW at full board power (an upper bound){energy}")
    per_token = [f"{s['name']} {s['energy_kwh_per_million_tokens']:.4g}" for s in d["services"]
                 if s.get("energy_kwh_per_million_tokens") is not None]
    if per_token:
        out.append(f"energy per million output tokens at demand, kWh: {', '.join(per_token)}")
    if d.get("owned_amortised_usd_per_hour") is not None:
        out.append(f"owned hardware: ${d['owned_amortised_usd_per_hour']:.4f}/hour amortised, paid whether used or "
                   "not (not in the cost above)")
    for site in d.get("sites") or ():
        cap = f" of its {number(site['power_cap_kw'])} kW cap" if site["power_cap_kw"] is not None else " (no cap)"
        out.append(f"  site {site['site']}: {number(site['power_kw'])} kW{cap}, {site['gpus_running']} of "
                   f"{site['gpus_owned']} owned GPUs running")
    return out


def _util(x: dict, sep: str = " (") -> str:
    """"83%", or "83% (+17% headroom)": the real demand's share of capacity, then the share
    constraints.headroom holds in reserve (the plan is sized for both)."""
    extra = x.get("headroom_utilization") or 0.0
    if extra <= 0:
        return f"{x['utilization']:.0%}"
    return f"{x['utilization']:.0%}{sep}+{extra:.0%} headroom" + (")" if sep == " (" else "")


def _at_load(at: dict | None) -> str:
    """"p99 TTFT 204 (180-260), TPOT 61 (55-75) (miss)": the percentiles at the real demand's
    load (headroom apart), queueing included, each with its band (a replica slower or faster
    than modelled)."""
    if not at:
        return "-"
    band = at.get("band") or {}
    parts = [f"{label} {_ms(at[name])}{_band(band.get(name))}" for name, label in
             (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("latency_ms", "lat")) if at.get(name) is not None]
    if not parts:
        return f"p{at['percentile']} " + ("saturated" if at["utilization"] >= 0.999 else f"{at['utilization']:.0%} of saturation")
    text = f"p{at['percentile']} " + ", ".join(parts)
    if not at["meets_slo"]:
        return text + " (miss)"
    return text + ("" if at.get("meets_slo_robust", True) else " (miss when slower)")


def _band(pair) -> str:
    """" (180-260)"; "-" for an end where the replica cannot keep up."""
    if not pair:
        return ""
    return f" ({_ms(pair[0])}-{_ms(pair[1])})"


def _confidence(s: dict) -> str:
    """"; confidence 0.9 (replica 1.28x slower, +3 % traffic): capacity margin 18 %"."""
    c = s.get("confidence")
    if not c:
        return ""
    if c["level"] == "nominal":
        text = "; confidence nominal (caps at the model's edge)"
    else:
        text = (f"; confidence {c['level']:g} (replica {c['slowdown']:.2f}x slower, +{c['rate_margin'] * 100:g} % "
                f"traffic)")
    margin = s.get("capacity_margin")
    return text + ("" if margin is None else f": capacity margin {margin * 100:.0f} %")


def _priced_difference(cost: dict | None, key: str, text, label: str) -> list[str]:
    """An explanation's re-solved price (confidence margin, redundancy cost): a blank line
    and its sentence, or why it was not computed; nothing where the plan has none."""
    if not cost:
        return []
    return ["", text(cost) if cost[key] is not None else f"{label}: {cost['note']}"]


def _serving_choice_text(choice: dict, price: float | None) -> str:
    """"Serving: disaggregated pools save $28.0000/hour (25.0 %) against aggregated-only ($112.0000/hour); ..."."""
    def vs(label: str, other: float | None) -> str:
        if other is None or price is None:
            return f"{label}: no such plan"
        diff = other - price
        share = diff / other if other > 0 else 0.0
        if abs(diff) < 1e-6:
            return f"{label} costs the same (${other:.4f}/hour)"
        return f"{label} ${other:.4f}/hour ({'+' if diff > 0 else ''}{diff:.4f}, this plan {share:.1%} cheaper)"

    return (f"Serving choice: {vs('aggregated-only', choice['aggregated_only_usd_per_hour'])}; "
            f"{vs('disaggregated-only', choice['disaggregated_only_usd_per_hour'])} ({choice['note']})")


def _pool_line(s: dict) -> str:
    """A disaggregated pool: what it is, and (once per deployment, on the prefill pool) the
    simulator's replay of the deployment."""
    if not s.get("role"):
        return ""
    line = f"{s['role']} pool of {s['serves']} over {s['link']}"
    sim = s.get("simulated") or {}
    if s["role"] == "prefill" and sim.get("verdict") in ("met", "missed", "inconclusive"):
        ttft, tpot = sim["ttft_ms"], sim["tpot_ms"]
        shown = ", ".join(f"{name} {value:.4g} ms" for name, value in (("TTFT", ttft), ("TPOT", tpot))
                          if value is not None)
        line += (f" (KV transfer {sim['kv_transfer_ms']:.3g} ms a request); simulated deployment {sim['verdict']} "
                 f"at {number(sim['rate_rps'])} {s['unit']} ({sim['requests']:,} requests): p{sim['percentile']} "
                 f"{shown}")
    return line


def _verified(s: dict) -> str:
    """"simulated: chat@...:1gpu:fp8 met (20,000 requests, 4 seeds at 12.4/s per replica: p99 TTFT 191 [177, 204], ...)"."""
    checks = [(a["config"], a["verified"]) for a in s["assignments"] if a.get("verified")]
    if not checks:
        return ""
    parts = []
    for config, v in checks:
        ci = v.get("ci") or {}
        values = ", ".join(f"{m[:-3].upper()} {v[m + '_p']:.0f} [{_ms_or_open(lo)}, {_ms_or_open(hi)}]"
                           for m in ("ttft_ms", "tpot_ms", "latency_ms") if v.get(m + "_p") is not None
                           for lo, hi in [ci.get(m) or (None, None)])
        detail = f"{v['requests']:,} requests, {v['seeds']} seeds at {v['rate_per_s']:.3g}/s per replica"
        parts.append(f"{config} {v['verdict']} ({detail}{': p' + str(v['percentile']) + ' ' + values if values else ''}"
                     f"{'' if v['verdict'] == 'met' else '; ' + v['reason']})")
    return "simulated: " + "; ".join(parts)


def _ms_or_open(x: float | None) -> str:
    """An interval's end in ms; "?" where it has none (the replica fell behind there)."""
    return "?" if x is None else f"{x:.0f}"


def _alternative_name(alt: dict) -> str:
    """"nebius/gpu-l40s-a_4gpu (4x L40S), 1 GPU per replica, fp8": offer and size, not just the GPU."""
    g = alt["gpus_per_replica"]
    per_replica = f"{g} GPU{'s' if g != 1 else ''} per replica"
    precision = alt["precision"] or "measured"
    if not alt.get("offer_id"):
        return f"{alt['gpu']}, {per_replica}, {precision}"
    return f"{alt['offer_id']} ({alt['gpus_per_instance']}x {alt['gpu']}), {per_replica}, {precision}"


def render_infeasible(reasons: list[dict]) -> str:
    lines = ["No feasible fleet:"]
    for r in reasons:
        lines.append(f"  - [{r['constraint']}] {r['message']}")
        if r.get("fix"):
            lines.append(f"    To fix: {r['fix']}")
    return escape_controls("\n".join(lines))


def _tier(t: str) -> str:
    return t.replace("_", "-")


def render_horizon(d: dict) -> str:
    """Periods, reservations, savings, and (with a running fleet) the changes and rollout."""
    hs = d["horizon_solver"]
    status = d["status"].upper()
    if d["status"] == "optimal":
        proof = "proven optimal" if not hs["gap"] else f"proven within {hs['gap']:.4%} of the optimum"
    else:
        proof = f"gap {hs['gap']:.2%}: no plan costs less than ${hs['bound_usd']:,.2f}"
    proof += _unconfirmed(d)
    out = [f"{d['workload']}: {status} ({proof}) — ${d['horizon_cost_usd']:,.2f} over {d['horizon_hours']:g} hours "
           f"(${d['average_price_usd_per_hour']:.4f}/hour on average, ${d['average_price_usd_per_hour'] * 730:,.0f}/month); "
           f"tiers: {', '.join(_tier(t) for t in d['pricing_tiers'])}", ""]
    rows = []
    for p in d["periods"]:
        by = {}
        for f in p["fleet"]:
            kind = "reserved" if f["tier"].startswith("reserved") else f["tier"]
            by[kind] = by.get(kind, 0) + f["instances"]
        unused = sum(u["instances"] for u in p["unused_reservations"])
        rows.append([p["name"], f"{p['hours']:g}", f"{p['total_price_usd_per_hour']:.4f}", str(p["gpus"]),
                     str(by.get("reserved", 0)), str(by.get("on_demand", 0)), str(by.get("spot", 0)), str(unused),
                     "ok" if p["evaluation"].get("ok") else "FAILED"])
    out.append(_table(["period", "hours", "$/hour", "GPUs", "reserved", "on-demand", "spot", "idle reserved",
                       "evaluator"], rows))
    if d.get("energy_kwh") is not None:
        out.append(f"energy at full board power: {number(d['energy_kwh'])} kWh over the horizon ("
                   + ", ".join(f"{p['name']} {number(p['power_kw'])} kW x {p['hours']:g} h = {number(p['energy_kwh'])} kWh"
                               for p in d["periods"]) + ")")
    out.append("")
    if d["reservations"]:
        out.append("Reservations (bought for the horizon, paid every hour):")
        out.append(_table(["offer", "term", "instances", "GPUs", "$/h each", "$/h"],
                          [[r["offer_id"], _tier(r["term"]), str(r["instances"]), str(r["gpus"]),
                            f"{r['price_usd_per_hour']:.4f}", f"{r['price_usd_per_hour'] * r['instances']:.4f}"]
                           for r in d["reservations"]]))
    else:
        out.append("Reservations: none")
    s = d.get("savings")
    if s:
        out.append(f"Savings: ${s['savings_usd']:,.2f} ({s['savings_fraction']:.1%}) against {s['baseline']} "
                   f"(${s['baseline_usd']:,.2f})")
    out.append("")
    lines: dict[tuple[str, str], list[int]] = {}
    names = [p["name"] for p in d["periods"]]
    for j, p in enumerate(d["periods"]):
        for f in p["fleet"]:
            lines.setdefault((f["offer_id"], f["tier"]), [0] * len(names))[j] += f["instances"]
    if len(names) <= 12:
        out.append("Instances per period:")
        out.append(_table(["offer", "tier"] + names,
                          [[o, _tier(t)] + [str(n) for n in counts] for (o, t), counts in sorted(lines.items())]))
    else:
        out.append(f"Instances per period: {len(names)} periods (see --format json, key periods[].fleet)")
    if "changes" in d:
        out.append("")
        table: dict[tuple[str, bool], dict[str, int]] = {}
        for c in d["changes"]:
            table.setdefault((c["offer_id"], c["spot"]), {})[c["action"]] = c["instances"]
        out.append("Changes against the running fleet (first period):")
        out.append(_table(["offer", "spot", "keep", "add", "remove"],
                          [[o, "yes" if sp else "no", str(v.get("keep", 0)), str(v.get("add", 0)), str(v.get("remove", 0))]
                           for (o, sp), v in sorted(table.items())]))
        r = d["rollout"]
        counts: dict[str, int] = {}
        for st in r["steps"]:
            counts[st["action"]] = counts.get(st["action"], 0) + 1
        out.append(f"Rollout, make before break: {len(r['steps'])} steps ("
                   + ", ".join(f"{counts.get(a, 0)} {a}" for a in ("launch", "start", "stop", "terminate"))
                   + f"), {r['surge_instances']} temporary instance(s)" + (f"; {r['note']}" if r["note"] else ""))
        for st in r["steps"][:12]:
            what = f" {st['service']} ({st['config']})" if st.get("service") else ""
            out.append(f"  {st['step']:>3}. {st['action']:<9} {st['instance']}{what}{' [temporary]' if st['temporary'] else ''}")
        if len(r["steps"]) > 12:
            out.append(f"  ... {len(r['steps']) - 12} more (--format json, key rollout.steps)")
    out.append("")
    out.append(f"solver: {hs['method']}; {hs['distinct_periods']} distinct period(s), {hs['period_solves']} period "
               f"MIP solves, {hs['nodes']} search nodes" + (f"; stopped: {hs['detail']}" if hs["detail"] else "")
               + f"; evaluator: {'ok' if d['evaluation'].get('ok') else 'FAILED'} in every period")
    return "\n".join(out)
