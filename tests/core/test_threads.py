"""Computes in several threads at once give correct results."""

import threading

import numpy as np

from pyggml import core, ops


def make_job(backend, seed, n=96, depth=6):
    rng = np.random.default_rng(seed)
    a0 = rng.normal(size=(n, n)).astype(np.float32) / np.sqrt(n)
    b0 = rng.normal(size=(n, n)).astype(np.float32)
    ctx = core.Context(n_tensors=4)
    a = ctx.new_tensor((n, n))
    b = ctx.new_tensor((n, n))
    buf = core.BackendBuffer(ctx, backend)
    a.set(a0)
    b.set(b0)
    cctx = core.Context(n_tensors=4 * depth + 8, graph_size=4 * depth + 8)
    x = b
    want = b0.astype(np.float64)
    for _ in range(depth):
        x = ops.tanh(ops.mul_mat(a, x, ctx=cctx), ctx=cctx)
        want = np.tanh(want @ a0.T.astype(np.float64))
    g = core.Graph(cctx, 4 * depth + 8)
    g.build_forward(x)
    return dict(ctx=ctx, buf=buf, cctx=cctx, graph=g, out=x, want=want, a=a)


def run_threads(jobs, scheds, rounds=20):
    barrier = threading.Barrier(len(jobs))
    errors = []

    def work(job, sched):
        try:
            for _ in range(rounds):
                barrier.wait(timeout=60)
                sched.compute(job["graph"])
                got = job["out"].numpy()
                np.testing.assert_allclose(got, job["want"], rtol=1e-3, atol=1e-4)
        except BaseException as e:  # noqa: BLE001 - reported in the main thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(j, s)) for j, s in zip(jobs, scheds)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
        assert not t.is_alive(), "a compute thread hangs"
    if errors:
        raise errors[0]


def test_two_threads_own_backends():
    backends = [core.Backend("cpu"), core.Backend("cpu")]
    jobs = [make_job(b, seed) for seed, b in enumerate(backends)]
    scheds = [core.Scheduler([b]) for b in backends]
    run_threads(jobs, scheds)


def test_two_threads_sharing_a_backend():
    """Two schedulers over one Backend: its computes take turns."""
    be = core.Backend("cpu")
    jobs = [make_job(be, seed) for seed in (10, 11)]
    scheds = [core.Scheduler([be]), core.Scheduler([be])]
    run_threads(jobs, scheds)


def test_four_threads_and_thread_counts():
    backends = [core.Backend("cpu") for _ in range(4)]
    jobs = [make_job(b, 20 + i, n=64, depth=4) for i, b in enumerate(backends)]
    scheds = [core.Scheduler([b]) for b in backends]
    run_threads(jobs, scheds, rounds=10)
    # the thread count can change between computes
    for n in (1, 3, 1):
        scheds[0].compute(jobs[0]["graph"], n_threads=n)
        np.testing.assert_allclose(jobs[0]["out"].numpy(), jobs[0]["want"], rtol=1e-3, atol=1e-4)


def test_free_in_another_thread_while_idle():
    be = core.Backend("cpu")
    job = make_job(be, 30)
    sched = core.Scheduler([be])
    sched.compute(job["graph"])
    t = threading.Thread(target=sched.free)
    t.start()
    t.join()
    assert sched.closed
    sched2 = core.Scheduler([be])
    sched2.compute(job["graph"])
    np.testing.assert_allclose(job["out"].numpy(), job["want"], rtol=1e-3, atol=1e-4)
