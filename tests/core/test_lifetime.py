"""Owners of native memory: double free, use after free, every order of
free() and of garbage collection, context managers, and fork."""

import gc
import itertools
import multiprocessing
import os
import random
import weakref

import numpy as np
import pytest

from pyggml import core, ops
from pyggml.errors import FreedError

X = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
W = np.array([[0.5, -1.0, 2.0]], np.float32)

OWNERS = ("backend", "wctx", "buf", "cctx", "graph", "sched", "opt")


def world(with_opt=True):
    """Every kind of owner, wired together as a user would."""
    be = core.Backend("cpu")
    wctx = core.Context(n_tensors=8)
    x = wctx.new_tensor((8, 3), name="x")
    w = wctx.new_tensor((1, 3), name="w").set_param()
    buf = core.BackendBuffer(wctx, be)
    x.set(X)
    w.set(W)
    cctx = core.Context(n_tensors=512, graph_size=4096)
    y = ops.mul_mat(w, x, ctx=cctx)
    sched = core.Scheduler([be], graph_size=4096)
    graph = core.Graph(cctx, 64)
    graph.build_forward(y)
    d = dict(backend=be, wctx=wctx, buf=buf, cctx=cctx, graph=graph, sched=sched, x=x, w=w, y=y)
    if with_opt:
        d["opt"] = core.OptContext(sched, cctx, x, y, loss="sum", learning_rate=0.01)
    return d


def expected_y():
    return X @ W.T


def uses(d):
    """One call per object that needs it alive (name -> zero-argument call)."""
    return {
        "backend": lambda: d["backend"].synchronize(),
        "wctx": lambda: d["wctx"].mem_used,
        "buf": lambda: d["buf"].size,
        "cctx": lambda: d["cctx"].tensors(),
        "graph": lambda: d["graph"].n_nodes,
        "sched": lambda: d["sched"].n_splits,
        "opt": lambda: d["opt"].iter,
        "x": lambda: d["x"].shape,
        "y": lambda: d["y"].shape,
    }


def check_consistent(d):
    """Every object is either usable or raises FreedError naming 'has been freed'."""
    for name, call in uses(d).items():
        if name not in d:
            continue
        try:
            call()
        except FreedError as e:
            assert "has been freed" in str(e), (name, str(e))


def test_compute_works():
    d = world()
    d["sched"].compute(d["graph"])
    np.testing.assert_allclose(d["y"].numpy(), expected_y(), rtol=1e-6)
    d["opt"].step()


@pytest.mark.parametrize("name", OWNERS)
def test_double_free_and_use_after_free(name):
    d = world()
    obj = d[name]
    assert not obj.closed
    obj.free()
    assert obj.closed
    obj.free()                     # idempotent
    with pytest.raises(FreedError, match="has been freed"):
        uses(d)[name]()
    with pytest.raises(FreedError, match="has been freed"):
        obj.__enter__()
    check_consistent(d)
    for o in OWNERS:
        d[o].free()
    check_consistent(d)


