"""Ctrl-C during a long compute raises KeyboardInterrupt and leaves every
object usable.  Each scenario runs in its own interpreter, so that a compute
that could not be stopped (or a crash) fails the test instead of hanging or
killing the test run."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

PRELUDE = textwrap.dedent('''
    import os, signal, sys, threading, time
    import numpy as np
    from pyggml import core, ops

    N = 512
    be = core.Backend("cpu")
    ctx = core.Context(n_tensors=4)
    a = ctx.new_tensor((N, N))
    buf = core.BackendBuffer(ctx, be)
    a.set(np.eye(N, dtype=np.float32))
    sched = core.Scheduler([be], graph_size=16384)

    def chain(n):
        """a @ a @ ... (n products): with a = I, the result is I; long for large n."""
        cctx = core.Context(n_tensors=n + 8, graph_size=n + 8)
        x = a
        for _ in range(n):
            x = ops.mul_mat(a, x, ctx=cctx)
        g = core.Graph(cctx, n + 8)
        g.build_forward(x)
        return cctx, g, x

    def interrupt_after(seconds, how):
        main = threading.main_thread().ident
        def fire():
            time.sleep(seconds)
            if how == "pthread_kill":
                signal.pthread_kill(main, signal.SIGINT)
            else:
                os.kill(os.getpid(), signal.SIGINT)
        t = threading.Thread(target=fire, daemon=True)
        t.start()
        return t

    def interrupted_compute(g, how):
        # the long chain takes minutes; the interrupt comes after a moment
        t = interrupt_after(0.3, how)
        try:
            sched.compute(g)
        except KeyboardInterrupt:
            t.join()
            return True
        t.join()
        return False
''')


def run(body, timeout=180):
    code = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.parametrize("how", ["pthread_kill", "kill"])
def test_sigint_stops_a_long_compute(how):
    out = run(f'''
        cctx, g, x = chain(4000)
        assert interrupted_compute(g, {how!r}), "the compute ran to its end"
        print("INTERRUPTED")
        # the same scheduler, backend and input: a short chain gives the right answer
        c2, g2, y = chain(3)
        sched.compute(g2)
        assert np.allclose(y.numpy(), np.eye(N)), "wrong result after the interrupt"
        # and an op on the same input
        c3 = core.Context(n_tensors=4, graph_size=8)
        z = ops.scale(a, 3.0, ctx=c3)
        sched.compute(core.Graph(c3, 8).build_forward(z))
        assert np.allclose(z.numpy(), 3 * np.eye(N))
        print("USABLE")
    ''')
    assert "INTERRUPTED" in out and "USABLE" in out


def test_interrupt_twice_then_finish():
    out = run('''
        cctx, g, x = chain(4000)
        assert interrupted_compute(g, "pthread_kill")
        assert interrupted_compute(g, "pthread_kill"), "the second interrupt was lost"
        print("TWICE")
        # a graph that was interrupted computes fully when left alone
        c2, g2, y = chain(4)
        a.set(2 * np.eye(N, dtype=np.float32))
        sched.compute(g2)
        assert np.allclose(y.numpy(), 32 * np.eye(N))
        sched.compute(g2)
        assert np.allclose(y.numpy(), 32 * np.eye(N))
        print("DONE")
    ''')
    assert "TWICE" in out and "DONE" in out


def test_sigint_outside_compute_is_plain_keyboard_interrupt():
    out = run('''
        c2, g2, y = chain(2)
        sched.compute(g2)          # installs pyggml's handler in front of Python's
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                time.sleep(0.01)
        except KeyboardInterrupt:
            print("PLAIN")
        # a stale flag from that signal does not stop the next compute
        sched.compute(g2)
        assert np.allclose(y.numpy(), np.eye(N))
        print("NEXT")
    ''')
    assert "PLAIN" in out and "NEXT" in out


def test_a_custom_sigint_handler_still_runs():
    out = run('''
        hits = []
        signal.signal(signal.SIGINT, lambda s, f: hits.append(s))
        cctx, g, x = chain(4000)
        t = interrupt_after(0.3, "pthread_kill")
        try:
            sched.compute(g)
            print("NO-RAISE")
        except KeyboardInterrupt:
            print("RAISED")
        t.join()
        # the user's handler saw the signal, whatever the compute did
        time.sleep(0.05)
        assert hits, "the user's SIGINT handler never ran"
        print("HANDLER")
    ''')
    assert "HANDLER" in out
