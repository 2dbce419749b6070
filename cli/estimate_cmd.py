"""`solver-cli estimate MODEL`: the performance model's estimates for one model across the catalog.

What an engineer reads before trusting a plan: per GPU type, GPUs per replica and
precision - memory per GPU, largest batch, TTFT, TPOT, throughput, the binding limit,
the error band, and dollars per million output tokens on the cheapest offer that can
host the replica. Options pin a measurement's conditions to compare with it.

With `--rate R` (requests/s routed to one replica) each row also gets `at_rate`: the
queueing model's utilization and TTFT/TPOT/latency percentiles at that load
(solver/perf/queueing.py), with a band for a replica slower or faster than modelled;
with SLO flags and `--percentile P` it gets `max_rate_for_slo`, the most requests/s one
replica takes with every bound holding at percentile P on a replica as slow as
`--confidence` asks (default 0.9) with 3 % more traffic, and `max_rate_for_slo_nominal`,
the same for the model as it is.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from solver.output.safe_text import escape_controls

EXIT_OK, EXIT_INPUT = 0, 2
DEFAULT_SIZES = (1, 2, 4, 8)
DEFAULT_PRECISIONS = ("fp16", "fp8")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("estimate", help="estimate one LLM's memory, latency and throughput across the catalog",
                              description=__doc__.split("\n\n")[1])
    p.add_argument("model", nargs="?", help="library model name, e.g. llama-3.1-8b (see --list-models)")
    p.add_argument("--model-json", metavar="FILE", help="describe the model inline instead: a JSON or YAML file with "
                   "the fields of a workload's inline model (name, params_b, layers, hidden_size, attention_heads, "
                   "kv_heads, head_dim, ...; `solver-cli schema`)")
    p.add_argument("--list-models", action="store_true", help="list the built-in model architectures and exit")
    p.add_argument("--gpu", action="append", metavar="GPU", help="only this GPU type (repeat or comma-separate)")
    p.add_argument("--gpus-per-replica", action="append", metavar="N", help="only these sizes (default 1,2,4,8)")
    p.add_argument("--precision", action="append", metavar="P", help="weights: fp16, bf16, fp8, int8, fp4, int4 (default fp16,fp8)")
    p.add_argument("--engine", default="vllm", help="vllm (default), sglang, tensorrt-llm or llama.cpp, optionally with "
                   "a version: vllm-0.7, vllm-0.9, sglang-0.4, tensorrt-llm-1.0 (without one: the newest documented "
                   "release; docs/engines.md lists the versions and their defaults)")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=256)
    p.add_argument("--batch", type=int, default=None, help="pin the batch (concurrent sequences per replica)")
    p.add_argument("--batching", choices=["continuous", "static"], default="continuous",
                   help="continuous (vLLM, SGLang, TensorRT-LLM in-flight; default) or static (a fixed batch runs "
                   "prefill then decode together)")
    p.add_argument("--max-batch", metavar="N", default=None,
                   help="the engine's cap on concurrent sequences (vLLM max_num_seqs, TensorRT-LLM max_batch_size); "
                   "default: the engine version's own (the newest vLLM: 1024 on a GPU of 70 GiB or more, else 256; "
                   "TensorRT-LLM 2048; docs/engines.md)")
    p.add_argument("--kv-cache-dtype", metavar="DTYPE", default=None,
                   help="KV-cache element type: auto (the engine version's default: 16-bit for vLLM and SGLang, fp8 "
                   "beside fp8/fp4 weights for TensorRT-LLM), fp16, bf16 or fp8")
    p.add_argument("--max-num-batched-tokens", metavar="N", default=None,
                   help="tokens one engine step may carry (vLLM max_num_batched_tokens, SGLang chunked_prefill_size, "
                   "TensorRT-LLM max_num_tokens); default: the engine version's own")
    p.add_argument("--scheduler", metavar="S", default=None,
                   help="chunked_mixed or prefill_first; default: the engine version's own")
    p.add_argument("--kv-admission", metavar="A", default=None,
                   help="whole_sequence (KV blocks for the whole sequence reserved up front: TensorRT-LLM's "
                   "GUARANTEED_NO_EVICT) or paged_on_demand (blocks as tokens arrive: vLLM, TensorRT-LLM's "
                   "MAX_UTILIZATION); how many sequences a replica holds under load (--rate); default: the "
                   "engine version's own")
    p.add_argument("--multi-step", metavar="K", default=None,
                   help="decode steps a prefill-first engine runs per scheduling decision (vLLM V0 "
                   "num_scheduler_steps): a prompt arriving during them waits for the block's end (TTFT under "
                   "load, --rate); needs --scheduler prefill_first; default 1")
    p.add_argument("--kv-cache-memory-fraction", metavar="F", default=None,
                   help="the engine's memory setting in (0, 1], in its own meaning: vLLM gpu_memory_utilization, "
                   "TensorRT-LLM kv_cache_free_gpu_memory_fraction, SGLang mem_fraction_static")
    p.add_argument("--ttft-ms", type=float, default=None, help="time-to-first-token SLO")
    p.add_argument("--tpot-ms", type=float, default=None, help="time-per-output-token SLO")
    p.add_argument("--latency-ms", type=float, default=None, help="end-to-end latency SLO")
    p.add_argument("--rate", type=float, default=None, metavar="REQ_PER_S",
                   help="requests/s routed to one replica: adds at_rate (utilization, TTFT/TPOT/latency percentiles)")
    p.add_argument("--percentile", type=float, default=None, metavar="P",
                   help="50, 90, 95 or 99: with SLO flags, adds max_rate_for_slo (bounds hold at this percentile)")
    p.add_argument("--confidence", default=None, metavar="C",
                   help="with --percentile: how sure to be that a real replica is no slower than the one "
                   "max_rate_for_slo is for, 0.5-0.99 or 'nominal' (the model as it is); default 0.9. Also the "
                   "confidence of the --rate band (0.8 without --percentile or at 'nominal')")
    p.add_argument("--arrival-cv", type=float, default=1.0, metavar="CV",
                   help="coefficient of variation of inter-arrival times (1 = Poisson, >1 bursty); default 1")
    p.add_argument("--role", choices=["prefill", "decode"], default=None,
                   help="price one worker of a disaggregated deployment instead of an aggregated replica: its "
                   "sustained requests/s within the SLOs (with --percentile: at that percentile, queueing "
                   "included), the KV transfer over --link-gbit-s counted in a prefill worker's TTFT "
                   "(docs/disaggregation.md)")
    p.add_argument("--link-gbit-s", type=float, default=100.0, metavar="GBIT_S",
                   help="with --role: the link between prefill and decode workers, gigabits per second (default 100)")
    p.add_argument("--feasible-only", action="store_true", help="hide configurations that do not fit or miss an SLO")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from solver.catalog import default_catalog
    from solver.models.library import get_model, model_names

    if args.list_models:
        return _list_models()
    try:
        engine_options = _engine_options(args)
    except ValueError as exc:
        return _fail(str(exc))
    if args.model_json:
        if args.model:
            return _fail(f"give either a model name ({args.model!r}) or --model-json, not both. To fix: drop one")
        try:
            model = _inline_model(args.model_json)
        except ValueError as exc:
            return _fail(str(exc))
    elif not args.model:
        return _fail("give a model name, e.g. `solver-cli estimate llama-3.1-8b`, or --model-json FILE. To fix: see "
                     "`solver-cli estimate --list-models`")
    else:
        model = get_model(args.model)
        if model is None:
            return _fail(f"unknown model {args.model!r}{_did_you_mean(args.model, model_names())} "
                         "To fix: use a name from `solver-cli estimate --list-models`, or describe the model in a "
                         "file for --model-json")
    catalog = default_catalog()
    try:
        gpus = _chosen_gpus(args, catalog)
        sizes = _ints(args.gpus_per_replica, "--gpus-per-replica") if args.gpus_per_replica else list(DEFAULT_SIZES)
        precisions = _names(args.precision) if args.precision else list(DEFAULT_PRECISIONS)
        _check_choices(args, precisions)
        _check_context(args, model)
    except ValueError as exc:
        return _fail(str(exc))
    args.engine_options = engine_options
    rows = _rows(args, model, catalog, gpus, sizes, precisions, pinned_precision=bool(args.precision),
                 pinned_size=bool(args.gpus_per_replica))
    if args.feasible_only:
        rows = [r for r in rows if r["feasible"]]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(escape_controls(_table(rows, model.name, args)))
        if args.role is not None:
            transfer = next((r["kv_transfer_ms"] for r in rows if r.get("kv_transfer_ms") is not None), None)
            at = f"at p{args.percentile:g}, queueing included" if args.percentile is not None else "back to back"
            print(f"--role {args.role}: each row is one {args.role} worker of a disaggregated deployment; req/s is "
                  f"the most it sustains within the SLOs ({at}); one prompt's KV cache takes {transfer} ms over "
                  f"{args.link_gbit_s:g} Gbit/s (counted in a prefill worker's TTFT; the link also caps req/s)")
    return EXIT_OK


def _fail(message: str) -> int:
    print(escape_controls(f"error: {message}"), file=sys.stderr)
    return EXIT_INPUT


def _did_you_mean(name: str, choices) -> str:
    from solver.suggest import did_you_mean

    hint = did_you_mean(name, choices)
    return hint if hint else "."


def _names(values: list[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _ints(values: list[str], option: str) -> list[int]:
    out = []
    for v in _names(values):
        if not v.isdigit() or int(v) < 1:
            raise ValueError(f"{option} takes positive whole numbers, got {v!r}. To fix: e.g. {option} 1,2,4,8")
        out.append(int(v))
    return out


def _engine_options(args) -> dict:
    """--max-batch, --kv-cache-memory-fraction, --kv-cache-dtype, --max-num-batched-tokens,
    --scheduler, --kv-admission and --multi-step, checked as the workload schema checks engine_options."""
    out: dict = {"max_batch": None, "kv_cache_memory_fraction": None, "kv_precision": None,
                 "max_num_batched_tokens": None, "scheduler": None, "kv_admission": None, "multi_step": None}
    kv = getattr(args, "kv_cache_dtype", None)
    if kv is not None:
        if kv not in ("auto", "fp16", "bf16", "fp8"):
            raise ValueError(f"--kv-cache-dtype must be auto, fp16, bf16 or fp8, got {kv!r}. To fix: e.g. "
                             "--kv-cache-dtype fp8")
        out["kv_precision"] = None if kv == "auto" else kv
    out["max_num_batched_tokens"] = _whole(getattr(args, "max_num_batched_tokens", None), "--max-num-batched-tokens",
                                           16, 10_000_000, "8192")
    for name, choices in (("scheduler", ("chunked_mixed", "prefill_first")),
                          ("kv_admission", ("whole_sequence", "paged_on_demand"))):
        value = getattr(args, name, None)
        if value is not None:
            flag = "--" + name.replace("_", "-")
            if value not in choices:
                shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value):,} characters)"
                raise ValueError(f"{flag} must be {' or '.join(choices)}, got {shown}. To fix: e.g. "
                                 f"{flag} {choices[-1]}")
            out[name] = value
    out["multi_step"] = _whole(getattr(args, "multi_step", None), "--multi-step", 1, 64, "8")
    if (out["multi_step"] or 1) > 1 and out["scheduler"] != "prefill_first":
        raise ValueError(f"--multi-step {out['multi_step']} is modelled for prefill-first engines only (vLLM V0 "
                         "without chunked prefill). To fix: add --scheduler prefill_first, or leave --multi-step out")
    out["max_batch"] = _whole(args.max_batch, "--max-batch", 1, 100_000, "256 or 2048")
    if args.kv_cache_memory_fraction is not None:
        try:
            value = float(args.kv_cache_memory_fraction)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not 0 < value <= 1:
            raise ValueError(f"--kv-cache-memory-fraction must be a fraction in (0, 1], got "
                             f"{args.kv_cache_memory_fraction!r}. To fix: e.g. --kv-cache-memory-fraction 0.9")
        out["kv_cache_memory_fraction"] = value
    return out


def _whole(value, flag: str, lo: int, hi: int, example: str) -> int | None:
    """A flag's whole number in [lo, hi] (None where not given). ASCII digits only, and the
    length checked before int(), which refuses more than 4,300 digits with its own words."""
    if value is None:
        return None
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(hi)) and lo <= int(text) <= hi):
        shown = repr(value) if len(str(value)) <= 40 else f"{str(value)[:40]!r}... ({len(str(value)):,} characters)"
        raise ValueError(f"{flag} must be a whole number from {lo} to {hi}, got {shown}. To fix: e.g. {flag} {example}")
    return int(text)


def _inline_model(path: str):
    """A --model-json file, validated like a workload's inline model (errors name the field)."""
    from pathlib import Path

    from solver.compile.resolve import model_arch
    from solver.errors import InputError
    from solver.documents.parse import load_document
    from solver.workload.schema import InlineModel

    try:
        data = load_document(Path(path), what="--model-json")
        inline = InlineModel.model_validate_with_paths(data, prefix="--model-json")
    except InputError as exc:
        raise ValueError("invalid --model-json: " + "; ".join(str(v) for v in exc.violations)) from None
    return model_arch(inline)


