"""Make the shared layer-test harness importable (tests/layers has no __init__.py),
and run every test here twice: with pyggml's fused CPU ops (what a CPU model
builds) and with the composed forms other backends build (pyggml._scope.fused)."""

import os
import sys

import pytest

from pyggml import _scope

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True, params=["fused", "composed"])
def graph_path(request):
    """The layers' graphs: "fused" (the CPU's ops) or "composed" (the portable forms)."""
    old = _scope.FORCE_COMPOSED
    _scope.FORCE_COMPOSED = request.param == "composed"
    try:
        yield request.param
    finally:
        _scope.FORCE_COMPOSED = old
