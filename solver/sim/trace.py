"""Request traces for replay: reading and checking them, and splitting them over a plan's replicas.

A trace is a CSV file with a header, or JSON Lines (one object per line), one request
per row:

    arrival_s       seconds from the start of the trace, finite, >= 0, non-decreasing
    prompt_tokens   positive whole number
    output_tokens   positive whole number
    service         (optional) the workload's service it is for; required when the workload
                    has more than one LLM service (a service with a model)

Other columns are ignored; lines starting with '#' and blank lines are skipped (a CSV may
carry comments above its header). Every bad row is reported with its line number and
what to change, at most MAX_REPORTED of them; nothing is planned or simulated then.
At most MAX_TRACE_REQUESTS rows.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from solver.sim.replica import MAX_REQUESTS_PER_RUN

MAX_TRACE_REQUESTS = MAX_REQUESTS_PER_RUN
MAX_REPORTED = 10
COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


class TraceError(ValueError):
    """A trace that cannot be replayed: `problems` are lines of 'where: what. To fix: how'."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass
class Trace:
    """Requests in file order: arrays of arrival_s, prompt_tokens, output_tokens, line (the
    file's line number of each request) and service (name per request)."""

    path: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    line: np.ndarray
    service: list[str]

    def __len__(self) -> int:
        return len(self.arrival_s)

    def for_service(self, name: str) -> np.ndarray:
        """Indices of the service's requests, in order."""
        return np.array([i for i, s in enumerate(self.service) if s == name], dtype=np.int64)


