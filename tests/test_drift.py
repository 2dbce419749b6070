"""Generated artefacts are current: protobuf code and the shipped catalog data."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

SHARED = ROOT.parent / "shared"


def test_catalog_data_matches_shared_reference_data():
    if not (SHARED / "data" / "gpu_specs.csv").exists():
        if os.environ.get("CI"):
            pytest.fail("../shared/data is missing in CI")
        pytest.skip("../shared/data not present beside this checkout")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_catalog.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_generated_protobuf_code_is_current():
    script = ROOT / "scripts" / "check_proto.sh"
    assert script.exists()
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stdout + proc.stderr
