"""Threads, fork and aborts in core (issue 18, items 5, 6 and 7).

- free() of a Backend, Scheduler, Context, BackendBuffer, Graph or OptContext
  from another thread while Scheduler.compute / OptContext.step runs waits for
  the compute to end, then frees; the computing thread then gets FreedError.
- The GIL is released during compute.
- CPU backends share one thread pool per thread count (200 backends with 4
  threads made 602 threads); set_n_threads still works.
- A fork while another thread computes (holding core locks) leaves a child
  that computes and exits instead of deadlocking.
- ggml's gdb backtrace on abort is off unless PYGGML_BACKTRACE=1.
Each case runs in its own interpreter and fails on a signal or a hang."""

import os
import sys

import pytest

from _subproc import run_py

WORLD = """
def world(n=384, depth=24, with_opt=True):
    be = core.Backend("cpu")
    wctx = core.Context(n_tensors=8)
    x = wctx.new_tensor((n, n)).set_input()
    w = wctx.new_tensor((n, n)).set_param()
    buf = core.BackendBuffer(wctx, be)
    rng = np.random.default_rng(0)
    x.set(rng.normal(size=(n, n)))
    w.set(rng.normal(size=(n, n)) / np.sqrt(n))
    ctx = core.Context(n_tensors=16 * depth + 64, graph_size=8192)
    h = x
    for _ in range(depth):
        h = ops.relu(ops.mul_mat(w, h, ctx=ctx), ctx=ctx)
    out = ops.sum(h, ctx=ctx)
    sched = core.Scheduler([be], graph_size=8192)
    d = dict(be=be, wctx=wctx, buf=buf, ctx=ctx, sched=sched, x=x, w=w, out=out)
    if with_opt:
        d["opt"] = core.OptContext(sched, ctx, x, h, loss="sum", optimizer="sgd", learning_rate=1e-6)
    else:
        d["graph"] = core.Graph(ctx, 4096).build_forward(out)
    return d

def race(d, run, target, delay):
    \"\"\"run() in a loop in one thread; free d[target] from this one while it runs.\"\"\"
    started = threading.Event()
    result = []
    def work():
        try:
            for i in range(1000):
                started.set()
                run()
            result.append("finished")
        except FreedError as e:
            result.append("FreedError")
        except BaseException as e:
            result.append(f"{type(e).__name__}: {e}")
    t = threading.Thread(target=work)
    t.start()
    started.wait(30)
    time.sleep(delay)
    d[target].free()
    t.join(120)
    assert not t.is_alive(), "the computing thread hangs"
    assert d[target].closed
    return result[0]
"""


@pytest.mark.parametrize("target", ["be", "sched", "ctx", "wctx", "buf", "graph"])
def test_free_during_scheduler_compute(target):
    r = run_py(WORLD, f"""
        outcomes = set()
        for delay in (0.0, 0.001, 0.01, 0.03):
            d = world(with_opt=False)
            outcomes.add(race(d, lambda: d["sched"].compute(d["graph"]), {target!r}, delay))
            for k in ("sched", "buf", "ctx", "wctx", "be"):
                d[k].free()
        print("OUTCOMES", sorted(outcomes))
        assert outcomes == {{"FreedError"}}, outcomes
    """, timeout=300)
    assert "OUTCOMES ['FreedError']" in r.stdout


@pytest.mark.parametrize("target", ["be", "sched", "ctx", "wctx", "buf", "opt"])
def test_free_during_opt_step(target):
    r = run_py(WORLD, f"""
        outcomes = set()
        for delay in (0.0, 0.001, 0.01, 0.03):
            d = world(with_opt=True)
            outcomes.add(race(d, lambda: d["opt"].step(), {target!r}, delay))
            for k in ("opt", "sched", "buf", "ctx", "wctx", "be"):
                d[k].free()
        print("OUTCOMES", sorted(outcomes))
        assert outcomes == {{"FreedError"}}, outcomes
    """, timeout=300)
    assert "OUTCOMES ['FreedError']" in r.stdout