def read_trace(path: str | Path, llm_services: Sequence[str], other_services: Sequence[str] = ()) -> Trace:
    """Read and check a trace for a workload with the given LLM service names (and others,
    named only to say why they cannot take trace rows). Raises TraceError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (spreadsheet exports) is not a column name
    except FileNotFoundError:
        raise TraceError([f"{path}: no such file. To fix: give the path of a CSV or JSON Lines trace"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError([f"{path}: cannot be read ({exc}). To fix: give a UTF-8 CSV or JSON Lines file"]) from None
    rows = _rows(path, text)
    problems: list[str] = []
    arrival, prompt, output, lines, services = [], [], [], [], []
    default = llm_services[0] if len(llm_services) == 1 else None
    last = -math.inf
    where = str(path)

    def bad(line_no: int, message: str) -> None:
        problems.append(f"{where} line {line_no}: {message}")

    for line_no, row in rows:
        if len(arrival) >= MAX_TRACE_REQUESTS:
            bad(line_no, f"more than {MAX_TRACE_REQUESTS:,} requests. To fix: replay a shorter stretch of the trace")
            break
        if isinstance(row, str):
            bad(line_no, row)
        else:
            ok = True
            missing = [c for c in COLUMNS if row.get(c) in (None, "")]
            if missing:
                bad(line_no, f"no {', '.join(missing)}. To fix: every request needs arrival_s, prompt_tokens and "
                             "output_tokens")
                ok = False
            else:
                t = _number(row["arrival_s"])
                if t is None or not math.isfinite(t):
                    bad(line_no, f"arrival_s {row['arrival_s']!r} is not a finite number. To fix: seconds from the "
                                 "start of the trace, e.g. 12.5")
                    ok = False
                elif t < 0:
                    bad(line_no, f"arrival_s {t:g} is negative. To fix: seconds from the start of the trace, >= 0")
                    ok = False
                elif t < last:
                    bad(line_no, f"arrival_s {t:g} is before the previous request's {last:g}. To fix: sort the trace "
                                 "by arrival_s")
                    ok = False
                counts = {}
                for c in ("prompt_tokens", "output_tokens"):
                    k = _whole(row[c])
                    if k is None or k < 1:
                        bad(line_no, f"{c} {row[c]!r} is not a positive whole number. To fix: a token count, e.g. 256")
                        ok = False
                    counts[c] = k
            name = row.get("service")
            if name in (None, ""):
                if default is None:
                    if not llm_services:
                        bad(line_no, "the workload has no LLM service (a service with a model) to replay requests "
                                     "on. To fix: replay a trace for a workload with an LLM service")
                    else:
                        bad(line_no, f"no service, and the workload has {len(llm_services)} LLM services. To fix: "
                                     f"add a service column naming one of {', '.join(llm_services)}")
                    ok = False
                name = default
            elif name not in llm_services:
                if name in other_services:
                    bad(line_no, f"service {name!r} has no model (measured profiles): a trace replays LLM requests. "
                                 f"To fix: use one of {', '.join(llm_services)}")
                else:
                    from solver.suggest import did_you_mean

                    hint = did_you_mean(str(name), list(llm_services)) or "."
                    bad(line_no, f"unknown service {name!r}{hint} To fix: use one of the workload's LLM services: "
                                 f"{', '.join(llm_services) or '(none)'}")
                ok = False
            if ok:
                last = t
                arrival.append(t)
                prompt.append(counts["prompt_tokens"])
                output.append(counts["output_tokens"])
                lines.append(line_no)
                services.append(str(name))
        if len(problems) >= MAX_REPORTED:
            problems.append(f"{where}: stopped after {MAX_REPORTED} problems")
            break
    if not problems and not arrival:
        problems.append(f"{where}: no requests. To fix: one request per row (arrival_s, prompt_tokens, "
                        "output_tokens[, service])")
    if problems:
        raise TraceError(problems)
    return Trace(str(path), np.asarray(arrival, dtype=np.float64), np.asarray(prompt, dtype=np.int64),
                 np.asarray(output, dtype=np.int64), np.asarray(lines, dtype=np.int64), services)


def _rows(path: Path, text: str):
    """(line number, dict of fields | a problem string) per request row."""
    lines = text.splitlines()
    first = next((s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")), "")
    jsonl = path.suffix.lower() in (".jsonl", ".ndjson") or (path.suffix.lower() != ".csv" and first.startswith("{"))
    if jsonl:
        for no, s in enumerate(lines, start=1):
            s = s.strip()
            if not s or s.startswith("#"):
                continue
            try:
                obj = json.loads(s)
            except json.JSONDecodeError as exc:
                yield no, f"not a JSON object ({exc.msg}). To fix: one JSON object per line"
                continue
            if not isinstance(obj, dict):
                yield no, "not a JSON object. To fix: one object per line, e.g. " \
                          '{"arrival_s": 0.5, "prompt_tokens": 256, "output_tokens": 128}'
                continue
            yield no, obj
        return
    numbered = [(no, s) for no, s in enumerate(lines, start=1) if s.strip() and not s.lstrip().startswith("#")]
    if not numbered:
        return
    head_no, head = numbered[0]
    header = [h.strip() for h in next(csv.reader([head]))]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        yield head_no, (f"the header ({head.strip()[:80]}) has no {', '.join(missing)}. To fix: a first row naming "
                        "the columns, e.g. arrival_s,prompt_tokens,output_tokens,service")
        return
    for (no, s), fields in zip(numbered[1:], csv.reader([s for _, s in numbered[1:]])):
        if len(fields) != len(header):
            yield no, f"{len(fields)} fields where the header has {len(header)}. To fix: one value per column"
            continue
        yield no, {h: f.strip() for h, f in zip(header, fields)}


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _whole(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value == int(value) else None
    s = str(value).strip()
    if s.lstrip("+").isdigit():
        return int(s)
    return None


def split_by_weight(weights: Sequence[float], n: int) -> np.ndarray:
    """Target index for each of n requests in order, targets taking shares by weight,
    interleaved through the list: request i goes where frac(i x golden ratio) falls in the
    cumulative weights (a low-discrepancy sequence: each target's count stays within a few
    requests of its share at every prefix; deterministic)."""
    w = np.asarray(weights, dtype=float)
    if len(w) == 0 or not np.all(w >= 0) or not w.sum() > 0:
        raise ValueError("weights must be non-negative with a positive sum")
    cum = np.cumsum(w / w.sum())
    u = np.modf(np.arange(n, dtype=np.float64) * 0.6180339887498949 + 0.5)[0]
    return np.minimum(np.searchsorted(cum, u, side="right"), len(w) - 1).astype(np.int64)
