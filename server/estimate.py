"""The Estimate RPC's work: solver.perf's estimate per GPU type, where a replica would run.

Each replica is placed as `solver-cli estimate` places it (the cheapest offer that holds
whole replicas, else one whose instances a replica can span), so the service and the
CLI give the same numbers (tests/test_grpc_service.py compares them); the CLI rounds
for display, the service does not.
"""

from __future__ import annotations

from dataclasses import asdict, fields

from server.generated.fleetplanner.v1 import planner_pb2 as pb
from solver.catalog import default_catalog
from solver.catalog.hosting import cheapest_host, unbought_host
from solver.errors import FieldViolation, InputError
from solver.models.context import context_violation
from solver.models.library import get_model, model_names
from solver.perf import PerfEstimate, PerfQuery, estimate
from solver.perf.api import PRECISIONS
from solver.perf.engine_profile import check_engine
from solver.workload.schema import MAX_MS, MAX_TOKENS
from solver.suggest import did_you_mean

MAX_GPUS_PER_REPLICA = 64  # as for measured profiles in the workload schema
# PerfEstimate fields the API carries (a test checks that this is all of them).
API_FIELDS = {f.name for f in pb.PerfEstimate.DESCRIPTOR.fields}


def estimate_rows(request: pb.EstimateRequest) -> list[dict]:
    catalog = default_catalog()
    precision = request.precision or "fp16"
    engine = request.engine or "vllm"
    gpus_per_replica = request.gpus_per_replica or 1
    prompt_tokens = request.prompt_tokens or 512
    output_tokens = request.output_tokens or 256
    model = get_model(request.model) if request.model else None
    _check(request, catalog, model, precision, engine, gpus_per_replica, prompt_tokens, output_tokens)

    gpus = [catalog.gpus[request.gpu]] if request.gpu else list(catalog.gpus.values())
    rows = []
    for gpu in gpus:
        if not gpu.llm_estimates or not gpu.supports(precision):
            continue
        host = cheapest_host(catalog, gpu, gpus_per_replica) or unbought_host(gpu, gpus_per_replica)
        q = PerfQuery(model=model, gpu=gpu, gpus_per_replica=gpus_per_replica, interconnect=host.interconnect,
                      usable_memory_gib=host.usable_memory_gib, precision=precision, engine=engine,
                      prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                      ttft_slo_ms=request.ttft_ms if request.HasField("ttft_ms") else None,
                      tpot_slo_ms=request.tpot_ms if request.HasField("tpot_ms") else None,
                      latency_slo_ms=request.latency_ms if request.HasField("latency_ms") else None,
                      instances_per_replica=host.instances_per_replica, inter_node_gbs=host.inter_node_gbs)
        row = {"gpu": gpu.name, "gpus_per_replica": gpus_per_replica,
               "instances_per_replica": host.instances_per_replica, "interconnect": host.interconnect,
               "offer": host.offer_id, "price_usd_per_replica_hour": host.price_usd_per_replica_hour,
               "precision": precision}
        row.update({k: v for k, v in asdict(estimate(q)).items() if k in API_FIELDS})
        rows.append(row)
    if not rows:
        raise InputError.single("precision" if request.gpu else "gpu",
                                f"no GPU type{' ' + request.gpu if request.gpu else ''} can run {precision} estimates.",
                                "try another precision or GPU type")
    return rows


def _check(request, catalog, model, precision, engine, gpus_per_replica, prompt_tokens, output_tokens) -> None:
    problems = []
    if model is None:
        problems.append(FieldViolation(
            "model", f"unknown model {request.model!r}{did_you_mean(request.model, model_names()) or '.'}"
            if request.model else "no model given.", f"use one of {', '.join(model_names())}"))
    if request.gpu and request.gpu not in catalog.gpus:
        problems.append(FieldViolation(
            "gpu", f"unknown GPU type {request.gpu!r}{did_you_mean(request.gpu, catalog.gpus) or '.'}",
            "use a GPU type of the catalog (GetCatalog lists them), or leave it empty for all"))
    if precision not in PRECISIONS:
        problems.append(FieldViolation("precision", f"unknown precision {precision!r}.", f"use one of {', '.join(PRECISIONS)}"))
    engine_problem = check_engine(engine)
    if engine_problem:
        problems.append(FieldViolation("engine", engine_problem, "use e.g. vllm, vllm-0.9, sglang or tensorrt-llm"))
    for name, value, most in (("gpus_per_replica", gpus_per_replica, MAX_GPUS_PER_REPLICA),
                              ("prompt_tokens", prompt_tokens, MAX_TOKENS), ("output_tokens", output_tokens, MAX_TOKENS)):
        if not 0 < value <= most:
            problems.append(FieldViolation(name, f"must be between 1 and {most}, got {value}.",
                                           "use a realistic value, or 0 for the default"))
    if model is not None and 0 < prompt_tokens <= MAX_TOKENS and 0 < output_tokens <= MAX_TOKENS:
        too_long = context_violation("prompt_tokens", model.name, model.max_context_tokens, prompt_tokens,
                                     output_tokens, model.params_b)
        problems.extend([too_long] if too_long else [])
    for name in ("ttft_ms", "tpot_ms", "latency_ms"):
        if request.HasField(name) and not 0 < getattr(request, name) <= MAX_MS:
            problems.append(FieldViolation(name, f"must be between 0 and {MAX_MS:g} ms.",
                                           "give milliseconds (check the units), or leave it unset"))
    if problems:
        raise InputError(problems)


def missing_api_fields() -> set[str]:
    """PerfEstimate fields the proto lacks (should be empty)."""
    return {f.name for f in fields(PerfEstimate)} - API_FIELDS
