"""Issue 12: today's GPUs (with sourced figures and offers), fp4/int4 and the KV-cache dtype."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT, cli_path
from solver.catalog import default_catalog
from solver.catalog.loader import DATA_DIR
from solver.errors import InfeasibleError
from solver.models.library import get_model
from solver.perf import Calibration, PerfQuery, estimate
from solver.perf.engine_profile import engine_profile
from solver.perf.llm import memory_budget
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

CAT = default_catalog()
GPUS = CAT.gpus
CHAT = dict(prompt_tokens=512, output_tokens=256)
NEW_GPUS = ("B200", "GB200", "H200", "H100-NVL", "GH200", "GH200-144GB", "RTX-PRO-6000", "MI300X", "MI325X")
FP4_GPUS = {"B200", "GB200", "RTX-PRO-6000"}


def query(model: str, gpu: str, gpus: int = 1, precision: str = "fp16", **kw) -> PerfQuery:
    g = GPUS[gpu]
    interconnect = "none" if gpus == 1 else "nvlink" if g.form_factor == "SXM" and g.nvlink_gbs else "pcie"
    return PerfQuery(model=get_model(model), gpu=g, gpus_per_replica=gpus, interconnect=interconnect,
                     usable_memory_gib=g.memory_gib, precision=precision, **kw)


def rows(name: str) -> list[dict[str, str]]:
    with open(DATA_DIR / name, newline="") as f:
        return list(csv.DictReader(f))


def build_catalog_module():
    spec = importlib.util.spec_from_file_location("build_catalog", ROOT / "scripts" / "build_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- provenance
@pytest.mark.parametrize("name", ["gpus.csv", "offers.csv"])
def test_every_shipped_spec_and_price_row_cites_a_source_and_a_date(name):
    for r in rows(name):
        assert r["source"].strip(), f"{name}: {r.get('name')} has no source"
        assert r["as_of"].strip(), f"{name}: {r.get('name')} has no as_of"


@pytest.mark.parametrize("name", ["gpus_supplement.csv", "offers_supplement.csv"])
def test_every_supplement_row_states_source_date_and_caveats(name):
    sup = rows(name)
    assert sup
    for r in sup:
        for col in ("source", "as_of", "caveats"):
            assert r[col].strip(), f"{name}: {r.get('name')} has no {col}"


def test_the_build_refuses_a_supplement_row_without_a_source():
    bc = build_catalog_module()
    row = dict(rows("gpus_supplement.csv")[0], source=" ")
    with pytest.raises(bc.SupplementError, match="source"):
        bc.apply_gpu_supplement([], {}, [row])
    offer = dict(rows("offers_supplement.csv")[0], caveats="")
    with pytest.raises(bc.SupplementError, match="caveats"):
        bc.apply_offer_supplement([], set(GPUS), [offer])


def test_the_build_refuses_an_offer_for_an_unknown_gpu():
    bc = build_catalog_module()
    offer = dict(rows("offers_supplement.csv")[0], gpu="B300")
    with pytest.raises(bc.SupplementError, match="unknown GPU"):
        bc.apply_offer_supplement([], set(GPUS), [offer])


# ---------------------------------------------------------------- the GPUs
def test_todays_gpus_are_in_the_catalog_and_estimable():
    for name in NEW_GPUS:
        g = GPUS[name]
        assert g.llm_estimates and g.memory_bandwidth_gbs and g.tflops("fp16"), name
        e = estimate(query("llama-3.1-8b", name, precision="fp8" if g.supports_fp8 else "fp16", **CHAT))
        assert e.feasible, (name, e.reason)


def test_headline_figures():
    assert GPUS["B200"].memory_gib == 180 and "192 GB is the physical HBM3e" in GPUS["B200"].derivation
    assert GPUS["GB200"].nvlink_domain_gpus == 72 and GPUS["B200"].nvlink_domain_gpus == 8
    assert GPUS["GH200-144GB"].memory_gib == 144 and GPUS["GH200-144GB"].memory_bandwidth_gbs == 4900
    assert GPUS["MI300X"].vendor == GPUS["MI325X"].vendor == "AMD"
    assert GPUS["MI325X"].memory_gib == 256 and GPUS["MI325X"].memory_bandwidth_gbs == 6000
    assert GPUS["B200"].tflops("fp4") == 9000 and GPUS["B200"].tflops("fp4") == 2 * GPUS["B200"].tflops("fp8")


def test_fp4_is_supported_only_on_gpus_with_fp4_tensor_cores():
    assert {n for n, g in GPUS.items() if g.supports("fp4")} == FP4_GPUS
    assert all(GPUS[n].architecture.startswith("Blackwell") for n in FP4_GPUS)
    assert GPUS["H100-SXM"].tflops("fp4") is None


def test_int4_follows_the_engines_kernel_support():
    assert GPUS["A100-80GB"].supports("int4") and GPUS["T4"].supports("int4") and GPUS["B200"].supports("int4")
    assert not GPUS["MI300X"].supports("int4") and not GPUS["MI325X"].supports("int4")
    assert GPUS["H100-SXM"].tflops("int4") == GPUS["H100-SXM"].tflops("fp16")  # weight-only: 16-bit GEMMs


def test_gpus_without_a_public_price_have_no_offer_but_estimate():
    offered = {o.gpu for o in CAT.offers}
    assert {"RTX-PRO-6000", "MI300X", "H100-NVL", "B200", "H200"} <= offered
    for name in ("GB200", "GH200-144GB", "MI325X"):
        assert name not in offered
        assert "no" in GPUS[name].derivation.lower() and "price" in GPUS[name].derivation.lower()


def test_azure_nc_h100_v5_is_the_h100_nvl():
    nc = [o for o in CAT.offers if o.provider == "azure" and o.name.startswith("Standard_NC") and "H100" in o.name]
    assert nc and all(o.gpu == "H100-NVL" for o in nc)


# ---------------------------------------------------------------- precisions and memory
def test_fp4_and_int4_weights_take_about_a_quarter_of_16_bit():
    fp16 = memory_budget(query("llama-3.3-70b", "B200", **CHAT)).weights_gib
    fp4 = memory_budget(query("llama-3.3-70b", "B200", precision="fp4", **CHAT)).weights_gib
    int4 = memory_budget(query("llama-3.3-70b", "B200", precision="int4", **CHAT)).weights_gib
    assert 0.28 < fp4 / fp16 < 0.31  # 4.5/16 = 0.281, plus the 16-bit vocabulary matrices
    assert 0.26 < int4 / fp16 < fp4 / fp16


@pytest.mark.parametrize("gpu", sorted(set(GPUS) - FP4_GPUS))
def test_fp4_is_never_feasible_without_fp4_tensor_cores(gpu):
    e = estimate(query("llama-3.1-8b", gpu, precision="fp4", **CHAT))
    assert not e.feasible and e.reason_kind == "unsupported" and "FP4" in e.reason


def test_fp4_is_faster_than_fp8_on_blackwell_at_the_memory_bound():
    fp8 = estimate(query("llama-3.3-70b", "B200", precision="fp8", batch=1, **CHAT))
    fp4 = estimate(query("llama-3.3-70b", "B200", precision="fp4", batch=1, **CHAT))
    assert fp4.tpot_ms < 0.75 * fp8.tpot_ms


def test_int4_is_unsupported_on_amd():
    e = estimate(query("llama-3.1-8b", "MI300X", precision="int4", **CHAT))
    assert not e.feasible and e.reason_kind == "unsupported" and "AWQ/GPTQ" in e.reason


def test_fp8_kv_cache_halves_the_cache_independently_of_the_weights():
    base = dict(precision="fp16", batch=16, **CHAT)
    f16 = estimate(query("llama-3.1-8b", "H100-SXM", **base))
    f8 = estimate(query("llama-3.1-8b", "H100-SXM", kv_precision="fp8", **base))
    assert f8.kv_cache_gib_per_gpu == pytest.approx(f16.kv_cache_gib_per_gpu / 2)
    assert f8.weights_gib_per_gpu == pytest.approx(f16.weights_gib_per_gpu)
    no_fp8 = estimate(query("llama-3.1-8b", "A100-80GB", kv_precision="fp8", **CHAT))
    assert not no_fp8.feasible and "KV-cache precision fp8" in no_fp8.reason


# ---------------------------------------------------------------- architectures in the KV cache
def test_mla_caches_one_latent_per_layer_on_every_tp_rank():
    m = get_model("deepseek-v3")
    assert m.kv_elements_per_token_layer(1) == m.kv_elements_per_token_layer(8) == 512 + 64
    kv = [estimate(query("deepseek-v3", "B200", gpus=g, precision="fp4", batch=4, **CHAT)).kv_cache_gib_per_gpu
          for g in (4, 8)]
    expected = 4 * (512 + 64) * 61 * 2 * (CHAT["prompt_tokens"] + CHAT["output_tokens"]) / 1024**3
    assert kv[0] == pytest.approx(expected) and kv[1] == pytest.approx(expected)


def test_sliding_window_layers_keep_at_most_the_window():
    m = get_model("gpt-oss-120b")
    assert m.kv_tokens(100) == 36 * 100  # within the window every layer holds every token
    assert m.kv_tokens(8192) == 18 * 8192 + 18 * 128
    short = estimate(query("gpt-oss-120b", "H200", precision="fp8", batch=8, prompt_tokens=64, output_tokens=32))
    long = estimate(query("gpt-oss-120b", "H200", precision="fp8", batch=8, prompt_tokens=8192, output_tokens=32))
    full_equivalent = short.kv_cache_gib_per_gpu * (8192 + 32) / (64 + 32)
    assert long.kv_cache_gib_per_gpu == pytest.approx(full_equivalent * (18 * 8224 + 18 * 128) / (36 * 8224), rel=1e-6)


def test_moe_with_shared_experts_reads_the_shared_expert_every_step():
    m = get_model("llama-4-maverick")
    assert m.moe_layer_count == 24 and m.dense_layer_count == 24
    assert m.compute_params_b == pytest.approx(17.2, rel=0.02)  # model card: 17 B active


# ---------------------------------------------------------------- AMD and engines
def test_amd_uses_its_own_efficiency_constants():
    slow_amd = Calibration.from_overrides({"amd_bandwidth_efficiency": 0.3})
    mi = [estimate(query("llama-3.1-8b", "MI300X", batch=1, calibration=c, **CHAT)).tpot_ms
          for c in (Calibration(), slow_amd)]
    h100 = [estimate(query("llama-3.1-8b", "H100-SXM", batch=1, calibration=c, **CHAT)).tpot_ms
            for c in (Calibration(), slow_amd)]
    assert mi[1] > mi[0] and h100[1] == pytest.approx(h100[0])


def test_mi325x_decodes_faster_than_mi300x_by_about_its_bandwidth():
    t = [estimate(query("llama-3.3-70b", g, precision="fp8", batch=1, **CHAT)).tpot_ms for g in ("MI300X", "MI325X")]
    assert 1.0 < t[0] / t[1] <= 6000 / 5300


def test_an_older_engine_version_runs_by_its_cited_factor():
    cal = Calibration()
    assert 0 < cal.engine_factor("vllm-0.5") < 1
    new = estimate(query("llama-3.1-8b", "H100-SXM", batch=32, **CHAT))
    old = estimate(query("llama-3.1-8b", "H100-SXM", batch=32, engine="vllm-0.5", **CHAT))
    # "vllm" is the newest version, which runs at its generation's fitted factor (vllm-v1);
    # "vllm-0.5" at its own cited one instead.
    assert old.tpot_ms == pytest.approx(new.tpot_ms * _speed("vllm") / cal.engine_factor("vllm-0.5"))


def _speed(engine: str) -> float:
    """The speed factor an engine id runs at (its own, else its generation's)."""
    profile = engine_profile(engine, 80.0, "H100-SXM", 1, None, Calibration().activation_tokens)
    return Calibration().speed_factor(engine, profile.generation)


def test_host_time_per_sequence_grows_with_the_batch_of_host_scheduled_engines_only():
    cal = Calibration()
    assert cal.token_overhead_us > 0  # fitted on the max-load rows (llm_benchmarks_product.csv)
    none = Calibration.from_overrides({"token_overhead_us": 0})
    for engine, scheduled in (("tensorrt-llm", True), ("vllm", True), ("llama.cpp", False)):
        for batch in (1, 512):
            q = query("qwen3-30b-a3b", "B200", precision="fp4", batch=batch, engine=engine, **CHAT)
            with_host, without = estimate(q).tpot_ms, estimate(replace(q, calibration=none)).tpot_ms
            # The host's time is the engine's too: it runs at the engine's speed factor.
            expected = batch * cal.token_overhead_us / 1000 / _speed(engine) if scheduled else 0.0
            assert with_host - without == pytest.approx(expected, rel=0.02, abs=1e-9), (engine, batch)


def test_the_fitted_moe_expert_rate_applies_to_fp4_experts_only():
    slow = Calibration.from_overrides({"moe_compute_efficiency": 0.05})
    for precision, affected in (("fp4", True), ("fp8", False), ("bf16", False)):
        q = query("qwen3-30b-a3b", "B200", precision=precision, batch=256, **CHAT)
        base, slowed = estimate(q).tpot_ms, estimate(replace(q, calibration=slow)).tpot_ms
        assert (slowed > 1.05 * base) is affected, precision


# ---------------------------------------------------------------- planning
def _workload(services, **constraints) -> dict:
    return {"services": services, "constraints": constraints}


def _llm(name, model, precisions, rps, **extra):
    return {"name": name, "model": model, "precisions": precisions, **extra,
            "demand": {"requests_per_s": rps, "prompt_tokens": 1000, "output_tokens": 300}}


def test_fp4_lands_only_on_gpus_that_support_it_and_the_plan_passes_the_evaluator():
    w = _workload([_llm("chat", "llama-3.3-70b", ["fp16", "fp8", "fp4"], 12.0, slo={"tpot_ms": 60})],
                  gpu_types=["B200", "H100-SXM", "H200", "RTX-PRO-6000", "MI300X"], gpu_quotas={"B200": 8})
    r = plan(parse_workload(w), PlanOptions())
    assert r.evaluation["ok"], r.evaluation
    for a in r.services[0].assignments:
        if a.precision == "fp4":
            assert a.gpu in FP4_GPUS


def test_a_plan_mixing_new_and_old_gpus_passes_the_evaluator():
    w = _workload([_llm("big", "llama-3.3-70b", ["fp8", "fp4"], 20.0, slo={"tpot_ms": 80}),
                   _llm("small", "qwen3-8b", ["fp16", "fp8", "int4"], 10.0)],
                  gpu_types=["B200", "RTX-PRO-6000", "MI300X", "H100-SXM", "A100-80GB", "L4", "L40S"],
                  gpu_quotas={"B200": 8, "MI300X": 8})
    r = plan(parse_workload(w), PlanOptions())
    assert r.status in ("optimal", "feasible") and r.evaluation["ok"], r.evaluation
    gpus = {a.gpu for s in r.services for a in s.assignments}
    assert gpus & {"B200", "RTX-PRO-6000", "MI300X"} and gpus - {"B200", "RTX-PRO-6000", "MI300X"}, gpus


def _vram_fix(gpu_types: list[str]) -> str:
    # Llama-3.1-405B at fp16 (~810 GB) with Lambda's 8-GPU instances withheld: nothing holds it.
    eights = {o.id: 0 for o in CAT.offers if o.provider == "lambda" and o.gpus_per_instance == 8}
    w = _workload([_llm("big", "llama-3.1-405b", ["fp16"], 1.0)], gpu_types=gpu_types, providers=["lambda"],
                  offer_quotas=eights)
    with pytest.raises(InfeasibleError) as exc:
        plan(parse_workload(w), PlanOptions())
    reason = next(r for r in exc.value.reasons if r.constraint.startswith("vram"))
    return reason.fix


def test_the_explanation_suggests_fp4_only_where_an_fp4_gpu_is_allowed():
    with_b200 = _vram_fix(["B200"])
    assert "allow fp4" in with_b200 and "B200" in with_b200
    without = _vram_fix(["H100-SXM", "A100-80GB"])
    assert "fp4" not in without and "fp8" in without


# ---------------------------------------------------------------- bad input through the CLI
def _solve(tmp_path: Path, workload: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    return subprocess.run([cli_path(), "solve", str(path)], capture_output=True, text=True, timeout=120)


def test_an_unknown_precision_is_bad_input_naming_the_field(tmp_path):
    out = _solve(tmp_path, _workload([_llm("chat", "llama-3.1-8b", ["fp3"], 1.0)]))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "services[0].precisions[0]" in out.stderr and "fp4" in out.stderr  # the allowed values


def test_fp4_on_a_gpu_without_it_in_a_measured_profile_is_bad_input(tmp_path):
    svc = {"name": "img", "demand": {"items_per_min": 10.0},
           "profiles": [{"gpu": "H100-SXM", "precision": "fp4", "items_per_min": 5.0}]}
    out = _solve(tmp_path, _workload([svc]))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "services[0].profiles[0].precision" in out.stderr and "FP4" in out.stderr and "To fix:" in out.stderr


def test_an_unknown_kv_cache_dtype_is_bad_input(tmp_path):
    out = _solve(tmp_path, _workload([_llm("chat", "llama-3.1-8b", ["fp16"], 1.0,
                                           engine_options={"kv_cache_dtype": "int2"})]))
    assert out.returncode == 2 and "services[0].engine_options.kv_cache_dtype" in out.stderr
