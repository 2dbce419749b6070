"""Request traces: reading and checking them in one streaming pass, and splitting them over
a plan's replicas.

A trace is a CSV file with a header, or JSON Lines (one object per line), one request
per row:

    arrival_s       seconds from the start of the trace, finite, >= 0, non-decreasing
    prompt_tokens   positive whole number
    output_tokens   positive whole number
    service         (optional) the service it is for; for a replay, required when the
                    workload has more than one LLM service (a service with a model)
    model           (optional, read only when deriving a workload: `solver-cli workload
                    from-trace`) the model the service runs

Other columns are ignored; lines starting with '#' and blank lines are skipped (a CSV may
carry comments above its header). Every bad row is reported with its line number and
what to change, at most MAX_REPORTED of them; nothing is planned, simulated or derived
then. A replay takes at most MAX_TRACE_REQUESTS rows; a file larger than its byte limit is
refused from its size alone, before any of it is read.

One reader serves the replay (`read_trace`, which keeps every request) and the
derivation of a workload (`TraceReader.chunks`, which hands over checked requests in
numpy batches so that a million-request trace never becomes a million Python objects).
Each batch is first checked vectorised; a batch with any doubt in it (a field that is not
a plain number, a quote, a missing field, an unknown service...) is checked again row by
row by `_check_row`, the one place that words the problems, so both paths accept the same
rows and report them alike.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from solver.sim.replica import MAX_REQUESTS_PER_RUN

MAX_TRACE_REQUESTS = MAX_REQUESTS_PER_RUN
# A replay keeps at most MAX_TRACE_REQUESTS requests; 512 bytes a row is far above any real
# trace's (~25-60 bytes), so this refuses only files that could not be replayed anyway.
MAX_TRACE_BYTES = 512 * MAX_TRACE_REQUESTS
MAX_REPORTED = 10
# A line longer than this is not a request row (binary data, a file without newlines):
# refused there, so that no single line is ever held whole in memory.
MAX_LINE_BYTES = 65_536
COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
# Far beyond any context window, and well inside int64 sums over millions of requests.
MAX_TOKEN_COUNT = 1_000_000_000
SERVICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")  # solver/workload/schema.py Service.name
_BLOCK_BYTES = 1 << 22  # read 4 MiB at a time
_BATCH_ROWS = 65_536  # rows checked together
# First characters of a line that may be blank or a comment (then checked in full).
_SKIP_STARTS = frozenset("#").union(c for c in map(chr, range(0x3001)) if c.isspace())  # str.strip's whitespace


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


@dataclass(frozen=True)
class ServicePolicy:
    """Which service names a trace's rows may carry.

    A replay (`free` false): the workload's LLM services `llm` (the others, `other`, are
    named only to say why they cannot take rows); a row without a service goes to the one
    LLM service when there is exactly one. Deriving a workload (`free` true): any valid
    service name, at most `max_services` of them; a row without one goes to `default`."""

    llm: tuple[str, ...] = ()
    other: tuple[str, ...] = ()
    free: bool = False
    default: str | None = None
    max_services: int = 200

    def default_name(self) -> str | None:
        if self.free:
            return self.default
        return self.llm[0] if len(self.llm) == 1 else None


@dataclass
class Batch:
    """Checked requests in file order; `service` indexes TraceReader.names, `model` (when
    asked for) TraceReader.model_names (0: no model given)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    line: np.ndarray
    service: np.ndarray
    model: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.arrival_s)