def _chosen_gpus(args, catalog) -> list:
    if not args.gpu:
        return [g for g in catalog.gpus.values() if g.llm_estimates]
    chosen = []
    lowered = {name.lower(): name for name in catalog.gpus}
    for name in _names(args.gpu):
        key = lowered.get(name.lower())
        if key is None:
            raise ValueError(f"unknown GPU type {name!r}{_did_you_mean(name, catalog.gpus)} "
                             "To fix: use a name from `solver-cli catalog --gpus`")
        chosen.append(catalog.gpus[key])
    return chosen


def _check_choices(args, precisions: list[str]) -> None:
    from solver.perf.api import PRECISIONS
    from solver.perf.engine_profile import check_engine

    for p in precisions:
        if p not in PRECISIONS:
            raise ValueError(f"unknown precision {p!r}{_did_you_mean(p, PRECISIONS)} To fix: use one of {', '.join(PRECISIONS)}")
    why = check_engine(args.engine)
    if why:
        raise ValueError(f"--engine: {why}. To fix: e.g. --engine vllm-0.9")
    for option in ("prompt_tokens", "output_tokens", "batch"):
        value = getattr(args, option)
        if value is not None and (value < (0 if option == "prompt_tokens" else 1) or value > 10_000_000):
            raise ValueError(f"--{option.replace('_', '-')} is out of range: {value}")
    _check_load_options(args)


