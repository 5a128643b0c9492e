"""A fixed-seed short run of tools/fuzz_models.py (call sequences on models,
trainers and snapshots), in a subprocess so that a crash is caught."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "fuzz_models.py"


def test_call_sequences_never_crash():
    pytest.importorskip("hypothesis")
    if not TOOL.is_file():
        pytest.skip("tools/fuzz_models.py is not beside the tests")
    n = os.environ.get("PYGGML_FUZZ_EXAMPLES", "300")
    r = subprocess.run([sys.executable, str(TOOL), "--examples", n, "--seed", "0"], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    assert "fuzz: " in r.stdout and ": ok" in r.stdout