def test_gil_is_released_during_compute():
    """While one thread computes a long graph, another runs Python code: its
    counter moves between the compute's start and end (both seen by the
    computing thread)."""
    r = run_py(WORLD, """
        d = world(n=512, depth=40, with_opt=False)
        d["sched"].compute(d["graph"])
        counter = [0]
        stop = threading.Event()
        def spin():
            while not stop.is_set():
                counter[0] += 1
        t = threading.Thread(target=spin)
        t.start()
        moved = []
        for _ in range(5):
            before = counter[0]
            d["sched"].compute(d["graph"])
            moved.append(counter[0] - before)
        stop.set()
        t.join()
        print("MOVED", moved)
        assert sum(m > 0 for m in moved) >= 4, moved
    """, timeout=300)
    assert "MOVED" in r.stdout


def test_backends_share_one_thread_pool():
    r = run_py("""
        def n_threads():
            return len(os.listdir("/proc/self/task"))
        pg.set_n_threads(4)
        base = n_threads()
        jobs = []
        for i in range(200):
            be = core.Backend("cpu")
            ctx = core.Context(n_tensors=4)
            a = ctx.new_tensor((8, 8))
            buf = core.BackendBuffer(ctx, be)
            a.set(np.full((8, 8), float(i)))
            c2 = core.Context(n_tensors=8, graph_size=16)
            out = ops.scale(a, 2.0, ctx=c2)
            g = core.Graph(c2, 16).build_forward(out)
            s = core.Scheduler([be])
            s.compute(g)
            assert out.numpy()[0, 0] == 2.0 * i
            assert be.n_threads == 4
            jobs.append((be, ctx, buf, c2, g, s))
        grown = n_threads() - base
        pools = core._core._thread_pools()
        print("GROWN", grown, "POOLS", pools)
        assert pools == {4: 200}, pools
        assert grown <= 3, grown            # one pool of 4: three worker threads
        # set_n_threads still applies (a second shared pool); a backend keeps the pools it
        # has computed on while it lives (a model's thread trials switch back and forth)
        pg.set_n_threads(2)
        be, ctx, buf, c2, g, s = jobs[0]
        s.compute(g)
        assert be.n_threads == 2 and core._core._thread_pools() == {4: 200, 2: 1}
        grown2 = n_threads() - base
        pg.set_n_threads(4)
        for _ in range(20):                 # back and forth: no new pool, no new threads
            s.compute(g)
            pg.set_n_threads(2 if pg.get_n_threads() == 4 else 4)
        assert core._core._thread_pools() == {4: 200, 2: 1}
        assert n_threads() - base <= grown2, (n_threads() - base, grown2)
        for job in jobs:
            for o in reversed(job):
                o.free()
        assert core._core._thread_pools() == {}
        time.sleep(0.2)
        print("AFTER", n_threads() - base)
        assert n_threads() <= base
    """, timeout=300)
    assert "GROWN" in r.stdout


def test_shared_pool_concurrent_computes_are_correct():
    """Eight threads computing on eight backends that share one pool give the
    results a serial run gives (the pool runs one graph at a time)."""
    r = run_py("""
        pg.set_n_threads(2)
        rng = np.random.default_rng(0)
        jobs = []
        for i in range(8):
            be = core.Backend("cpu")
            ctx = core.Context(n_tensors=4)
            a = ctx.new_tensor((96, 96)); b = ctx.new_tensor((96, 96))
            buf = core.BackendBuffer(ctx, be)
            a0 = rng.normal(size=(96, 96)).astype(np.float32) / 10; b0 = rng.normal(size=(96, 96)).astype(np.float32)
            a.set(a0); b.set(b0)
            c2 = core.Context(n_tensors=64, graph_size=64)
            h = b
            for _ in range(6):
                h = ops.tanh(ops.mul_mat(a, h, ctx=c2), ctx=c2)
            g = core.Graph(c2, 64).build_forward(h)
            s = core.Scheduler([be])
            s.compute(g)
            jobs.append((s, g, h, h.numpy(), (be, ctx, buf, c2)))
        errors = []
        def work(job):
            s, g, h, want, _ = job
            try:
                for _ in range(30):
                    s.compute(g)
                    np.testing.assert_array_equal(h.numpy(), want)
            except BaseException as e:
                errors.append(e)
        ts = [threading.Thread(target=work, args=(j,)) for j in jobs]
        for t in ts: t.start()
        for t in ts: t.join(120)
        assert not any(t.is_alive() for t in ts), "hang"
        assert not errors, errors[0]
        assert core._core._thread_pools() == {2: 8}
        print("OK")
    """, timeout=300)
    assert "OK" in r.stdout


