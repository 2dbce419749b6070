"""The review report as one self-contained HTML page: inline CSS, no scripts, the plots
embedded as data: URIs, nothing loaded from files or the network - the page alone is
what gets mailed or published. (report.md links the same plots as files in plots/.)
"""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

from solver.review.plots import Plot
from solver.review.report_data import ReportData
from solver.review.report_tables import (Table, definition_table, diff_table, failure_table, headline,
                                         scenario_table, sensitivity_table)

_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 2rem auto;
       max-width: 1150px; padding: 0 1rem; color: #1d232b; line-height: 1.45; }
h1 { border-bottom: 3px solid #1f5fa8; padding-bottom: .3rem; }
h2 { margin-top: 2.2rem; color: #1f5fa8; }
ul.headline { background: #f1f5fb; border-left: 4px solid #1f5fa8; padding: .8rem 1rem .8rem 2rem; }
table { border-collapse: collapse; width: 100%; font-size: .86rem; margin: .5rem 0 1rem; }
th, td { border: 1px solid #d5dbe3; padding: .3rem .5rem; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th { background: #e8eef6; }
tr:nth-child(even) td { background: #fafbfd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
/* A status badge is one word: never broken inside it (td's overflow-wrap would split
   "infeasible" in a narrow column), and its cell keeps the badge's width. */
.status { font-weight: 600; border-radius: 3px; padding: 0 .35rem; white-space: nowrap; overflow-wrap: normal;
          display: inline-block; }
td.state { white-space: nowrap; overflow-wrap: normal; }
.optimal { color: #14632f; background: #dff3e5; } .feasible { color: #6b5200; background: #fbf1cf; }
.infeasible, .timeout, .invalid, .error { color: #8f0016; background: #fbe0e4; }
figure { margin: 1.2rem 0; } figure img { max-width: 100%; border: 1px solid #d5dbe3; }
figcaption { font-size: .85rem; color: #4a5563; }
.meta { color: #4a5563; font-size: .9rem; }
"""


def render_html(data: ReportData, plots: list[Plot], generated: str, base_dir: Path) -> str:
    """The page; `base_dir` is where the plots' files are (the report directory)."""
    spec = data.review.spec
    body = [f"<h1>Capacity review: {escape(spec.name)}</h1>"]
    if spec.description:
        body.append(f"<p>{escape(spec.description.strip())}</p>")
    body.append(f'<p class="meta">Generated {escape(generated)}; time limit {spec.time_limit_per_scenario_s:g} s per '
                f"scenario.</p>")
    body.append('<ul class="headline">' + "".join(f"<li>{escape(line)}</li>" for line in headline(data)) + "</ul>")
    body.append(_table(scenario_table(data)))
    if plots:
        body.append("<h2>Plots</h2>")
        for p in plots:
            body.append(f'<figure><img src="{_data_uri(base_dir / p.file)}" alt="{escape(p.title)}">'
                        f"<figcaption><b>{escape(p.title)}.</b> {escape(p.caption)}</figcaption></figure>")
    body.append(_table(diff_table(data)))
    if data.sensitivity:
        body.append(_table(sensitivity_table(data)))
    failures = failure_table(data)
    if failures.rows:
        body.append(_table(failures))
    body.append(_table(definition_table(data)))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Capacity review: {escape(spec.name)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


_NUMBER = re.compile(r"^[+−±-]?\$?[\d,]+(\.\d+)?%?$")  # 12, $1,234.50, −$0.89, +3.6%


def _is_number(text: str) -> bool:
    return bool(_NUMBER.match(text))


def _table(t: Table) -> str:
    head = f"<h2>{escape(t.title)}</h2><p>{escape(t.intro)}</p>"
    if not t.rows:
        return head + "<p>(none)</p>"
    rows = []
    for row in t.rows:
        cells = []
        for i, text in enumerate(row):
            if i == t.status_column:
                cells.append(f'<td class="state"><span class="status {escape(text)}">{escape(text)}</span></td>')
            else:
                cls = ' class="num"' if _is_number(text) else ""
                cells.append(f"<td{cls}>{escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
    return head + f"<table><thead><tr>{header}</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
