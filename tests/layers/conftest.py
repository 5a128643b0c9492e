"""Make the shared layer-test harness importable (tests/layers has no __init__.py),
and run every test here twice: with pyggml's fused CPU ops (what a CPU model
builds) and with the composed forms other backends build (pyggml._scope.fused)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _both_graph_paths(graph_path):
    """Every layer test on both graph forms (tests/conftest.py's graph_path)."""
    yield graph_path