def _check_load_options(args) -> None:
    """The queueing options: checked before any estimate runs."""
    from solver.perf.queueing import PERCENTILES

    for option in ("ttft_ms", "tpot_ms", "latency_ms"):
        value = getattr(args, option)
        if value is not None and not (math.isfinite(value) and 0 < value <= 3.6e6):
            raise ValueError(f"--{option.replace('_', '-')} must be a positive number of milliseconds, got {value:g}. "
                             f"To fix: e.g. --{option.replace('_', '-')} 500")
    if args.rate is not None and not (math.isfinite(args.rate) and 0 <= args.rate <= 1e9):
        raise ValueError(f"--rate must be a non-negative number of requests/s per replica, got {args.rate:g}. "
                         "To fix: e.g. --rate 5")
    if not (math.isfinite(args.arrival_cv) and 0 <= args.arrival_cv <= 100):
        raise ValueError(f"--arrival-cv must be a non-negative number (1 = Poisson arrivals), got {args.arrival_cv:g}. "
                         "To fix: e.g. --arrival-cv 1")
    if args.role is not None:
        if not (math.isfinite(args.link_gbit_s) and 0 < args.link_gbit_s <= 1e5):
            raise ValueError(f"--link-gbit-s must be a positive number of gigabits per second, got {args.link_gbit_s:g}. "
                             "To fix: e.g. --link-gbit-s 100")
        if args.rate is not None or args.batch is not None:
            raise ValueError("--role prices a worker at the most it sustains; --rate and --batch are for aggregated "
                             "replicas. To fix: drop --rate/--batch, or drop --role")
    if args.percentile is not None:
        if args.percentile not in PERCENTILES:
            raise ValueError(f"--percentile must be one of {', '.join(map(str, PERCENTILES))}, got {args.percentile:g}. "
                             "To fix: e.g. --percentile 99")
        if args.ttft_ms is None and args.tpot_ms is None and args.latency_ms is None:
            raise ValueError("--percentile needs a bound to hold at it. To fix: add --ttft-ms, --tpot-ms or --latency-ms")
    args.confidence = _confidence(args)


