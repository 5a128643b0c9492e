"""pyggml's pool of CPU memory for buffers made and freed again and again (a GradientTape's
each step): a pooled buffer's block goes back to the pool when the buffer is freed and the
next pooled buffer of a size it fits takes it, instead of the system's fresh pages."""

import gc

import numpy as np
import pytest

from pyggml import core, ops

MIB = 1 << 20


@pytest.fixture
def cpu():
    be = core.Backend("cpu")
    core.pool_release()
    yield be
    gc.collect()
    core.pool_release()
    be.free()


def _ctx(n_floats, n=1):
    ctx = core.Context(n_tensors=2 * n + 2)
    ts = [ctx.new_tensor((n_floats,)) for _ in range(n)]
    return ctx, ts


def test_a_freed_pooled_buffer_s_block_is_lent_to_the_next(cpu):
    base = core.pool_stats()["in_use"]
    ctx, (t,) = _ctx(3 * MIB // 4)                       # 3 MiB
    buf = core.BackendBuffer(ctx, cpu, pooled=True)
    s = core.pool_stats()
    assert s["in_use"] - base >= 3 * MIB and s["held"] == 0
    a = np.arange(t.shape[0], dtype=np.float32)
    t.set(a)
    np.testing.assert_array_equal(t.numpy(), a)
    buf.free()
    s = core.pool_stats()
    assert s["in_use"] == base and s["held"] >= 3 * MIB      # kept: it was lent out at once before
    # the next buffer of that size takes the block back (the pool holds nothing then)
    ctx2, (t2,) = _ctx(3 * MIB // 4 - 1000)
    buf2 = core.BackendBuffer(ctx2, cpu, pooled=True)
    assert core.pool_stats()["held"] == 0
    t2.set(np.ones(t2.shape, np.float32))
    assert float(t2.numpy().sum()) == t2.shape[0]
    # its tensors are computed on as any buffer's
    cctx = core.Context(n_tensors=8, graph_size=16)
    y = ops.scale(t2, 3.0, ctx=cctx)
    g = core.Graph(cctx, 16)
    g.build_forward(y)
    sched = core.Scheduler([cpu], graph_size=64)
    sched.compute(g)
    np.testing.assert_array_equal(y.numpy(), np.full(t2.shape, 3.0, np.float32))
    for o in (sched, g, cctx, buf2, ctx2, ctx):
        o.free()


def test_a_block_much_larger_than_asked_is_not_tied_up(cpu):
    ctx, _ = _ctx(4 * MIB)                                # 16 MiB
    core.BackendBuffer(ctx, cpu, pooled=True).free()
    held = core.pool_stats()["held"]
    assert held >= 16 * MIB
    small, _ = _ctx(MIB // 2)                             # 2 MiB: a block of its own
    buf = core.BackendBuffer(small, cpu, pooled=True)
    assert core.pool_stats()["held"] == held
    buf.free()


def test_small_and_unpooled_buffers_keep_their_own_memory(cpu):
    before = core.pool_stats()
    ctx, _ = _ctx(1000)                                   # 4 KB: malloc's
    buf = core.BackendBuffer(ctx, cpu, pooled=True)
    assert core.pool_stats() == before
    buf.free()
    big, _ = _ctx(MIB)
    buf = core.BackendBuffer(big, cpu)                    # not pooled
    assert core.pool_stats() == before
    buf.free()
    assert core.pool_stats() == before


def test_pool_release_gives_the_kept_blocks_back(cpu):
    ctx, _ = _ctx(MIB)
    buf = core.BackendBuffer(ctx, cpu, pooled=True)
    other, _ = _ctx(MIB)
    buf2 = core.BackendBuffer(other, cpu, pooled=True)
    buf.free()
    held = core.pool_stats()["held"]
    assert held >= 4 * MIB
    assert core.pool_release() == held
    s = core.pool_stats()
    assert s["held"] == 0 and s["in_use"] >= 4 * MIB and s["peak"] == s["in_use"]
    buf2.free()                 # within the peak (what is in use now): kept again
    assert core.pool_stats()["held"] >= 4 * MIB


def test_the_pool_keeps_no_more_than_was_lent_at_once(cpu):
    sizes = [MIB // 2, MIB, 2 * MIB]
    for n in sizes:                      # one at a time: the peak is the largest
        ctx, _ = _ctx(n)
        core.BackendBuffer(ctx, cpu, pooled=True).free()
    s = core.pool_stats()
    assert s["held"] <= s["peak"] and s["peak"] < 12 * MIB


def test_freeing_the_context_returns_its_pooled_block(cpu):
    ctx, (t,) = _ctx(MIB)
    core.BackendBuffer(ctx, cpu, pooled=True)            # the context keeps it
    assert core.pool_stats()["in_use"] >= 4 * MIB
    ctx.free()
    assert core.pool_stats()["in_use"] == 0
    with pytest.raises(Exception):
        t.numpy()


def test_pooled_keyword_only_and_on_a_context_that_holds_data(cpu):
    ctx, _ = _ctx(MIB)
    with pytest.raises(TypeError):
        core.BackendBuffer(ctx, cpu, True)
    held = core.Context(no_alloc=False, mem_size=1 << 16)
    held.new_tensor((4,))
    with pytest.raises(ValueError, match="no_alloc"):
        core.BackendBuffer(held, cpu, pooled=True)
    ctx.free()


def test_a_forked_child_allocates_from_its_own_pool(cpu):
    import os
    import threading
    ctx, _ = _ctx(MIB)
    core.BackendBuffer(ctx, cpu, pooled=True).free()
    # another thread takes and gives blocks while the fork happens (the pool's lock must not be
    # copied held into the child)
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            c, _ = _ctx(MIB)
            core.BackendBuffer(c, cpu, pooled=True).free()
            c.free()
    th = threading.Thread(target=churn)
    th.start()
    try:
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    c, (t,) = _ctx(MIB)
                    b = core.BackendBuffer(c, core.Backend("cpu"), pooled=True)
                    t.set(np.ones(t.shape, np.float32))
                    code = 0 if float(t.numpy().sum()) == t.shape[0] and core.pool_stats()["in_use"] > 0 else 2
                    b.free()
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.set()
        th.join()
    ctx.free()
