"""schema and catalog subcommands of the installed CLI."""

import json
import subprocess


def run(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=60)


def test_schema_prints_workload_json_schema(solver_cli):
    proc = run(solver_cli, "schema")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    assert "services" in schema["properties"] and "Service" in schema["$defs"]


def test_catalog_lists_and_filters_with_provenance(solver_cli):
    proc = run(solver_cli, "catalog", "--gpu", "H100-SXM", "--format", "json")
    assert proc.returncode == 0
    rows = json.loads(proc.stdout)
    assert rows and all(r["gpu"] == "H100-SXM" for r in rows)
    assert all(r["source"] and r["as_of"] for r in rows)
    p5 = next(r for r in rows if r["id"] == "aws/p5.48xlarge")
    assert p5["gpus_per_instance"] == 8 and p5["interconnect"] == "nvlink" and p5["price_usd_per_hour"] == 55.04


def test_catalog_unknown_gpu_suggests(solver_cli):
    proc = run(solver_cli, "catalog", "--gpu", "H100SXM")
    assert proc.returncode == 2 and "did you mean 'H100-SXM'" in proc.stderr


def test_catalog_gpus_table(solver_cli):
    proc = run(solver_cli, "catalog", "--gpus")
    assert proc.returncode == 0 and "A100-80GB" in proc.stdout and "consumer" in proc.stdout


def test_table_numbers_and_plurals_read_naturally():
    from solver.output.render import number, plural

    assert number(1300.0) == "1,300" and number(19.0) == "19" and number(0.504) == "0.504"
    assert "e+" not in number(123456.0) and number(0.0) == "0"
    assert plural(1, "GPU") == "1 GPU" and plural(6, "GPU") == "6 GPUs"


def test_format_json_reports_bad_input_as_json(solver_cli, tmp_path):
    import json
    import subprocess

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"services": [{"name": "x", "demand": {"requests_per_s": -1}}]}))
    proc = subprocess.run([solver_cli, "solve", str(path), "--format", "json"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    body = json.loads(proc.stdout)
    assert body["status"] == "invalid"
    assert any(e["field"] == "services[0].demand.requests_per_s" and e["fix"] for e in body["errors"])
    syntax = tmp_path / "syntax.json"
    syntax.write_text("{not json")
    proc = subprocess.run([solver_cli, "solve", str(syntax), "--format", "json"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and json.loads(proc.stdout)["status"] == "invalid"


def test_ctrl_c_ends_a_long_solve_at_once(solver_cli, tmp_path):
    import json
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from grpc_support import slow_workload

    path = tmp_path / "slow.json"
    path.write_text(json.dumps(slow_workload(time_limit_s=120)))
    proc = subprocess.Popen([solver_cli, "solve", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # candidates built, SCIP running
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5
    assert "interrupted" in err and "Traceback" not in err
    assert time.monotonic() - sent < 10  # generous: the solve itself would run 120 s