def _confidence(args) -> float | str | None:
    """--confidence as a level or "nominal"; the default 0.9 with --percentile, None without."""
    from solver.confidence import DEFAULT_CONFIDENCE, NOMINAL, checked_confidence

    text = args.confidence
    if text is None:
        return DEFAULT_CONFIDENCE if args.percentile is not None else None
    if args.percentile is None:
        raise ValueError("--confidence is about the largest rate that meets a percentile SLO. To fix: add "
                         "--percentile (e.g. 99) with a bound, or drop --confidence")
    if text.strip() == NOMINAL:
        return NOMINAL
    try:
        value = float(text)
    except ValueError:
        value = text
    try:
        return checked_confidence(value)
    except ValueError as exc:
        raise ValueError("--" + str(exc).replace(" e.g. ", " e.g. --confidence ", 1)) from None


def _check_context(args, model) -> None:
    """--prompt-tokens + --output-tokens must fit the model's context length."""
    from solver.models.context import context_violation

    problem = context_violation("", model.name, model.max_context_tokens, args.prompt_tokens, args.output_tokens,
                                model.params_b, prompt_label="--prompt-tokens", output_label="--output-tokens",
                                override="" if args.model_json else "describe it in a --model-json file with "
                                "max_context_tokens")
    if problem is not None:
        raise ValueError(str(problem))


