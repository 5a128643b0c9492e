"""Set-up shared by the whole suite."""

import signal

import pytest

# Several tests send SIGINT to a child process and expect Ctrl-C's behaviour there.  A shell starts
# background jobs with SIGINT ignored and children inherit that (a Python started so never raises
# KeyboardInterrupt): give this process the usual handler back, so its children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(params=["fused", "composed"])
def graph_path(request):
    """The graphs' two forms: pyggml's fused CPU ops ("fused") and the composed ones other
    backends build ("composed"); tests/layers takes both for every test."""
    from pyggml import _scope
    old = _scope.FORCE_COMPOSED
    _scope.FORCE_COMPOSED = request.param == "composed"
    try:
        yield request.param
    finally:
        _scope.FORCE_COMPOSED = old
