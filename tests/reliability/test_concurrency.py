"""Threads, Ctrl-C, fork and leaks around models and trainers."""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pyggml as pg


def _model(seed=0, width=32):
    # compile(seed=) rather than set_seed: the library's generator is shared by threads
    return pg.Sequential([pg.layers.Dense(width, activation="relu"), pg.layers.Dense(3)],
                         input_shape=8).compile(loss="mse", seed=seed)


def test_threads_predicting_with_one_model_agree():
    m = _model()
    x = np.random.default_rng(0).random((257, 8)).astype(np.float32)
    ref = m.predict(x, batch_size=16)
    results, errors = [None] * 6, []

    def work(i):
        try:
            for _ in range(20):
                p = m.predict(x, batch_size=16)
            results[i] = p
        except Exception as e:          # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for r in results:
        np.testing.assert_array_equal(r, ref)
    m.free()


def test_threads_training_separate_models_match_serial_runs():
    pg.set_n_threads(1)
    rng = np.random.default_rng(1)
    x = rng.random((64, 8)).astype(np.float32)
    y = rng.random((64, 3)).astype(np.float32)

    def train(seed):
        m = _model(seed)
        tr = pg.Trainer(m, batch_size=16)
        for i in range(40):
            tr.step(x[(i % 4) * 16:(i % 4 + 1) * 16], y[(i % 4) * 16:(i % 4 + 1) * 16])
        w = m.get_weights()
        tr.free()
        m.free()
        return w

    serial = [train(s) for s in range(3)]
    out = [None] * 3
    ts = [threading.Thread(target=lambda i=i: out.__setitem__(i, train(i))) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for a, b in zip(serial, out):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    pg.set_n_threads(None)


INTERRUPT = textwrap.dedent("""
    import os, signal, threading, time, numpy as np
    import pyggml as pg
    pg.set_seed(0)
    m = pg.Sequential([pg.layers.Dense(256, activation="relu"), pg.layers.Dense(256, activation="relu"),
                       pg.layers.Dense(4)], input_shape=64).compile(loss="mse")
    x = np.random.rand(20000, 64).astype(np.float32); y = np.random.rand(20000, 4).astype(np.float32)
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.time()
    try:
        m.fit(x, y, epochs=100, batch_size=32, verbose=0)
        print("NOT INTERRUPTED")
    except KeyboardInterrupt:
        print("INTERRUPTED after %.2f s" % (time.time() - t0))
    p1 = m.predict(x[:10]); p2 = m.predict(x[:10])
    assert np.array_equal(p1, p2) and np.all(np.isfinite(p1))
    h = m.fit(x[:64], y[:64], epochs=1, batch_size=32, verbose=0)
    assert np.isfinite(h.history["loss"][0])
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        for _ in range(1000):
            m.predict(x, batch_size=20000)
        print("PREDICT NOT INTERRUPTED")
    except KeyboardInterrupt:
        print("PREDICT INTERRUPTED")
    assert np.array_equal(m.predict(x[:10]), m.predict(x[:10]))
    print("USABLE")
""")


def test_ctrl_c_during_fit_and_predict_stops_promptly():
    r = subprocess.run([sys.executable, "-c", INTERRUPT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "INTERRUPTED after" in r.stdout
    secs = float(r.stdout.split("INTERRUPTED after")[1].split()[0])
    assert secs < 30
    assert "PREDICT INTERRUPTED" in r.stdout and "USABLE" in r.stdout


def test_fork_after_creating_models_works_in_the_child():
    import multiprocessing as mp
    m = _model()
    x = np.random.default_rng(0).random((10, 8)).astype(np.float32)
    ref = m.predict(x)
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child():
        try:
            p = m.predict(x)
            tr = pg.Trainer(m, batch_size=10)
            loss = tr.step(x, np.zeros((10, 3), dtype=np.float32))
            q.put(("ok", p, loss))
        except Exception as e:       # pragma: no cover
            q.put(("error", repr(e), None))
    proc = ctx.Process(target=child)
    proc.start()
    status, p, loss = q.get(timeout=120)
    proc.join(60)
    assert proc.exitcode == 0 and status == "ok", p
    np.testing.assert_array_equal(p, ref)
    assert np.isfinite(loss)
    np.testing.assert_array_equal(m.predict(x), ref)      # the parent's model is intact
    m.free()


LEAK = textwrap.dedent("""
    import gc, os, sys, tempfile, numpy as np
    import pyggml as pg
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    x = np.random.rand(16, 4).astype(np.float32); y = np.random.rand(16, 2).astype(np.float32)
    d = tempfile.mkdtemp(); path = os.path.join(d, "m.gguf")
    def cycle():
        m = pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2)], input_shape=4)
        m.compile(loss="mse")
        tr = pg.Trainer(m, batch_size=16)
        for _ in range(3):
            tr.step(x, y)
        s = tr.snapshot()
        s.predict(x)
        m.save(path)
        l = pg.load_model(path)
        l.predict(x)
        for o in (s, tr, l, m):
            o.free()
    import ctypes, statistics
    libc = ctypes.CDLL("libc.so.6")
    def settled():
        # hand free heap pages back first, so that the figure is live memory, not fragmentation
        gc.collect()
        libc.malloc_trim(0)
        return rss()
    n = int(sys.argv[1])
    for _ in range(50):
        cycle()
    samples = []
    for i in range(n):
        cycle()
        if i % 10 == 9:
            samples.append(settled())
    k = max(1, len(samples) // 10)
    before, after = statistics.median(samples[:k]), statistics.median(samples[-k:])
    print("RSS", before, after, (after - before) / 2**20)
""")


def test_a_thousand_cycles_keep_memory_flat():
    n = int(os.environ.get("PYGGML_LEAK_CYCLES", "1000"))
    r = subprocess.run([sys.executable, "-c", LEAK, str(n)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    before, after, grown = r.stdout.split("RSS")[1].split()
    print(r.stdout)
    assert float(grown) < 20.0, f"resident memory grew by {float(grown):.1f} MiB over {n} cycles"