def _rows(args, model, catalog, gpus, sizes, precisions, pinned_precision: bool, pinned_size: bool) -> list[dict]:
    from solver.catalog.hosting import cheapest_host, unbought_host
    from solver.perf import PerfQuery, estimate

    rows = []
    for gpu in gpus:
        has_offers = any(o.gpu == gpu.name for o in catalog.offers)
        for g in sizes:
            host = cheapest_host(catalog, gpu, g)
            if host is None:
                if has_offers and not pinned_size:
                    continue  # no offer hosts this replica size; `--gpus-per-replica` shows it anyway
                host = unbought_host(gpu, g)
            for precision in precisions:
                if not pinned_precision and not gpu.supports(precision):
                    continue
                q = PerfQuery(model=model, gpu=gpu, gpus_per_replica=g, interconnect=host.interconnect,
                              usable_memory_gib=host.usable_memory_gib, precision=precision, engine=args.engine,
                              prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                              ttft_slo_ms=args.ttft_ms, tpot_slo_ms=args.tpot_ms, latency_slo_ms=args.latency_ms,
                              instances_per_replica=host.instances_per_replica, inter_node_gbs=host.inter_node_gbs,
                              batch=args.batch, batching=args.batching, **args.engine_options)
                if args.role is not None:
                    rows.append(_worker_row(args, model, gpu, g, precision, host, q))
                    continue
                row = _row(model, gpu, g, precision, args.engine, host, estimate(q), q)
                if row["feasible"] and (args.rate is not None or args.percentile is not None):
                    row.update(_load_fields(args, q))
                rows.append(row)
    return rows


