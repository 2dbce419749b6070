"""Shared pieces of the gRPC tests: workloads, a real server on a loopback port, certificates."""

from __future__ import annotations

import random
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from server.app import ServerConfig, create_server

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
# Fields that measure time, not the plan: left out when comparing plans.
TIMING_KEYS = ("solve_time_s",)
SOLVER_TIMING_KEYS = ("solve_time_s", "total_time_s", "timings")

SMALL = {"name": "demo", "services": [{
    "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
    "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256},
    "slo": {"ttft_ms": 2000, "tpot_ms": 60}}]}

INFEASIBLE = {"name": "too-big", "services": [{
    "name": "huge", "model": "llama-3.1-405b", "precisions": ["fp16"],
    "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256}}],
    "constraints": {"gpu_types": ["L4"]}}


def slow_workload(services: int = 12, seed: int = 1, time_limit_s: float = 60.0) -> dict:
    """A solve that runs until its time limit with a plan from the start: SCIP cannot close
    the last 0.01 % of the gap on it (measured: 12 services, one 1-GPU offer per catalog GPU
    type priced within 3 % of its throughput, candidates in 0.01 s, solving from 0.2 s,
    still gap 1.3e-4 at 30 s). It used CP-SAT's slowness until issue 25 withdrew CP-SAT."""
    from solver.catalog import default_catalog

    rng = random.Random(seed)
    gpus = sorted(n for n, g in default_catalog().gpus.items() if not g.consumer)
    speed = {g: rng.uniform(50, 500) for g in gpus}  # items/min of one replica, roughly
    offers = [{"provider": "p", "name": f"o{i}", "gpu": g, "gpus_per_instance": 1,
               "price_usd_per_hour": round(speed[g] / 100 * rng.uniform(0.97, 1.03), 4)} for i, g in enumerate(gpus)]
    return {
        "name": f"slow-{services}",
        "services": [{"name": f"s{k}", "demand": {"items_per_min": round(rng.uniform(2000, 9000), 1)},
                      "profiles": [{"gpu": g, "items_per_min": round(speed[g] * rng.uniform(0.9, 1.1), 2)}
                                   for g in gpus]} for k in range(services)],
        "catalog": {"offers": offers},
        "solver": {"time_limit_s": time_limit_s, "backend": "scip"},
    }


SMALL_MODELS = ["llama-2-7b", "llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-2-13b"]
BIG_MODELS = ["llama-2-70b", "llama-3.1-70b", "qwen2.5-32b", "qwen2.5-72b", "mixtral-8x7b"]


def generated_workload(services: int, seed: int = 0) -> dict:
    """bench/solve_scaling.py's random workloads against the full catalog: a few dozen
    services make every stage of a solve last long enough (seconds on the development
    machine) to be cancelled in."""
    rng = random.Random(seed)
    out = []
    for i in range(services):
        roll = rng.random()
        if roll < 0.15:
            base = rng.uniform(20, 200)
            out.append({"name": f"svc{i}", "demand": {"items_per_min": round(rng.uniform(50, 3000), 1)},
                        "profiles": [{"gpu": g, "items_per_min": round(base * f, 1), "latency_ms": round(2000 / f)}
                                     for g, f in (("L4", 1.0), ("A10G", 1.2), ("L40S", 2.4), ("A100-80GB", 3.0),
                                                  ("H100-SXM", 5.0))]})
            continue
        out.append({
            "name": f"svc{i}", "model": rng.choice(SMALL_MODELS if roll < 0.75 else BIG_MODELS),
            "precisions": rng.choice([["fp16"], ["fp16", "fp8"]]),
            "demand": {"requests_per_s": round(rng.uniform(0.2, 30), 2),
                       "prompt_tokens": rng.choice([128, 512, 1024, 2048]),
                       "output_tokens": rng.choice([64, 128, 256, 512])},
            "slo": {"ttft_ms": rng.choice([1000, 2000, 5000]), "tpot_ms": rng.choice([40, 60, 100])},
            "min_replicas": rng.choice([0, 1, 1, 2])})
    return {"name": f"generated-{services}-{seed}", "services": out, "solver": {"time_limit_s": 600}}


def yaml_alias_bomb(levels: int = 6, fan_out: int = 10) -> str:
    """A small YAML document whose aliases expand to fan_out**levels leaves (10**6 by
    default, in under 700 bytes): walking it as a tree takes seconds."""
    lines = [f"l0: &l0 [{', '.join(['1.5'] * fan_out)}]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fan_out)}]")
    lines.append("services: [{name: chat, model: llama-3.1-8b, demand: {requests_per_s: 1, prompt_tokens: 8, "
                 f"output_tokens: 8}}, bomb: *l{levels - 1}}}]")
    return "\n".join(lines) + "\n"


def without_timings(plan: dict) -> dict:
    out = {k: v for k, v in plan.items() if k not in TIMING_KEYS}
    if out.get("solver"):
        out["solver"] = {k: v for k, v in out["solver"].items() if k not in SOLVER_TIMING_KEYS}
    return out


@contextmanager
def running_server(**settings):
    """A real server on 127.0.0.1 and a free port; stopped (without grace) afterwards."""
    settings.setdefault("max_concurrent_solves", 2)
    settings.setdefault("max_queue", 4)
    planner, port = create_server(ServerConfig(address="127.0.0.1", port=0, **settings))
    try:
        yield planner, f"127.0.0.1:{port}"
    finally:
        planner.stop(0).wait(10)


def make_certificates(folder: Path) -> dict[str, bytes]:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client
    certificate, made with the openssl command line."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make test certificates")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=folder, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
        "-subj", "/CN=planner-test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"),
                      ("client", "extendedKeyUsage=clientAuth")):
        (folder / f"{name}.ext").write_text(ext + "\n")
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN=planner-test-{name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
    return {n: (folder / n).read_bytes() for n in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}
