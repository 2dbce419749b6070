import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def cli_path() -> str:
    """The installed console script (the real CLI, run as a subprocess)."""
    exe = Path(sys.executable).with_name("solver-cli")
    if exe.exists():
        return str(exe)
    found = shutil.which("solver-cli")
    if not found:
        pytest.fail("solver-cli is not installed: run `pip install -e .[test]`")
    return found


@pytest.fixture(scope="session")
def solver_cli() -> str:
    return cli_path()