def _worker_row(args, model, gpu, g: int, precision: str, host, q) -> dict:
    """One prefill or decode worker (solver/perf/disagg.py), in the row shape of a replica."""
    from solver.perf.disagg import decode_worker, prefill_worker, transfer_s

    fn = prefill_worker if args.role == "prefill" else decode_worker
    w = fn(q, link_gbit_s=args.link_gbit_s, percentile=args.percentile)
    row = _row(model, gpu, g, precision, args.engine, host, _as_estimate(w, q), q)
    row.update({"role": args.role, "link_gbit_s": args.link_gbit_s,
                "kv_transfer_ms": _round(transfer_s(q, args.link_gbit_s) * 1e3)})
    if args.role == "prefill":  # its tokens are prompts: price them per million prompt tokens
        price = host.price_usd_per_replica_hour
        row["usd_per_million_output_tokens"] = None
        row["usd_per_million_prompt_tokens"] = _round(price / (w.rate_rps * q.prompt_tokens * 3600) * 1e6, 4) \
            if w.feasible and price is not None and w.rate_rps > 0 and q.prompt_tokens else None
    return row


def _as_estimate(w, q):
    """A worker as a PerfEstimate (what _row reads)."""
    from solver.perf.api import PerfEstimate

    out = max(q.output_tokens, 1)
    return PerfEstimate(feasible=w.feasible, reason=w.reason, reason_kind=w.reason_kind, batch=w.batch,
                        memory_gib_per_gpu=w.memory_gib_per_gpu, ttft_ms=w.ttft_ms, tpot_ms=w.tpot_ms,
                        requests_per_s=w.rate_rps,
                        output_tokens_per_s=w.rate_rps * out if w.role == "decode" else 0.0,
                        binding_limit=w.binding_limit)


def _load_fields(args, q) -> dict:
    """`at_rate` and `max_rate_for_slo` from the queueing model, for one configuration."""
    from dataclasses import replace

    from solver.confidence import band_confidence, band_levels, quantile, rate_margin, slowdown
    from solver.perf.queueing import (TrafficClass, max_rate_for_slo, percentiles_at_rate, percentiles_slowed,
                                      replica_for)

    # The replica runs up to the engine's batch cap (or the pinned batch): queueing, not the
    # no-queue SLO search, decides how full it gets.
    rep = replica_for(replace(q, ttft_slo_ms=None, tpot_slo_ms=None, latency_slo_ms=None))
    classes = (TrafficClass(1.0, q.prompt_tokens, max(q.output_tokens, 1)),)
    table = q.calibration.under_load_slowdown
    out: dict = {}
    if args.rate is not None:
        r = percentiles_at_rate(rep, classes, args.rate, args.arrival_cv)
        out["at_rate"] = {
            "rate_per_s": args.rate, "utilization": _round(r.utilization, 4),
            "ttft_ms_p50": _round(r.ttft_ms[50]), "ttft_ms_p90": _round(r.ttft_ms[90]),
            "ttft_ms_p99": _round(r.ttft_ms[99]), "tpot_ms_p50": _round(r.tpot_ms[50]),
            "tpot_ms_p99": _round(r.tpot_ms[99]), "latency_ms_p99": _round(r.latency_ms[99]),
        }
        # The band at the SLO's percentile (99 without one): the replica slowed by the
        # (1 - c) / 2 and (1 + c) / 2 quantiles of the calibrated slowdown, clamped to
        # contain the model's own value (as a plan's at_load band).
        p = int(args.percentile or 99)
        c = band_confidence(args.confidence)
        low, high = band_levels(c)
        ends = [percentiles_slowed(rep, classes, args.rate, f, args.arrival_cv, percentiles=(p,))
                for f in (min(quantile(low, table), 1.0), max(quantile(high, table), 1.0))]
        out["at_rate"]["band"] = {"confidence": c, **{f"{m}_p{p}": [_round(getattr(e, m)[p]) for e in ends]
                                                        for m in ("ttft_ms", "tpot_ms", "latency_ms")}}
    if args.percentile is not None:
        bounds = dict(ttft_ms=args.ttft_ms, tpot_ms=args.tpot_ms, latency_ms=args.latency_ms,
                      arrival_cv=args.arrival_cv)
        nominal = max_rate_for_slo(rep, classes, int(args.percentile), **bounds)
        # The robust cap (as the planner's at slo.confidence): the replica slowed by the
        # confidence's quantile, with the rate margin kept free.
        s, margin = slowdown(args.confidence, q.calibration), rate_margin(args.confidence)
        robust = max_rate_for_slo(rep.slowed(s), classes, int(args.percentile), **bounds) / (1 + margin)
        out["max_rate_for_slo"] = _round(robust, 4)
        out["max_rate_for_slo_nominal"] = _round(nominal, 4)
        out["confidence"] = {"level": args.confidence, "slowdown": round(s, 6), "rate_margin": margin}
    return out