def test_fork_while_another_thread_computes():
    """The child of a fork taken while another thread is inside compute (and
    holds the scheduler's, backend's, contexts' and pool's locks) computes with
    the same objects and with new ones, then exits; it does not deadlock."""
    r = run_py(WORLD, """
        d = world(n=256, depth=12, with_opt=False)
        d["sched"].compute(d["graph"])
        want = float(d["out"].numpy().ravel()[0])
        stop = threading.Event()
        inside = threading.Event()
        def work():
            while not stop.is_set():
                inside.set()
                d["sched"].compute(d["graph"])
        t = threading.Thread(target=work)
        t.start()
        inside.wait(30)
        results = []
        for i in range(4):
            time.sleep(0.005 * i)
            pid = os.fork()
            if pid == 0:
                try:
                    signal.alarm(60)
                    d["sched"].compute(d["graph"])
                    ok = abs(float(d["out"].numpy().ravel()[0]) - want) <= 1e-4 * abs(want)
                    be = core.Backend("cpu")
                    c = core.Context(n_tensors=4, no_alloc=False, mem_size=1024)
                    c2 = core.Context(n_tensors=8, graph_size=16)
                    a = c.new_tensor((4,)); a.set(np.arange(4))
                    g = core.Graph(c2, 16).build_forward(ops.scale(a, 3.0, ctx=c2))
                    core.Scheduler([be]).compute(g)
                    os._exit(0 if ok else 3)
                except BaseException:
                    import traceback; traceback.print_exc()
                    os._exit(4)
            deadline = time.time() + 90
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.time() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status = "hung"
                    break
                time.sleep(0.05)
            results.append(status if status == "hung" else os.waitstatus_to_exitcode(status))
        stop.set()
        t.join()
        print("CHILDREN", results)
        assert results == [0, 0, 0, 0], results
    """, timeout=600)
    assert "CHILDREN [0, 0, 0, 0]" in r.stdout


def test_backtrace_is_off_by_default_and_can_be_turned_on():
    r = run_py("print('NO_BACKTRACE', os.environ.get('GGML_NO_BACKTRACE'))")
    assert "NO_BACKTRACE 1" in r.stdout
    env = {k: v for k, v in os.environ.items() if k != "GGML_NO_BACKTRACE"}
    env["PYGGML_BACKTRACE"] = "1"
    r = run_py("print('NO_BACKTRACE', os.environ.get('GGML_NO_BACKTRACE'))", env=env)
    assert "NO_BACKTRACE None" in r.stdout


def test_an_abort_exits_without_a_debugger():
    """If ggml still aborts somewhere, the process ends at once (SIGABRT) with
    ggml's message and no gdb attached to it."""
    import subprocess
    code = ("import ctypes, pyggml.core._core as c\n"
            "lib = ctypes.CDLL(c.__file__)\n"
            "lib.ggml_abort(b'probe.c', 1, b'probe abort %s', b'here')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GGML_NO_BACKTRACE", "PYGGML_BACKTRACE")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == -6, (r.returncode, r.stderr)
    assert "probe abort here" in r.stderr
    assert "gdb" not in r.stderr.lower() and "#0" not in r.stderr, r.stderr
