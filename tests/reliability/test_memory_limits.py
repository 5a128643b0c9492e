"""Running out of memory raises AllocationError, in training too (issue 18, item 4).

ggml-opt ignored a graph it could not allocate (SIGSEGV), a C++ bad_alloc
crossed into C (abort), ggml_init asserted on a context it could not allocate,
and a thread pool that could not start its threads asserted.  Each case runs
in its own interpreter with RLIMIT_AS lowered to what the process already uses
plus a margin, over a range of margins, so that each allocation in turn is the
one that fails; the process must never die, every failure must be a
MemoryError (AllocationError), and once the limit is lifted the same objects
must work again."""

import os

import pytest

from _subproc import run_py

import pyggml._config as _config

# AddressSanitizer reserves terabytes of shadow address space: an RLIMIT_AS
# near the process's size makes it fail before Python does
pytestmark = pytest.mark.skipif(
    _config.sanitize not in ("", "none") or "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="address-space limits do not work under AddressSanitizer")

LIMITS = """
def vm_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")

def with_limit(extra, fn):
    \"\"\"fn() with the address space limited to what is used now plus extra bytes.\"\"\"
    gc.collect()
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + extra, resource.RLIM_INFINITY))
    try:
        return ("ok", fn())
    except MemoryError as e:
        # ours, Python's, or numpy's own (_ArrayMemoryError) when the batch copy is what fails
        assert isinstance(e, AllocationError) or type(e) is MemoryError or \
            type(e).__module__.startswith("numpy"), type(e)
        return (type(e).__name__, str(e)[:120])
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

MARGINS = [i * 2**20 for i in (0, 1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)]
"""


def test_huge_context_raises_without_a_limit():
    r = run_py("""
        try:
            core.Context(no_alloc=False, mem_size=2**40)
        except AllocationError as e:
            print("RAISED", e)
    """)
    assert "RAISED could not allocate a Context" in r.stdout, r.stdout + r.stderr


def test_context_under_a_memory_limit_raises():
    r = run_py(LIMITS, """
        outcomes = [with_limit(m, lambda: core.Context(no_alloc=False, mem_size=64 * 2**20).free())
                    for m in MARGINS]
        print("OUTCOMES", outcomes)
        assert outcomes[0][0] == "AllocationError" and outcomes[-1][0] == "ok", outcomes
        core.Context(no_alloc=False, mem_size=64 * 2**20).free()
        print("DONE")
    """)
    assert "DONE" in r.stdout


def test_core_training_steps_under_memory_limits():
    """OptContext.step over a range of limits: AllocationError or a step, never a
    crash; the graph allocation failing (where ggml-opt crashed) is among them;
    without a limit the same OptContext steps again."""
    r = run_py(LIMITS, """
        be = core.Backend("cpu")
        wctx = core.Context(n_tensors=8)
        x = wctx.new_tensor((256, 512)).set_input()
        w1 = wctx.new_tensor((512, 512)).set_param()
        w2 = wctx.new_tensor((8, 512)).set_param()
        buf = core.BackendBuffer(wctx, be)
        rng = np.random.default_rng(0)
        x.set(rng.normal(size=(256, 512)))
        w1.set(rng.normal(size=(512, 512)) * 0.05)
        w2.set(rng.normal(size=(8, 512)) * 0.05)
        ctx = core.Context(n_tensors=4096, graph_size=4096)
        h = ops.relu(ops.mul_mat(w1, x, ctx=ctx), ctx=ctx)
        out = ops.mul_mat(w2, h, ctx=ctx)
        sched = core.Scheduler([be], graph_size=8192)
        opt = core.OptContext(sched, ctx, x, out, loss="mse", optimizer="adamw")
        labels = rng.normal(size=(256, 8))
        opt.set_labels(labels)
        outcomes = []
        for m in MARGINS:
            sched.reset()                  # the next step lays its graph out afresh
            outcomes.append(with_limit(m, opt.step))
        print("OUTCOMES", outcomes)
        kinds = [o[0] for o in outcomes]
        assert "AllocationError" in kinds and "ok" in kinds, outcomes
        assert any("training graph" in str(o[1]) or "training step" in str(o[1]) for o in outcomes), outcomes
        sched.reset()
        loss = opt.step()
        assert np.isfinite(loss)
        print("DONE", loss)
    """, timeout=300)
    assert "DONE" in r.stdout


def test_public_training_under_memory_limits():
    """fit, Trainer.step and predict over a range of limits (set after the model
    is made): a result or AllocationError, never a crash; the model trains once
    the limit is lifted."""
    r = run_py(LIMITS, """
        rng = np.random.default_rng(0)
        x = rng.random((256, 256)).astype(np.float32)
        y = rng.random((256, 4)).astype(np.float32)
        results = []
        for m in MARGINS:
            model = pg.Sequential([pg.layers.Dense(512, activation="relu"), pg.layers.Dense(512),
                                   pg.layers.Dense(4)], input_shape=256).compile(loss="mse")
            def work():
                model.fit(x, y, epochs=1, batch_size=256, verbose=0)
                tr = pg.Trainer(model, batch_size=256)
                tr.step(x, y)
                tr.free()
                return model.predict(x[:4]).shape
            results.append(with_limit(m, work))
            h = model.fit(x, y, epochs=1, batch_size=256, verbose=0)
            assert np.isfinite(h.history["loss"][0])
            model.free()
        print("RESULTS", results)
        kinds = [o[0] for o in results]
        assert "AllocationError" in kinds and "ok" in kinds, results
        print("DONE")
    """, timeout=600)
    assert "DONE" in r.stdout


def test_thread_pool_that_cannot_start_raises():
    """Thread stacks are address space: a pool whose threads cannot start raises."""
    r = run_py(LIMITS, """
        pg.set_n_threads(8)
        be = core.Backend("cpu")
        ctx = core.Context(n_tensors=16, graph_size=64)
        a = ctx.new_tensor((64, 64))
        buf = core.BackendBuffer(ctx, be)
        a.set(np.ones((64, 64)))
        c2 = core.Context(n_tensors=16, graph_size=64)
        g = core.Graph(c2, 64).build_forward(ops.scale(a, 2.0, ctx=c2))
        s = core.Scheduler([be])
        outcome = with_limit(2**20, lambda: s.compute(g))
        print("OUTCOME", outcome)
        assert outcome[0] == "AllocationError" and "threads" in outcome[1], outcome
        s.compute(g)
        print("DONE")
    """)
    assert "DONE" in r.stdout


def test_cnn_and_recurrent_training_under_memory_limits():
    """Other graphs (im2col's work buffer, an unrolled LSTM): never a crash."""
    r = run_py(LIMITS, """
        rng = np.random.default_rng(0)
        L = pg.layers
        cases = [
            (lambda: [L.Conv2D(16, 3, activation="relu"), L.MaxPooling2D(2), L.Flatten(), L.Dense(4)],
             rng.random((64, 28, 28, 1)).astype(np.float32)),
            (lambda: [L.LSTM(32), L.Dense(4)], rng.random((32, 50, 8)).astype(np.float32)),
        ]
        for layers, x in cases:
            y = rng.random((len(x), 4)).astype(np.float32)
            outcomes = []
            for m in MARGINS[::2]:
                model = pg.Sequential(layers(),
                                      input_shape=x.shape[1:]).compile(loss="mse")
                outcomes.append(with_limit(m, lambda: model.fit(x, y, epochs=1, batch_size=len(x), verbose=0)
                                           and None))
                model.free()
            print("OUTCOMES", [o[0] for o in outcomes])
        print("DONE")
    """, timeout=600)
    assert "DONE" in r.stdout


def test_gradient_tape_steps_from_the_pool_under_memory_limits():
    """A GradientTape step's memory comes from pyggml's pool (a block per buffer of 1 MiB or
    more): over a range of limits a result or AllocationError, never a crash; a step with the
    pool's blocks kept from the last step needs no more memory; pool_release gives them back;
    once the limit is lifted the same model trains."""
    r = run_py(LIMITS, """
        # one thread: no worker threads at all. A count the adaptive policy tries first under a busy
        # machine would start a new pool, and a fixed pool of two may need a fresh thread stack
        # (address space) when the last step's threads have not yet given theirs back on a loaded
        # machine (the full suite failed so now and then): the 2 MiB margin below holds neither
        pg.set_n_threads(1, adaptive=False)
        rng = np.random.default_rng(0)
        x = rng.random((512, 512)).astype(np.float32)
        y = rng.random((512, 4)).astype(np.float32)
        model = pg.Sequential([pg.layers.Dense(512, activation="relu"), pg.layers.Dense(4)], input_shape=512)
        opt = pg.optimizers.SGD(0.01)
        def step():
            with pg.GradientTape() as tape:
                loss = pg.ops.mean(pg.ops.square(model(x, training=True) - y))
            g = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(g, model.trainable_variables))
            return float(loss)
        outcomes = []
        for m in MARGINS:
            core.pool_release()
            outcomes.append(with_limit(m, step))
        print("OUTCOMES", [o[0] for o in outcomes])
        kinds = [o[0] for o in outcomes]
        assert "ok" in kinds and any(k != "ok" for k in kinds), outcomes
        step()
        held = core.pool_stats()["held"]
        assert held > 2**20
        assert held > 4 * 2**20
        # the kept blocks serve the next step under a limit that leaves less than they hold
        # (2 MiB: the host's own arrays)
        assert with_limit(2 * 2**20, step)[0] == "ok"
        assert core.pool_release() == held and core.pool_stats()["held"] == 0
        assert np.isfinite(step())
        print("DONE")
    """, timeout=600)
    assert "DONE" in r.stdout, r.stdout + r.stderr
