"""`solver-cli workload from-trace` (solver/traffic/): classes, rates, CV and periods against
hand-computed values, Prometheus snapshots, bad rows, and a derived workload that plans and
replays its own trace."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
import yaml

from cli.main import main as cli_main
from solver.sim.trace import TraceError
from solver.traffic.classes import classes_from_histograms, classes_from_lengths
from solver.traffic.from_trace import DeriveOptions, derive_from_trace
from solver.traffic.prometheus import derive_from_prometheus
from solver.workload.documents import parse_workload
from tests.conftest import EXAMPLES, cli_path

TRACE = EXAMPLES / "traces" / "chat-small.csv"
METRICS = EXAMPLES / "metrics"
HEAD = "arrival_s,prompt_tokens,output_tokens\n"


def _csv(tmp_path, rows, head=HEAD, name="t.csv"):
    path = tmp_path / name
    path.write_text(head + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def test_classes_by_hand_equal_counts_and_a_tail():
    # 20 requests of prompt 1..20 and output 1: the tail is the 20th (beyond the 19th = ceil(0.95 x 20));
    # the 19 others cut at the 7th and 13th (ceil(19/3), ceil(38/3)); each class its mean, rounded up.
    prompt = np.arange(1, 21)
    keys = prompt + 1
    classes = classes_from_lengths(keys, np.ones(20), prompt.astype(float), np.ones(20))
    assert [(c.share, c.prompt_tokens, c.output_tokens, c.tail) for c in classes] == [
        (0.35, 4, 1, False), (0.3, 11, 1, False), (0.3, 17, 1, False), (0.05, 20, 1, True)]
    assert [c.name for c in classes] == ["tokens-2-8", "tokens-9-14", "tokens-15-20", "tail-over-20-tokens"]
    # ties keep requests together (fewer classes), and the token work is never understated
    same = classes_from_lengths(np.array([10]), np.array([50.0]), np.array([350.0]), np.array([150.0]))
    assert [(c.share, c.prompt_tokens, c.output_tokens) for c in same] == [(1.0, 7, 3)]


def test_histogram_classes_keep_the_exact_token_sum_and_a_tail_above_the_body():
    bounds = np.array([1.0, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000])
    rng = np.random.default_rng(0)
    values = np.clip(np.rint(rng.lognormal(np.log(150), 0.9, 5000)), 1, 5000)
    hist = (bounds, np.array([np.count_nonzero(values <= b) for b in bounds], float), 5000.0, float(values.sum()))
    classes = classes_from_histograms(hist, hist)
    assert sum(c.share for c in classes) == pytest.approx(1.0, abs=1e-9) and classes[-1].tail
    work = sum(c.share * c.prompt_tokens for c in classes)
    assert values.mean() <= work <= values.mean() + 1.0  # exact, up to rounding up
    assert classes[-1].prompt_tokens >= np.quantile(values, 0.95)  # above every body class
    assert [c.prompt_tokens for c in classes] == sorted(c.prompt_tokens for c in classes)


def test_arrival_cv_within_windows_and_peak_by_hand(tmp_path):
    # window [0, 60): arrivals 0, 1, 4 -> gaps 1 and 3 (mean 2, sample variance 2, cv^2 = 0.5, 1 dof);
    # window [60, 120): 70, 72, 74, 76 -> three gaps of 2 (cv 0, 2 dof); the gap 4 -> 70 crosses windows, not counted.
    # pooled: sqrt((1 x 0.5 + 2 x 0) / 3) = sqrt(1/6)
    rows = [(t, 10, 5) for t in (0, 1, 4, 70, 72, 74, 76)]
    d = derive_from_trace(_csv(tmp_path, rows), DeriveOptions(peak_window_s=10))
    s = d.services[0]
    assert s.cv.value == pytest.approx(math.sqrt(1 / 6)) and s.cv.gaps == 5 and s.cv.windows == 2
    assert s.arrival_cv == 0.41  # rounded up
    # peak: 4 arrivals in [67, 77) (or [70, 80)) -> 0.4/s; the mean is 7 / 76 s
    assert s.peak.rate_per_s == pytest.approx(0.4) and s.peak.window_s == 10
    assert s.mean_rate_per_s == pytest.approx(7 / 76) and s.rate_per_s == 0.4


def test_a_burst_sets_the_peak(tmp_path):
    # paced at 1/s for 600 s with 30 s at 3/s from 300 s: the 60 s peak window holds 60 + 60 = 120 -> 2/s
    t = np.arange(0, 600, 1.0) + 0.5
    burst = np.concatenate([t[:300], np.arange(300, 330, 1 / 3) + 0.1, t[330:]])
    d = derive_from_trace(_csv(tmp_path, [(f"{x:.3f}", 100, 10) for x in burst]), DeriveOptions(peak_window_s=60))
    assert d.services[0].peak.rate_per_s == pytest.approx(2.0) and d.services[0].peak.start_s in range(270, 301)


def test_a_slow_swing_in_rate_is_not_burstiness(tmp_path):
    # paced arrivals whose rate ramps from 0.5/s to 2/s over 2 hours: the gaps over the whole trace vary
    # (CV ~0.4), but within each 60 s window they are all alike
    span = 7200.0
    grid = np.linspace(0, span, 72001)
    cum = 0.5 * grid + 0.75 * grid ** 2 / span
    t = np.interp(np.arange(0.5, cum[-1]), cum, grid)
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() > 0.3
    d = derive_from_trace(_csv(tmp_path, [(f"{x:.3f}", 100, 10) for x in t]), DeriveOptions(periods="none"))
    assert d.services[0].cv.value < 0.05 and d.services[0].arrival_cv <= 0.05


def _day_trace(tmp_path):
    """24 h, paced arrivals: 0.2/s from 0 to 8 h, 1/s from 8 to 20 h, 0.4/s from 20 to 24 h."""
    parts = []
    for a, b, rate in ((0, 8, 0.2), (8, 20, 1.0), (20, 24, 0.4)):
        parts.append(np.arange(a * 3600, b * 3600, 1 / rate) + 0.25)
    t = np.concatenate(parts)
    path = tmp_path / "day.csv"
    lines = [f"{x:.3f},{300 + (i % 7) * 50},{100 + (i % 5) * 20},chat\n" for i, x in enumerate(t.tolist())]
    path.write_text(HEAD.strip() + ",service\n" + "".join(lines))
    return path


def test_a_day_long_trace_gives_periods_with_a_profile(tmp_path):
    d = derive_from_trace(_day_trace(tmp_path))
    assert d.periods is not None and sum(p.hours for p in d.periods) == pytest.approx(24.0)
    s = d.services[0]
    assert s.rate_per_s == pytest.approx(1.0, abs=0.01)
    of_hour = {h: p.name for p in d.periods for h in range(int(p.start_hour), int(p.start_hour + p.hours))}
    assert s.profile[of_hour[3]] == pytest.approx(0.2, abs=0.005)
    assert s.profile[of_hour[22]] == pytest.approx(0.4, abs=0.005)
    assert of_hour[12] not in s.profile  # the peak period: 1.0
    assert len(d.periods) <= 6 and d.period_waste <= 0.10
    w = _derive_cli(["--model", "llama-3.1-8b"], d.source, tmp_path)
    assert [p["name"] for p in w["periods"]] == [p.name for p in d.periods]
    parse_workload(w)


def _derive_cli(args, trace, tmp_path, suffix=".yaml"):
    out = tmp_path / f"w{suffix}"
    assert cli_main(["workload", "from-trace", *([str(trace)] if trace else []), "--out", str(out), *args]) == 0
    return (json.loads if suffix == ".json" else yaml.safe_load)(out.read_text())


def test_the_shipped_trace_derives_per_service_with_models_and_slos(tmp_path):
    w = _derive_cli(["--model", "chat=llama-3.1-8b", "--model", "assistant-70b=llama-3.1-70b", "--ttft-ms", "1500",
                     "--tpot-ms", "50", "--percentile", "99"], TRACE, tmp_path, ".json")
    assert [s["name"] for s in w["services"]] == ["chat", "assistant-70b"]
    chat = w["services"][0]
    assert chat["model"] == "llama-3.1-8b" and chat["slo"] == {"ttft_ms": 1500, "tpot_ms": 50, "percentile": 99}
    # 2,838 chat requests over 149.919 s (shorter than the peak window: the whole trace) -> 18.93/s, rounded up
    assert chat["demand"]["requests_per_s"] == 18.94 and 0.9 < chat["demand"]["arrival_cv"] < 1.15
    classes = chat["demand"]["classes"]
    assert len(classes) == 4 and classes[-1]["name"].startswith("tail-") and classes[-1]["share"] >= 0.0497
    side = json.loads((tmp_path / "w.derivation.json").read_text())
    assert side["requests"] == 3159 and side["services"][0]["requests"] == 2838 and "periods" in side
    parse_workload(w)


def test_prometheus_two_vllm_snapshots_and_one_sglang_snapshot(tmp_path):
    d = derive_from_prometheus([str(METRICS / "vllm-before.prom"), str(METRICS / "vllm-after.prom")], None)
    s = d.services[0]
    assert d.engine == "vllm" and d.span_s == 600 and s.requests == 7200 and s.rate_per_s == 12.0
    assert s.model == "meta-llama/Llama-3.1-8B-Instruct" and len(s.classes) == 4 and s.arrival_cv == 1.0
    w = _derive_cli(["--prometheus", str(METRICS / "sglang.prom"), "--window-s", "1800"], None, tmp_path)
    svc = w["services"][0]
    assert svc["model"] == "qwen3-8b" and svc["engine"] == "sglang" and svc["demand"]["requests_per_s"] == 3.0
    parse_workload(w)
    with pytest.raises(TraceError, match="--window-s"):
        derive_from_prometheus([str(METRICS / "sglang.prom")], None)
    with pytest.raises(TraceError, match="went down"):
        derive_from_prometheus([str(METRICS / "vllm-after.prom"), str(METRICS / "vllm-before.prom")], 600.0)


def _run(*args):
    return subprocess.run([cli_path(), "workload", "from-trace", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("content,needles", [
    # every bad row of a file is listed with its line (one run of the CLI for several kinds)
    (HEAD + "0.0,100,10\n-1.0,100,10\n0.5,,10\n2.0,100,10\n1.0,100,10\nnan,100,10\n3,abc,10\n",
     ["line 3: arrival_s -1 is negative", "line 4: no prompt_tokens",
      "line 6: arrival_s 1 is before the previous request's 2", "line 7: arrival_s 'nan' is not a finite number",
      "line 8: prompt_tokens 'abc' is not a positive whole number"]),
    ("", ["no requests"]),
    (HEAD.encode() + b"0.0,100,10\n\xff\xfe\x00\x81junk\n", ["line 3: not UTF-8 text"]),
    (bytes(b for b in range(256) if b != 10) * 300, ["line 1: longer than 65,536 bytes"]),
])
def test_bad_rows_exit_2_naming_the_line(tmp_path, content, needles):
    path = tmp_path / "bad.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = _run(path, "--model", "llama-3.1-8b")
    assert out.returncode == 2, out.stderr
    assert all(n in out.stderr for n in needles), out.stderr
    assert "To fix" in out.stderr and "Traceback" not in out.stderr and out.stdout == ""


def test_unknown_model_and_missing_model_exit_2(tmp_path, capsys):
    path = _csv(tmp_path, [(0, 100, 10), (1, 100, 10)])
    assert cli_main(["workload", "from-trace", str(path), "--model", "lama-3.1-8b"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'lama-3.1-8b'" in err and "did you mean" in err
    assert cli_main(["workload", "from-trace", str(path)]) == 2
    assert "no model" in capsys.readouterr().err


def test_derived_workload_plans_and_replays_its_own_trace(tmp_path):
    out = tmp_path / "w.yaml"
    made = _run(TRACE, "--model", "chat=llama-3.1-8b", "--model", "assistant-70b=llama-3.1-70b", "--ttft-ms", "2000",
                "--tpot-ms", "80", "--out", out)
    assert made.returncode == 0, made.stderr
    assert out.read_text().startswith("# Derived by: solver-cli workload from-trace")
    sim = subprocess.run([cli_path(), "simulate", str(out), "--trace", str(TRACE), "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert sim.returncode == 0, sim.stderr
    d = json.loads(sim.stdout)
    assert d["total_price_usd_per_hour"] > 0 and not d["not_replayed"]
    assert {s["name"]: s["requests"] for s in d["services"]} == {"chat": 2838, "assistant-70b": 321}
