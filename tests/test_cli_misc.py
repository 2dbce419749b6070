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