def _row(model, gpu, g: int, precision: str, engine: str, host, e, q) -> dict:
    from solver.perf.llm import engine_settings, profile

    usd_per_m = None
    if e.feasible and host.price_usd_per_replica_hour is not None and e.output_tokens_per_s > 0:
        usd_per_m = host.price_usd_per_replica_hour / (e.output_tokens_per_s * 3600) * 1e6
    return {
        "model": model.name, "gpu": gpu.name, "gpus_per_replica": g, "instances_per_replica": host.instances_per_replica,
        "precision": precision, "engine": engine, "batching": q.batching,
        # The engine's settings in effect (its version's defaults unless given as options).
        "engine_options": engine_settings(q),
        "engine_version": profile(q).version,
        "interconnect": host.interconnect, "offer": host.offer_id,
        "feasible": e.feasible, "reason": e.reason, "reason_kind": e.reason_kind,
        "batch": e.batch, "max_batch_vram": e.max_batch_vram,
        "memory_gib_per_gpu": _round(e.memory_gib_per_gpu), "weights_gib_per_gpu": _round(e.weights_gib_per_gpu),
        "ttft_ms": _round(e.ttft_ms), "tpot_ms": _round(e.tpot_ms), "latency_ms": _round(e.latency_ms),
        "output_tokens_per_s": _round(e.output_tokens_per_s), "requests_per_s": _round(e.requests_per_s, 4),
        "binding_limit": e.binding_limit, "step_bound": e.step_bound,
        "error_band": e.error_band, "ttft_error_band": e.ttft_error_band, "tpot_error_band": e.tpot_error_band,
        "price_usd_per_replica_hour": _round(host.price_usd_per_replica_hour, 4),
        "usd_per_million_output_tokens": _round(usd_per_m, 4),
    }