class TraceReader:
    """One streaming pass over a trace file: `chunks()` yields checked Batches (none once a
    problem is found: reading then goes on only to list up to MAX_REPORTED problems), and
    `finish()` raises TraceError if anything was wrong or nothing was there."""

    def __init__(self, path: str | Path, policy: ServicePolicy, max_requests: int = MAX_TRACE_REQUESTS,
                 max_bytes: int = MAX_TRACE_BYTES, read_model: bool = False):
        self.path = Path(path)
        self.where = str(path)
        self.policy = policy
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.read_model = read_model
        self.names: list[str] = []  # service names in order of first appearance; Batch.service indexes them
        self._code: dict[str, int] = {}
        self.model_names: list[str] = [""]  # the model column's distinct values; Batch.model indexes them
        self._model_code: dict[str, int] = {"": 0}
        self.problems: list[str] = []
        self.requests = 0
        self.size_bytes = 0
        self._last = -math.inf  # the latest arrival so far: arrivals must not go back
        self._stopped = False
        self._header: list[str] | None = None
        self._jsonl = False

    # ------------------------------------------------------------------ reporting
    def bad(self, line_no: int, message: str) -> None:
        self.problems.append(f"{self.where} line {line_no}: {message}")

    def _check_stop(self) -> bool:
        if not self._stopped and len(self.problems) >= MAX_REPORTED:
            self.problems.append(f"{self.where}: stopped after {MAX_REPORTED} problems")
            self._stopped = True
        return self._stopped

    def finish(self) -> None:
        if not self.problems and not self.requests:
            self.problems.append(f"{self.where}: no requests. To fix: one request per row (arrival_s, prompt_tokens, "
                                 "output_tokens[, service])")
        if self.problems:
            raise TraceError(self.problems)

    # ------------------------------------------------------------------ the pass
    def chunks(self) -> Iterator[Batch]:
        for numbers, lines in self._line_batches():
            if self._stopped:
                return
            batch = self._batch(numbers, lines)
            if batch is not None and len(batch) and not self.problems:
                yield batch
            if self._check_stop():
                return

    def _line_batches(self) -> Iterator[tuple[Sequence[int], list[str]]]:
        """(line numbers, lines) of the rows that are not blank or comments, in batches; the
        header is taken off first. Reads the file in blocks: memory stays one block."""
        try:
            self.size_bytes = self.path.stat().st_size
            if self.size_bytes > self.max_bytes:
                self.problems.append(
                    f"{self.where}: {self.size_bytes:,} bytes, more than the {self.max_bytes:,} a trace may have here "
                    f"(at most {self.max_requests:,} requests). To fix: split the trace, or give a shorter stretch")
                return
            f = self.path.open("rb")
        except FileNotFoundError:
            self.problems.append(f"{self.where}: no such file. To fix: give the path of a CSV or JSON Lines trace")
            return
        except OSError as exc:
            self.problems.append(f"{self.where}: cannot be read ({exc.strerror or exc}). To fix: give a UTF-8 CSV or "
                                 "JSON Lines file")
            return
        with f:
            carry, line_no, first = b"", 1, True
            while True:
                try:
                    block = f.read(_BLOCK_BYTES)
                except OSError as exc:
                    self.problems.append(f"{self.where}: cannot be read ({exc.strerror or exc}). To fix: give a "
                                         "readable file")
                    return
                if first:
                    block = block.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark (spreadsheet exports)
                    first = False
                buf = carry + block
                if block:
                    cut = buf.rfind(b"\n") + 1
                    complete, carry = buf[:cut], buf[cut:]
                else:
                    complete, carry = buf, b""
                if complete:
                    lines = self._decode(complete, line_no)
                    numbered = self._meaningful(lines, line_no)
                    line_no += len(lines)
                    for numbers, rows in numbered:
                        yield numbers, rows
                        if self._stopped:
                            return
                    if self._stopped:  # a header that names no columns
                        return
                if not block:
                    return
                if len(carry) > MAX_LINE_BYTES:
                    self.bad(line_no, f"longer than {MAX_LINE_BYTES:,} bytes without a line break (binary data, or "
                                      "not one request per line). To fix: a CSV or JSON Lines file, one request a line")
                    return

    def _decode(self, complete: bytes, line_no: int) -> list[str]:
        try:
            text = complete.decode("utf-8")
        except UnicodeDecodeError:
            parts = complete.split(b"\n")
            if complete.endswith(b"\n"):
                parts.pop()
            lines = []
            for i, part in enumerate(parts):
                try:
                    lines.append(part.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    self.bad(line_no + i, f"not UTF-8 text (byte 0x{part[exc.start]:02x} at column {exc.start + 1}). "
                                          "To fix: a UTF-8 CSV or JSON Lines file")
                    lines.append("")  # skipped as blank
            return [s[:-1] if s.endswith("\r") else s for s in lines]
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        lines = text.split("\n")
        if complete.endswith(b"\n"):
            lines.pop()
        return lines

    def _meaningful(self, lines: list[str], line_no: int):
        """The rows that are neither blank nor comments, with their line numbers, in batches;
        the first such line of the file is the header (CSV) or decides the format."""
        # Candidates by their first character only (no string is copied): most blocks have none.
        maybe = [i for i, s in enumerate(lines) if not s or s[0] in _SKIP_STARTS]
        skip = [i for i in maybe if not lines[i].strip() or lines[i].lstrip().startswith("#")]
        if skip:
            keep = np.ones(len(lines), dtype=bool)
            keep[skip] = False
            numbers: Sequence[int] = (np.flatnonzero(keep) + line_no).tolist()
            rows = [s for s, k in zip(lines, keep.tolist()) if k]
        else:
            numbers, rows = range(line_no, line_no + len(lines)), lines
        if self._header is None and not self._jsonl and rows:
            if not self._start(numbers[0], rows[0]):
                self._stopped = True
                return
            if not self._jsonl:
                numbers, rows = numbers[1:], rows[1:]
        for i in range(0, len(rows), _BATCH_ROWS):
            yield numbers[i:i + _BATCH_ROWS], rows[i:i + _BATCH_ROWS]

    def _start(self, head_no: int, head: str) -> bool:
        """Decide the format from the first row; a CSV's header must name the columns."""
        first = head.strip()
        suffix = self.path.suffix.lower()
        self._jsonl = suffix in (".jsonl", ".ndjson") or (suffix != ".csv" and first.startswith("{"))
        if self._jsonl:
            return True
        try:
            header = [h.strip() for h in next(csv.reader([head]))]
        except csv.Error:
            header = []
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            self.bad(head_no, f"the header ({first[:80]}) has no {', '.join(missing)}. To fix: a first row naming "
                              "the columns, e.g. arrival_s,prompt_tokens,output_tokens,service")
            return False
        self._header = header
        return True

    # ------------------------------------------------------------------ one batch
    def _batch(self, numbers: Sequence[int], lines: list[str]) -> Batch | None:
        if not lines:
            return None
        if self._jsonl:
            fast = self._fast_jsonl(numbers, lines)
            return fast if fast is not None else self._slow(numbers, self._jsonl_rows(numbers, lines))
        fast = self._fast_csv(numbers, lines)
        return fast if fast is not None else self._slow(numbers, self._csv_rows(numbers, lines))

    def _fast_csv(self, numbers, lines: list[str]) -> Batch | None:
        header = self._header
        ncol = len(header)
        joined = ",".join(lines)
        if '"' in joined or "\x00" in joined:
            return None  # quoting or binary: the csv module and the row checks decide
        counts = np.fromiter(map(str.count, lines, repeat(",")), dtype=np.int64, count=len(lines))
        if not np.all(counts == ncol - 1):
            return None
        flat = joined.split(",")
        at = {h: i for i, h in enumerate(header)}  # a repeated name: the last column wins, as a dict of the row
        col = {c: flat[at[c]::ncol] for c in at if c in (*COLUMNS, "service", "model")}
        for c in ("prompt_tokens", "output_tokens"):
            if not "".join(col[c]).isdigit():  # signs, spaces, decimals, empty fields: the row checks
                return None
        return self._fast(numbers, col["arrival_s"], col["prompt_tokens"], col["output_tokens"],
                          col.get("service"), col.get("model"), strip=True)

    def _fast_jsonl(self, numbers, lines: list[str]) -> Batch | None:
        try:
            objs = list(map(json.loads, lines))
        except (ValueError, RecursionError):
            return None
        if set(map(type, objs)) != {dict}:
            return None
        cols = {c: [o.get(c) for o in objs] for c in COLUMNS}
        numeric = {int, float}
        if any(not set(map(type, v)) <= numeric for v in cols.values()):
            return None  # missing fields, strings, booleans: the row checks
        service = [o.get("service") for o in objs] if any("service" in o for o in objs) else None
        model = [o.get("model") for o in objs] if self.read_model and any("model" in o for o in objs) else None
        return self._fast(numbers, cols["arrival_s"], cols["prompt_tokens"], cols["output_tokens"], service, model,
                          strip=False)

    def _fast(self, numbers, arrival, prompt, output, service, model, strip: bool) -> Batch | None:
        n = len(arrival)
        if self.requests + n > self.max_requests:
            return None  # the row checks say which row is one too many
        try:
            t = np.array(arrival, dtype=np.float64)
            p_raw = np.array(prompt, dtype=np.float64) if not isinstance(prompt[0], str) else None
            p = np.array(prompt, dtype=np.int64) if p_raw is None else p_raw.astype(np.int64)
            o_raw = np.array(output, dtype=np.float64) if not isinstance(output[0], str) else None
            o = np.array(output, dtype=np.int64) if o_raw is None else o_raw.astype(np.int64)
        except (ValueError, TypeError, OverflowError):
            return None
        for raw, whole in ((p_raw, p), (o_raw, o)):
            if raw is not None and not (np.all(np.isfinite(raw)) and np.all(raw == whole) and np.all(raw < 2 ** 62)):
                return None  # 10.5 tokens, or beyond a whole number's range
        if not (np.all(np.isfinite(t)) and t[0] >= max(self._last, 0.0) and np.all(np.diff(t) >= 0)
                and np.all(p >= 1) and np.all(o >= 1) and np.all(p <= MAX_TOKEN_COUNT)
                and np.all(o <= MAX_TOKEN_COUNT)):
            return None
        codes = self._service_codes(service, strip, n)
        if codes is None:
            return None
        models = None
        if self.read_model:
            if model is None:
                models = np.zeros(n, dtype=np.int32)
            elif set(map(type, model)) <= {str, type(None)}:
                lookup = {m: self._model_of(m.strip() if m else "") for m in set(model)}
                models = np.fromiter(map(lookup.__getitem__, model), dtype=np.int32, count=n)
            else:
                return None
        self._last = float(t[-1])
        self.requests += n
        return Batch(t, p, o, np.asarray(numbers, dtype=np.int64), codes, models)

    def _service_codes(self, service, strip: bool, n: int) -> np.ndarray | None:
        """Service codes of a batch whose every name is acceptable, or None (the row checks word it)."""
        default = self.policy.default_name()
        if service is None:
            if default is None:
                return None
            code = self._register([default])
            return None if code is None else np.full(n, code[default], dtype=np.int32)
        distinct = set(service)
        names: dict = {}
        for raw in distinct:
            if raw is None or raw == "":
                if default is None:
                    return None
                names[raw] = default
            elif type(raw) is not str:
                return None
            else:
                names[raw] = raw.strip() if strip else raw
        if not all(self._accepts(s) for s in set(names.values())):
            return None
        new = sorted({s for s in names.values() if s not in self._code},
                     key=lambda s: min(service.index(r) for r, v in names.items() if v == s))
        if self._register(new) is None:
            return None
        lookup = {raw: self._code[s] for raw, s in names.items()}
        return np.fromiter(map(lookup.__getitem__, service), dtype=np.int32, count=n)

    def _model_of(self, name: str) -> int:
        if name not in self._model_code:
            self._model_code[name] = len(self.model_names)
            self.model_names.append(name)
        return self._model_code[name]

    def _accepts(self, name: str) -> bool:
        if self.policy.free:
            return bool(SERVICE_NAME.match(name)) and len(name) <= 100
        return name in self.policy.llm

    def _register(self, new: Sequence[str]) -> dict | None:
        fresh = [s for s in new if s not in self._code]
        if self.policy.free and len(self.names) + len(fresh) > self.policy.max_services:
            return None
        for s in fresh:
            self._code[s] = len(self.names)
            self.names.append(s)
        return self._code

    # ------------------------------------------------------------------ row by row
    def _csv_rows(self, numbers, lines):
        header = self._header
        for no, s in zip(numbers, lines):
            try:
                fields = next(csv.reader([s]))
            except csv.Error as exc:
                yield no, f"not a CSV row ({exc}). To fix: comma-separated values, one request a line"
                continue
            if len(fields) != len(header):
                yield no, f"{len(fields)} fields where the header has {len(header)}. To fix: one value per column"
                continue
            yield no, {h: f.strip() for h, f in zip(header, fields)}

    def _jsonl_rows(self, numbers, lines):
        for no, s in zip(numbers, lines):
            try:
                obj = json.loads(s)
            except json.JSONDecodeError as exc:
                yield no, f"not a JSON object ({exc.msg}). To fix: one JSON object per line"
                continue
            except RecursionError:
                yield no, "not a JSON object (nested too deeply). To fix: one JSON object per line"
                continue
            if not isinstance(obj, dict):
                yield no, "not a JSON object. To fix: one object per line, e.g. " \
                          '{"arrival_s": 0.5, "prompt_tokens": 256, "output_tokens": 128}'
                continue
            yield no, obj

    def _slow(self, numbers, rows) -> Batch:
        arrival, prompt, output, lines, codes, models = [], [], [], [], [], []
        for line_no, row in rows:
            if self.requests >= self.max_requests:
                self.bad(line_no, f"more than {self.max_requests:,} requests. To fix: give a shorter stretch of the "
                                  "trace")
                self._stopped = True
                break
            if isinstance(row, str):
                self.bad(line_no, row)
            else:
                checked = self._check_row(line_no, row)
                if checked is not None:
                    t, p, o, name, model = checked
                    self._last = t
                    self.requests += 1
                    arrival.append(t)
                    prompt.append(p)
                    output.append(o)
                    lines.append(line_no)
                    codes.append(self._register([name])[name])
                    models.append(self._model_of(model) if self.read_model else 0)
            if self._check_stop():
                break
        return Batch(np.asarray(arrival, dtype=np.float64), np.asarray(prompt, dtype=np.int64),
                     np.asarray(output, dtype=np.int64), np.asarray(lines, dtype=np.int64),
                     np.asarray(codes, dtype=np.int32), np.asarray(models, dtype=np.int32) if self.read_model else None)

    def _check_row(self, line_no: int, row: dict):
        """(arrival_s, prompt_tokens, output_tokens, service, model) of a good row; each
        problem of a bad one reported (None)."""
        bad = self.bad
        ok = True
        t = None
        counts = {}
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
            elif t < self._last:
                bad(line_no, f"arrival_s {t:g} is before the previous request's {self._last:g}. To fix: sort the "
                             "trace by arrival_s")
                ok = False
            for c in ("prompt_tokens", "output_tokens"):
                k = _whole(row[c])
                if k is None or k < 1:
                    bad(line_no, f"{c} {row[c]!r} is not a positive whole number. To fix: a token count, e.g. 256")
                    ok = False
                elif k > MAX_TOKEN_COUNT:
                    bad(line_no, f"{c} {k:,} is more than {MAX_TOKEN_COUNT:,} tokens. To fix: a token count, e.g. 256")
                    ok = False
                counts[c] = k
        name = self._row_service(line_no, row.get("service"))
        if name is None:
            ok = False
        model = row.get("model") if self.read_model else None
        model = "" if model in (None, "") else str(model).strip()
        return (t, counts["prompt_tokens"], counts["output_tokens"], name, model) if ok else None

    def _row_service(self, line_no: int, name) -> str | None:
        bad = self.bad
        policy = self.policy
        llm = policy.llm
        if name in (None, ""):
            default = policy.default_name()
            if default is None:
                if not llm:
                    bad(line_no, "the workload has no LLM service (a service with a model) to replay requests "
                                 "on. To fix: replay a trace for a workload with an LLM service")
                else:
                    bad(line_no, f"no service, and the workload has {len(llm)} LLM services. To fix: "
                                 f"add a service column naming one of {', '.join(llm)}")
            return default
        if policy.free:
            name = str(name)
            if not (SERVICE_NAME.match(name) and len(name) <= 100):
                bad(line_no, f"service {name[:100]!r} is not a service name. To fix: letters, digits and . _ : / - "
                             "(starting with a letter or digit), at most 100 characters")
                return None
            if name not in self._code and len(self.names) >= policy.max_services:
                bad(line_no, f"service {name!r} is one more than the {policy.max_services} services a trace may "
                             "have. To fix: derive from a trace of fewer services, or split it by service")
                return None
            return name
        if name not in llm:
            if name in policy.other:
                bad(line_no, f"service {name!r} has no model (measured profiles): a trace replays LLM requests. "
                             f"To fix: use one of {', '.join(llm)}")
            else:
                from solver.suggest import did_you_mean

                hint = did_you_mean(str(name), list(llm)) or "."
                bad(line_no, f"unknown service {name!r}{hint} To fix: use one of the workload's LLM services: "
                             f"{', '.join(llm) or '(none)'}")
            return None
        return name


def read_trace(path: str | Path, llm_services: Sequence[str], other_services: Sequence[str] = ()) -> Trace:
    """Read and check a trace for a workload with the given LLM service names (and others,
    named only to say why they cannot take trace rows). Raises TraceError."""
    reader = TraceReader(path, ServicePolicy(llm=tuple(llm_services), other=tuple(other_services)))
    batches = list(reader.chunks())
    reader.finish()
    codes = np.concatenate([b.service for b in batches])
    names = reader.names
    return Trace(str(path), np.concatenate([b.arrival_s for b in batches]),
                 np.concatenate([b.prompt_tokens for b in batches]),
                 np.concatenate([b.output_tokens for b in batches]), np.concatenate([b.line for b in batches]),
                 [names[c] for c in codes.tolist()])


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except (ValueError, OverflowError):
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
        try:
            return int(s)
        except ValueError:  # digits int() does not read ('²')
            return None
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
