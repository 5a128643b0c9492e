"""Remote devices (pyggml.rpc): every test here skips when the build has no RPC
backend.  Fixtures start a real server in a subprocess on 127.0.0.1."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyggml as pg  # noqa: E402
from rpc_support import ServerProcess  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if pg.rpc.available():
        return
    skip = pytest.mark.skip(reason="this build of pyggml has no RPC backend (meson option rpc)")
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def server():
    """One server for a module's tests (one client at a time: this process)."""
    with ServerProcess() as s:
        yield s


@pytest.fixture(scope="module")
def rpc_device(server):
    """The remote device of the module's server, connected for the module."""
    names = pg.rpc.connect(server.endpoint)
    yield names[0]
    pg.rpc.disconnect(server.endpoint)