def _round(value: float | None, digits: int = 2) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _render(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = [headers, ["-" * w for w in widths]] + rows
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def _table(rows: list[dict], model_name: str, args) -> str:
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    body = []
    for r in rows:
        size = f"{r['gpus_per_replica']}" + (f" ({r['instances_per_replica']} inst)" if r["instances_per_replica"] > 1 else "")
        if r["feasible"]:
            body.append([r["gpu"], size, r["precision"], num(r["memory_gib_per_gpu"], ".1f"), str(r["batch"]),
                         num(r["ttft_ms"], ".0f"), num(r["tpot_ms"], ".1f"), num(r["output_tokens_per_s"], ".0f"),
                         num(r["requests_per_s"], ".2f"), r["binding_limit"], num(r["usd_per_million_output_tokens"], ".3f"),
                         ""])
        else:
            body.append([r["gpu"], size, r["precision"], num(r["memory_gib_per_gpu"], ".1f") if r["memory_gib_per_gpu"] else "-",
                         "-", "-", "-", "-", "-", r["reason_kind"], "-", r["reason"]])
    headers = ["gpu", "gpus/replica", "precision", "mem GiB/GPU", "batch", "TTFT ms", "TPOT ms", "out tok/s",
               "req/s", "binding", "$/M out tok", "why not"]
    if args.rate is not None or args.percentile is not None:
        body, headers = _with_load_columns(rows, body, headers, args)
    from solver.perf import Calibration

    band = Calibration().error_band  # pooled over regimes; each JSON row carries its regime's
    slos = ", ".join(f"{k} {v:g} ms" for k, v in (("TTFT", args.ttft_ms), ("TPOT", args.tpot_ms),
                                                   ("latency", args.latency_ms)) if v is not None) or "none"
    options = ", ".join(f"{k} {v}" for k, v in args.engine_options.items() if v is not None)
    head = (f"{model_name} on {args.engine} ({args.batching} batching{', ' + options if options else ''}): "
            f"{args.prompt_tokens} prompt / {args.output_tokens} output tokens; "
            f"SLOs: {slos}; batch: {args.batch or 'best within VRAM and SLOs'}")
    foot = (f"throughput is per replica; $ per million output tokens on the cheapest offer hosting the replica; "
            f"throughput within +-{100 * band:.0f} % for ~4 in 5 measurements (cross-validated); --format json "
            f"gives each row's throughput, TTFT and TPOT bands for its regime")
    if args.rate is not None:
        foot += (f"\nat {args.rate:g} req/s per replica (arrival CV {args.arrival_cv:g}): utilization of the replica's "
                 "saturation rate and percentiles from the queueing model; '-' where the replica cannot keep up")
    if args.rate is not None:
        from solver.confidence import band_confidence, band_levels

        c = band_confidence(args.confidence)
        low, high = band_levels(c)
        foot += (f"\nTTFT p{args.percentile or 99:g} band: on replicas slowed by the {low:.3g} and {high:.3g} quantiles "
                 f"of the calibrated slowdown (a {c * 100:g} % band; docs/queueing.md)")
    if args.percentile is not None:
        from solver.confidence import NOMINAL, RATE_MARGIN, slowdown

        how = "on the model as it is" if args.confidence == NOMINAL else (
            f"on a replica {slowdown(args.confidence):.2f}x slower than modelled (confidence {args.confidence:g}) with "
            f"{RATE_MARGIN * 100:g} % more traffic")
        foot += (f"\nmax req/s @p{args.percentile:g}: the most requests/s one replica takes with every SLO holding at "
                 f"p{args.percentile:g} {how} (queueing included; never above 90 % of saturation); nominal: the "
                 "same on the model as it is")
    return head + "\n" + _render(headers, body) + "\n" + foot


def _with_load_columns(rows: list[dict], body: list[list[str]], headers: list[str], args):
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    extra_h = []
    p = int(args.percentile or 99)
    if args.rate is not None:
        extra_h += ["util", "TTFT p50/p90/p99 ms", f"TTFT p{p} band", "TPOT p50/p99 ms", "lat p99 s"]
    if args.percentile is not None:
        extra_h += [f"max req/s @p{args.percentile:g}", "nominal"]
    out = []
    for r, line in zip(rows, body):
        extra = []
        a = r.get("at_rate")
        if args.rate is not None:
            if a is None:
                extra += ["-", "-", "-", "-", "-"]
            else:
                band = a["band"][f"ttft_ms_p{p}"]
                extra += [num(a["utilization"], ".2f"),
                          "/".join(num(a[f"ttft_ms_p{p}"], ".0f") for p in (50, 90, 99)),
                          "-".join(num(v, ".0f") for v in band),
                          "/".join(num(a[f"tpot_ms_p{p}"], ".1f") for p in (50, 99)),
                          num(a["latency_ms_p99"] / 1e3 if a["latency_ms_p99"] is not None else None, ".1f")]
        if args.percentile is not None:
            extra += [num(r.get("max_rate_for_slo"), ".2f"), num(r.get("max_rate_for_slo_nominal"), ".2f")]
        out.append(line[:-1] + extra + line[-1:])
    return out, headers[:-1] + extra_h + headers[-1:]


def _list_models() -> int:
    from solver.models.library import ALIASES, MODEL_LIBRARY

    aliases: dict[str, list[str]] = {}
    for alias, name in ALIASES.items():
        aliases.setdefault(name, []).append(alias)
    rows = [[m.name, f"{m.params_b:g}", f"{m.compute_params_b:g}", str(m.layers), str(m.hidden_size),
             f"{m.attention_heads}/{m.kv_heads}", f"{m.max_context_tokens:,}",
             ", ".join(sorted(aliases.get(m.name, [])))] for m in MODEL_LIBRARY.values()]
    print(_render(["model", "params B", "active B", "layers", "hidden", "heads/kv", "context tokens", "aliases"], rows))
    return EXIT_OK
