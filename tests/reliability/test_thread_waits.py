"""ggml's waiting threads spin for a few tens of microseconds and then sleep
(patch 0023: a futex in the barrier, the pool's condition variable between
graphs).  A lost wake-up hangs; a wake-up too early computes wrong: a pool
with more threads than cores, beside a busy process, does neither."""

from _subproc import run_py


def test_oversubscribed_pool_computes_right_and_never_hangs():
    # 8 threads on this machine's cores while another process spins: the
    # waiting threads fall asleep in the barrier (patch 0023) and must be woken
    # every time; a lost wake-up hangs (the subprocess times out)
    run_py("""
        import subprocess, sys
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            be = core.Backend("cpu")
            ctx = core.Context(n_tensors=64)
            rng = np.random.default_rng(0)
            a_np = rng.normal(size=(96, 64)).astype(np.float32)
            b_np = rng.normal(size=(80, 64)).astype(np.float32)
            a = ctx.new_tensor((96, 64)).set_input()
            b = ctx.new_tensor((80, 64)).set_input()
            buf = core.BackendBuffer(ctx, be)
            a.set(a_np); b.set(b_np)
            gctx = core.Context(n_tensors=64)
            h = a
            for _ in range(12):                  # 12 ops: 12+ barriers per graph
                h = ops.tanh(ops.scale(h, 0.5, ctx=gctx), ctx=gctx)
            out = ops.mul_mat(b, h, ctx=gctx)
            graph = core.Graph(gctx, 256).build_forward(out)
            sched = core.Scheduler([be], graph_size=256)
            want = a_np
            for _ in range(12):
                want = np.tanh(want * 0.5)
            want = want @ b_np.T
            for i in range(400):
                sched.compute(graph, n_threads=8 if i % 3 else 3)
                assert np.allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
        finally:
            busy.kill()
    """, timeout=240)
