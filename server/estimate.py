"""The Estimate RPC's work: one performance-model query per GPU type, as JSON-shaped rows."""

from __future__ import annotations

from dataclasses import asdict, fields

from server.generated.fleetplanner.v1 import planner_pb2 as pb
from solver.catalog import default_catalog
from solver.catalog.loader import interconnect_for
from solver.errors import FieldViolation, InputError
from solver.models.library import get_model, model_names
from solver.perf import PerfEstimate, PerfQuery, estimate
from solver.perf.api import ENGINES, PRECISIONS
from solver.suggest import did_you_mean

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
    problems = []
    if model is None:
        problems.append(FieldViolation("model", f"unknown model {request.model!r}{did_you_mean(request.model, model_names()) or '.'}"
                                       if request.model else "no model given.", f"use one of {', '.join(model_names())}"))
    if request.gpu and request.gpu not in catalog.gpus:
        problems.append(FieldViolation("gpu", f"unknown GPU type {request.gpu!r}{did_you_mean(request.gpu, catalog.gpus) or '.'}",
                                       "use a GPU type of the catalog (GetCatalog lists them), or leave it empty for all"))
    if precision not in PRECISIONS:
        problems.append(FieldViolation("precision", f"unknown precision {precision!r}.", f"use one of {', '.join(PRECISIONS)}"))
    if engine not in ENGINES:
        problems.append(FieldViolation("engine", f"unknown engine {engine!r}.", f"use one of {', '.join(ENGINES)}"))
    for name, value in (("gpus_per_replica", gpus_per_replica), ("prompt_tokens", prompt_tokens),
                        ("output_tokens", output_tokens)):
        if value < 0:
            problems.append(FieldViolation(name, f"must not be negative, got {value}.", "use a positive number"))
    for name in ("ttft_ms", "tpot_ms", "latency_ms"):
        if request.HasField(name) and not getattr(request, name) > 0:
            problems.append(FieldViolation(name, "must be positive.", "give milliseconds > 0, or leave it unset"))
    if problems:
        raise InputError(problems)

    gpus = [catalog.gpus[request.gpu]] if request.gpu else list(catalog.gpus.values())
    rows = []
    for gpu in gpus:
        if not gpu.llm_estimates or not gpu.supports(precision):
            continue
        link = interconnect_for(gpu, gpus_per_replica)
        q = PerfQuery(model=model, gpu=gpu, gpus_per_replica=gpus_per_replica, interconnect=link,
                      usable_memory_gib=gpu.memory_gib, precision=precision, engine=engine,
                      prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                      ttft_slo_ms=request.ttft_ms if request.HasField("ttft_ms") else None,
                      tpot_slo_ms=request.tpot_ms if request.HasField("tpot_ms") else None,
                      latency_slo_ms=request.latency_ms if request.HasField("latency_ms") else None)
        row = {"gpu": gpu.name, "gpus_per_replica": gpus_per_replica, "interconnect": link, "precision": precision}
        row.update({k: v for k, v in asdict(estimate(q)).items() if k in API_FIELDS})
        rows.append(row)
    if not rows:
        raise InputError.single("precision" if request.gpu else "gpu",
                                f"no GPU type{' ' + request.gpu if request.gpu else ''} can run {precision} estimates.",
                                "try another precision or GPU type")
    return rows


def missing_api_fields() -> set[str]:
    """PerfEstimate fields the proto lacks (should be empty)."""
    return {f.name for f in fields(PerfEstimate)} - API_FIELDS
