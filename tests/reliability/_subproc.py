"""Run a snippet in its own interpreter; fail on a signal, a hang or an exit code."""

import os
import signal
import subprocess
import sys
import textwrap

PRELUDE = textwrap.dedent("""
    import errno, gc, json, os, resource, signal, stat, sys, threading, time
    import numpy as np
    import pyggml as pg
    from pyggml import core, ops
    from pyggml.errors import AllocationError, ContextFullError, FreedError, GGMLError, GGUFError
""")


def script(*parts):
    """PRELUDE and the parts, each dedented on its own."""
    return PRELUDE + "\n".join(textwrap.dedent(p) for p in parts)


def run_py(*parts, timeout=180, env=None, check=True):
    """Run PRELUDE + the parts with this interpreter.  A death by signal, a timeout or
    (with check) a non-zero exit fails the calling test with the child's output.
    env, when given, is the child's whole environment."""
    full_env = dict(os.environ) if env is None else env      # env: the whole environment
    try:
        r = subprocess.run([sys.executable, "-c", script(*parts)],
                           capture_output=True, text=True, timeout=timeout, env=full_env)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"")[-2000:] if isinstance(e.stdout, bytes) else (e.stdout or "")[-2000:]
        raise AssertionError(f"hung (no exit within {timeout} s); output so far:\n{out}") from None
    if r.returncode < 0:
        raise AssertionError(f"killed by {signal.Signals(-r.returncode).name}:\n"
                             f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    if check and r.returncode != 0:
        raise AssertionError(f"exit code {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r
