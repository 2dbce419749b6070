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
    """A solve that runs until its time limit: CP-SAT stays far from its bound on this
    fleet (measured: 12 services, 2 providers, first plan after ~0.5-1 s, gap ~0.8 after
    10 s), while the candidates build in well under a second."""
    rng = random.Random(seed)
    models = ["llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-3.1-70b", "qwen2.5-32b"]
    return {
        "name": f"slow-{services}",
        "services": [{"name": f"svc{i}", "model": rng.choice(models), "precisions": ["fp16", "fp8"],
                      "demand": {"requests_per_s": round(rng.uniform(0.5, 30), 2), "prompt_tokens": 512,
                                 "output_tokens": 256},
                      "slo": {"ttft_ms": 2000, "tpot_ms": 60}} for i in range(services)],
        "constraints": {"providers": ["lambda", "nebius"]},
        "solver": {"time_limit_s": time_limit_s, "backend": "cp-sat"},
    }


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
