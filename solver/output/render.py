"""Human-readable rendering of a plan (from its JSON dict, so remote plans render alike)."""

from __future__ import annotations

import math


def _table(headers: list[str], rows: list[list[str]]) -> str:
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
    out = []
    gap = d.get("optimality_gap")
    status = d["status"].upper()
    if d["status"] == "optimal":
        proof = "proven optimal" if not gap else f"proven within {gap:.4%} of the optimum"
    else:
        proof = f"gap {gap:.2%}" if gap is not None else "no optimality proof"
    out.append(f"{d['workload']}: {status} ({proof}) — ${d['total_price_usd_per_hour']:.4f}/hour "
               f"(${d['total_price_usd_per_minute']:.5f}/min, ${d['monthly_usd']:,.0f}/month), {plural(d['gpus'], 'GPU')}, "
               f"{d['pricing'].replace('_', '-')} prices")
    out.append("")
    rows = [[f["offer_id"], f["region"], f["gpu"], str(f["gpus_per_instance"]), str(f["instances"]),
             f"{f['price_usd_per_hour']:.4f}", f"{f['subtotal_usd_per_hour']:.4f}"] for f in d["fleet"]]
    out.append(_table(["offer", "region", "gpu", "gpus/inst", "instances", "$/h each", "$/h"], rows))
    out.append("")
    rows = []
    for s in d["services"]:
        for a in s["assignments"]:
            slo = ", ".join(f"{c['name'][:-3].upper()} {_ms(c['predicted_ms'])}/{_ms(c['slo_ms'])}" for c in a["slo_checks"]) or "-"
            tput = "/".join(number(t) for t in a["throughput_per_replica"])
            rows.append([s["name"], a["gpu"], f"{a['gpus_per_replica']}", a["precision"] or a["source"], str(a["replicas"]),
                         f"{tput} {s['unit']}", f"{a['utilization']:.0%}", slo, a["binding_limit"] or "-"])
        if not s["assignments"]:
            rows.append([s["name"], "-", "-", "-", "0", f"0 {s['unit']}", "-", "-", "no demand"])
    out.append(_table(["service", "gpu", "gpus/replica", "precision", "replicas", "per replica", "util",
                       "SLO ms (pred/limit)", "binding"], rows))
    out.append("")
    for s in d["services"]:
        out.append(f"  {s['name']}: capacity {number(s['capacity'])} for demand {number(s['demand_with_headroom'])} {s['unit']}"
                   f" (utilization {s['utilization']:.0%})")
    solver = d.get("solver") or {}
    if solver:
        size = solver["model_size"]
        out.append("")
        out.append(f"solver: {solver['backend']}, {solver['solve_time_s']:.3f} s solve / {solver['total_time_s']:.3f} s total, "
                   f"{size['integer_variables']} integer vars, {size['constraints']} constraints, "
                   f"{solver['candidates']} candidate configurations ({solver['rejected']} ruled out); "
                   f"ties: {solver['tie_break']}; evaluator: {'ok' if d['evaluation'].get('ok') else 'FAILED'}")
    if explain:
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
    return "\n".join(lines)