def test_use_after_free_of_each_method():
    d = world()
    be, wctx, buf, cctx, graph, sched, opt, x, y = (d[k] for k in OWNERS + ("x", "y"))
    for o in OWNERS:
        d[o].free()
    calls = [
        lambda: wctx.new_tensor((2,)), lambda: wctx.tensors(), lambda: wctx.mem_size,
        lambda: x.numpy(), lambda: x.set(X), lambda: x.shape, lambda: x.dtype, lambda: x.name,
        lambda: x.set_param(), lambda: y.set_loss(), lambda: x.set_input(), lambda: x.nbytes,
        lambda: ops.add(x, x), lambda: ops.sqr(y),
        lambda: be.synchronize(), lambda: be.supports_op(y),
        lambda: buf.clear(0), lambda: buf.is_host, lambda: buf.name,
        lambda: graph.build_forward(y), lambda: graph.nodes(), lambda: graph.grad(x), lambda: graph.reset(),
        lambda: sched.compute(graph), lambda: sched.alloc(graph), lambda: sched.reset(),
        lambda: opt.step(), lambda: opt.alloc(), lambda: opt.loss(), lambda: opt.get_state(),
        lambda: opt.set_labels(X), lambda: opt.read(y), lambda: opt.set_hparams(learning_rate=0.1),
        lambda: opt.reset(), lambda: opt.params,
        lambda: core.BackendBuffer(wctx, be), lambda: core.Graph(cctx), lambda: core.Scheduler([be]),
        lambda: core.OptContext(sched, cctx, x, y),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(FreedError, match="has been freed"):
            call()
    assert "freed" in repr(x) and "freed" in repr(wctx) and "freed" in repr(be)


def test_freeing_an_owner_frees_its_dependents():
    d = world()
    d["wctx"].free()
    # the compute context's ops read the weights' context: it goes first,
    # and with it the graph and the OptContext built on it
    assert d["cctx"].closed and d["graph"].closed and d["opt"].closed
    assert not d["sched"].closed and not d["backend"].closed
    d = world()
    d["backend"].free()
    assert d["buf"].closed and d["sched"].closed and d["opt"].closed
    assert not d["wctx"].closed
    with pytest.raises(Exception, match="no memory"):
        d["x"].numpy()             # its buffer went with the backend


def test_freeing_the_buffer_detaches_tensors():
    d = world(with_opt=False)
    d["sched"].compute(d["graph"])
    d["buf"].free()
    assert not d["x"].is_allocated
    with pytest.raises(Exception, match="no memory"):
        d["x"].numpy()
    # the graph reads x, which has no memory now: the scheduler lays x out in
    # its own memory (like any input without a buffer), where it can be set
    d["sched"].alloc(d["graph"])
    d["x"].set(X)
    d["w"].set(W)
    d["sched"].compute(d["graph"])
    np.testing.assert_allclose(d["y"].numpy(), expected_y(), rtol=1e-6)


def test_scheduler_memory_is_not_read_after_free():
    """Results live in the scheduler's memory: once it is freed (or reused by
    another graph) they are detached, never read from freed memory."""
    be = core.Backend("cpu")
    ctx = core.Context(n_tensors=4)
    a = ctx.new_tensor((512, 512))
    buf = core.BackendBuffer(ctx, be)
    a.set(np.ones((512, 512)))
    c1 = core.Context(n_tensors=16, graph_size=64)
    r1 = ops.scale(a, 2.0, ctx=c1)
    g1 = core.Graph(c1, 64).build_forward(r1)
    c2 = core.Context(n_tensors=64, graph_size=64)
    r2 = a
    for _ in range(6):
        r2 = ops.scale(ops.add(r2, a, ctx=c2), 0.5, ctx=c2)
    g2 = core.Graph(c2, 64).build_forward(r2)
    s = core.Scheduler([be])
    s.compute(g1)
    assert r1.numpy()[0, 0] == 2.0
    s.compute(g2)                        # reuses (and grows) the memory r1 had
    with pytest.raises(Exception, match="no memory"):
        r1.numpy()
    s.compute(g1)                        # laid out again, correctly
    assert r1.numpy()[0, 0] == 2.0
    s.free()
    with pytest.raises(Exception, match="no memory"):
        r1.numpy()
    with pytest.raises(Exception, match="no memory"):
        r1.set(np.zeros((512, 512)))
    s2 = core.Scheduler([be])
    s2.compute(g1)
    assert r1.numpy()[0, 0] == 2.0
    buf.free()


FREE_ORDERS = list(itertools.permutations(OWNERS))


def test_every_order_of_free():
    # all 5040 orders of the seven owners, on fresh worlds
    for order in FREE_ORDERS:
        d = world()
        d["sched"].compute(d["graph"], n_threads=1)   # (a pool of one starts and stops fast)
        for name in order:
            d[name].free()
            check_consistent(d)
        for name in OWNERS:
            assert d[name].closed


def _drop_in_order(order, names):
    d = world()
    d["sched"].compute(d["graph"], n_threads=1)
    refs = {k: weakref.ref(v) for k, v in d.items()}
    for name in order:
        del d[name]
        check_consistent(d)
    del d
    # nothing here makes a reference cycle: reference counting alone frees all
    alive = [k for k in names if refs[k]() is not None]
    assert alive == [], f"still alive after dropping in order {order}: {alive}"


def test_every_order_of_garbage_collection():
    names = OWNERS + ("x", "w", "y")
    for order in FREE_ORDERS:
        _drop_in_order(order + ("x", "w", "y"), names)
    # tensors dropped first, last and in between
    rnd = random.Random(7)
    for _ in range(300):
        order = list(names)
        rnd.shuffle(order)
        _drop_in_order(tuple(order), names)


def test_reference_cycles_are_collected():
    """Owners caught in a reference cycle are freed by the cycle collector in
    whatever order it picks."""
    for seed in range(20):
        d = world()
        d["sched"].compute(d["graph"])
        objs = list(d.values())
        random.Random(seed).shuffle(objs)
        cycle = [objs]
        objs.append(cycle)
        refs = [weakref.ref(o) for o in d.values()]
        del d, objs, cycle
        gc.collect()
        assert all(r() is None for r in refs)


def test_context_managers():
    with core.Backend("cpu") as be:
        with core.Context(n_tensors=4) as ctx:
            a = ctx.new_tensor((2, 2))
            with core.BackendBuffer(ctx, be) as buf:
                a.set(np.eye(2))
                with core.Context(n_tensors=8, graph_size=16) as cctx:
                    with core.Graph(cctx, 16) as g, core.Scheduler([be]) as s:
                        b = ops.scale(a, 3.0, ctx=cctx)
                        g.build_forward(b)
                        s.compute(g)
                        np.testing.assert_array_equal(b.numpy(), 3 * np.eye(2))
                    assert g.closed and s.closed
                assert cctx.closed
            assert buf.closed and not a.is_allocated
        assert ctx.closed
        with pytest.raises(FreedError, match="has been freed"):
            a.numpy()
    assert be.closed
    # an exception inside still frees, and propagates
    with pytest.raises(KeyError):
        with core.Context(n_tensors=4) as c:
            raise KeyError("x")
    assert c.closed


def _child_compute(d, conn=None):
    """In a forked child: compute with the parent's objects, train a step,
    free them (which must not free the parent's memory) and collect."""
    try:
        d["sched"].compute(d["graph"])
        ok = np.allclose(d["y"].numpy(), expected_y(), rtol=1e-6)
        d["opt"].step()
        for name in OWNERS:
            d[name].free()
        ok = ok and all(d[n].closed for n in OWNERS)
        d.clear()
        gc.collect()
        # new objects in the child work too
        with core.Context(n_tensors=2) as c, core.Backend("cpu") as be:
            t = c.new_tensor((2,))
            with core.BackendBuffer(c, be):
                t.set([1, 2])
                ok = ok and list(t.numpy()) == [1, 2]
    except BaseException:
        ok = False
    if conn is not None:
        conn.send(ok)
    return ok


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_os_fork_child_uses_and_frees_parent_objects():
    d = world()
    d["sched"].compute(d["graph"])       # the parent's thread pool exists now
    pid = os.fork()
    if pid == 0:                          # pragma: no cover - the child
        ok = _child_compute(d)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"child died with signal {os.WTERMSIG(status) if os.WIFSIGNALED(status) else '?'}"
    assert os.WEXITSTATUS(status) == 0
    # the parent's objects are untouched
    for name in OWNERS:
        assert not d[name].closed
    d["x"].set(2 * X)
    d["sched"].compute(d["graph"])
    np.testing.assert_allclose(d["y"].numpy(), 2 * expected_y(), rtol=1e-6)
    d["opt"].step()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_multiprocessing_fork_child():
    d = world()
    d["sched"].compute(d["graph"])
    mp = multiprocessing.get_context("fork")
    parent, child = mp.Pipe()
    p = mp.Process(target=_child_compute, args=(d, child))
    p.start()
    assert parent.poll(120), "the child did not answer"
    assert parent.recv() is True
    p.join(60)
    assert p.exitcode == 0
    d["sched"].compute(d["graph"])
    np.testing.assert_allclose(d["y"].numpy(), expected_y(), rtol=1e-6)
