"""The report's PNG plots, drawn with matplotlib's object API (no pyplot global state,
so it is safe in servers and threads).

- per sweep: cost against the swept value, with the fleet mix by GPU type beneath
  ("cost vs demand growth" for a demand sweep);
- per SLO sweep: the cost–latency frontier of the service;
- the fleet mix by GPU type per scenario, with each scenario's cost;
- the sensitivity of the base plan: what relaxing each binding constraint saves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from solver.review.report_data import ReportData, SweepSeries
from solver.review.result import ScenarioResult
from solver.review.sensitivity import SensitivityRow

MAX_MIX_BARS = 60  # beyond this a bar per scenario is unreadable; sweeps have their own plots
DPI = 110
_SLO_WORDS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}
_SWEEP_TITLES = {"demand": "Cost vs demand growth", "price": "Cost vs price", "gpu_quota": "Cost vs GPU quota",
                 "offer_quota": "Cost vs offer quota", "availability": "Cost vs availability",
                 "budget": "Cost vs budget", "headroom": "Cost vs headroom",
                 "reservation": "Cost against reserved capacity", "spot_share": "Cost against spot share"}


@dataclass(frozen=True)
class Plot:
    file: str  # relative to the report, e.g. "plots/sweep-demand-growth.png"
    title: str
    caption: str


def draw_all(data: ReportData, out_dir: Path) -> list[Plot]:
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    colors = _gpu_colors(data.gpu_types)
    plots: list[Plot] = []
    mix = [r for r in data.results if r.group in ("base", "scenario")]
    if len(mix) + sum(len(s.points) for s in data.sweeps) <= MAX_MIX_BARS:
        mix += [r for r in data.results if r.group == "sweep"]
    plots.append(_fleet_mix(mix[:MAX_MIX_BARS], len(mix), colors, plot_dir / "fleet-mix.png"))
    for series in data.sweeps:
        if not series.points:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", series.name.lower()).strip("-") or "sweep"
        if series.change == "slo":
            plots.append(_frontier(series, plot_dir / f"frontier-{slug}.png"))
        else:
            plots.append(_sweep(series, data.base, colors, plot_dir / f"sweep-{slug}.png"))
    binding = [r for r in data.sensitivity if r.binds and r.delta_usd_per_hour is not None]
    if binding:
        plots.append(_sensitivity(binding, plot_dir / "sensitivity.png"))
    return plots


def _gpu_colors(gpu_types: list[str]) -> dict[str, tuple]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return {g: cmap(i % 20) for i, g in enumerate(gpu_types)}


def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI)


def _fleet_mix(results: list[ScenarioResult], total: int, colors: dict, path: Path) -> Plot:
    fig = Figure(figsize=(9, max(2.5, 0.42 * len(results) + 1.2)), layout="constrained")
    ax = fig.add_subplot()
    labels = [r.name for r in results]
    y = list(range(len(results)))
    left = [0] * len(results)
    for gpu, color in colors.items():
        widths = [r.gpus_by_type.get(gpu, 0) for r in results]
        if any(widths):
            ax.barh(y, widths, left=left, color=color, label=gpu, edgecolor="white", linewidth=0.5)
            left = [a + b for a, b in zip(left, widths)]
    top = max(left, default=0) or 1
    for i, r in enumerate(results):
        text = f"${r.usd_per_hour:,.2f}/h" if r.planned else r.status
        ax.text(left[i] + top * 0.01, i, text, va="center", fontsize=8, color="black" if r.planned else "#b00020")
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.25)
    ax.set_xlabel("GPUs")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Fleet mix by GPU type per scenario")
    if colors:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="GPU type", title_fontsize=7)
    _save(fig, path)
    shown = f" (the first {len(results)} of {total} scenarios; results.csv has all)" if total > len(results) else ""
    return Plot(f"plots/{path.name}", "Fleet mix by GPU type",
                f"GPUs of each type in each scenario's cheapest fleet, with the fleet's cost at the end of the bar{shown}.")


def _sweep(series: SweepSeries, base: ScenarioResult, colors: dict, path: Path) -> Plot:
    fig = Figure(figsize=(8, 6.2), layout="constrained")
    ax, mix = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    ok = [p for p in series.points if p.planned]
    failed = [p for p in series.points if not p.planned]
    scope = f" ({series.service})" if series.service else (" (all services)" if series.change == "demand" else "")
    what = f"{series.change}.{series.parameter}{scope}"
    ax.plot([p.value for p in ok], [p.usd_per_hour for p in ok], marker="o", color="#1f5fa8", label="cheapest fleet")
    if base.planned and series.change == "demand":
        ax.axhline(base.usd_per_hour, color="grey", linestyle=":", linewidth=1, label="base")
    if base.planned and series.change in ("reservation", "spot_share"):
        chosen = f", {base.reserved_gpus} GPUs reserved" if base.reserved_gpus is not None else ""
        ax.axhline(base.usd_per_hour, color="grey", linestyle=":", linewidth=1, label=f"planner's own choice{chosen}")
    if failed:
        _mark_failures(ax, failed)
    horizon = any(p.horizon_cost_usd is not None for p in ok)
    ax.set_ylabel("$ / hour, horizon average" if horizon else "$ / hour")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{_SWEEP_TITLES.get(series.change, 'Cost')}: sweep {series.name!r}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    values = [p.value for p in series.points]
    width = 0.8 * min((b - a for a, b in zip(values, values[1:]) if b > a), default=1.0)
    bottom = [0] * len(series.points)
    for gpu, color in colors.items():
        heights = [p.gpus_by_type.get(gpu, 0) for p in series.points]
        if any(heights):
            mix.bar(values, heights, bottom=bottom, width=width, color=color, label=gpu, edgecolor="white", linewidth=0.5)
            bottom = [a + b for a, b in zip(bottom, heights)]
    mix.set_ylabel("GPUs")
    mix.yaxis.set_major_locator(MaxNLocator(integer=True))
    mix.set_xlabel(what)
    if any(bottom):
        mix.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="GPU type", title_fontsize=7)
    _save(fig, path)
    caption = (f"Cost of the cheapest fleet as {what} goes from {values[0]:g} to {values[-1]:g}, "
               "and the GPUs it uses by type.")
    return Plot(f"plots/{path.name}", f"{_SWEEP_TITLES.get(series.change, 'Cost')} ({series.name})", caption)


def _frontier(series: SweepSeries, path: Path) -> Plot:
    metric, service = series.parameter, series.service
    word = _SLO_WORDS.get(metric, metric)
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    ok = [p for p in series.points if p.planned]
    failed = [p for p in series.points if not p.planned]
    ax.step([p.value for p in ok], [p.usd_per_hour for p in ok], where="post", color="#1f5fa8", linestyle="--",
            marker="o", label=f"cost at each {word} SLO")
    achieved = [(p.latency_ms.get(service, {}).get(metric), p.usd_per_hour) for p in ok]
    achieved = [(x, y) for x, y in achieved if x is not None]
    frontier = _pareto(achieved)
    if achieved:
        ax.scatter([x for x, _ in achieved], [y for _, y in achieved], color="#e07b00", zorder=3,
                   label=f"predicted {word} of the plan")
    if frontier:
        ax.step([x for x, _ in frontier], [y for _, y in frontier], where="post", color="#e07b00",
                label="cost–latency frontier")
    if failed:
        _mark_failures(ax, failed)
    ax.set_xlabel(f"{service} {word} (ms)")
    ax.set_ylabel("fleet $ / hour")
    ax.set_title(f"Cost–latency frontier of {service} ({word} SLO swept)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)
    values = [p.value for p in series.points]
    caption = (f"The whole fleet's cost as {service}'s {word} SLO goes from {values[0]:g} to {values[-1]:g} ms "
               f"(dashed), and the {word} the chosen plan actually achieves (dots): the frontier shows the cheapest "
               f"cost for each latency.")
    return Plot(f"plots/{path.name}", f"Cost–latency frontier: {service} {word}", caption)


def _mark_failures(ax, failed: list[ScenarioResult]) -> None:
    """Crosses along the bottom edge (axes coordinates, so they never stretch the cost axis)."""
    ax.plot([p.value for p in failed], [0.03] * len(failed), "x", color="#b00020", markersize=9,
            transform=ax.get_xaxis_transform(), clip_on=False,
            label="no plan (" + ", ".join(sorted({p.status for p in failed})) + ")")


def _pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points not beaten on both latency and cost, from fastest to slowest."""
    out: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not out or y < out[-1][1] - 1e-9:
            out.append((x, y))
    return out


def _sensitivity(rows: list[SensitivityRow], path: Path) -> Plot:
    rows = sorted(rows, key=lambda r: r.delta_usd_per_hour)[:30]
    fig = Figure(figsize=(8, max(2.2, 0.45 * len(rows) + 1.2)), layout="constrained")
    ax = fig.add_subplot()
    savings = [-r.delta_usd_per_hour for r in rows]
    ax.barh(range(len(rows)), savings, color="#2e8b57")
    ax.set_yticks(range(len(rows)), [r.relaxation for r in rows], fontsize=8)
    ax.invert_yaxis()
    for i, s in enumerate(savings):
        ax.text(s, i, f" ${s:,.2f}/h", va="center", fontsize=8)
    ax.set_xlim(0, max(savings) * 1.3)
    ax.set_xlabel("saving, $ / hour")
    ax.set_title("What relaxing each binding constraint one step saves")
    _save(fig, path)
    return Plot(f"plots/{path.name}", "Sensitivity of the base plan",
                "Constraints that bind in the base plan, and the saving from relaxing each one step.")
