"""The thread policy (issue 19): a model's executors time their runs and use
the thread count that is fastest now; results never depend on the count;
the waits themselves (patch 0023) are in reliability/test_thread_waits.py."""

import numpy as np
import pytest

import pyggml as pg
from pyggml.models import thread_policy
from pyggml.models.thread_policy import ThreadChooser

L = pg.layers


@pytest.fixture(autouse=True)
def _threads_back():
    yield
    pg.set_n_threads(None)


class FakeClock:
    """time.perf_counter for the chooser: each run takes cost[n] seconds."""

    def __init__(self, cost):
        self.t = 0.0
        self.cost = cost

    def perf_counter(self):
        return self.t


def drive(ch, clock, runs):
    used = []
    for _ in range(runs):
        n = ch.pick()
        used.append(n)
        clock.t += clock.cost[n]
        ch.done()
    return used


class FakeLoad:
    """The machine the chooser sees: its CPUs and the other processes' runnable threads."""

    def __init__(self, cpus=8, others=0):
        self.cpus, self.others = cpus, others


@pytest.fixture
def load(monkeypatch):
    ld = FakeLoad()
    monkeypatch.setattr(thread_policy, "cpus", lambda: ld.cpus)
    monkeypatch.setattr(thread_policy, "others_running", lambda: ld.others)
    return ld


@pytest.fixture
def clock(monkeypatch, load):
    c = FakeClock({1: 1.0, 2: 1.0, 4: 1.0, 8: 1.0})
    monkeypatch.setattr(thread_policy, "time", c)
    return c


def test_candidates():
    assert thread_policy.candidates(1) == [1]
    assert thread_policy.candidates(2) == [1, 2]
    assert thread_policy.candidates(8) == [1, 4, 8]


def test_chooser_moves_to_one_thread_when_one_is_faster(clock):
    pg.set_n_threads(2)
    clock.cost = {1: 1e-3, 2: 5e-3}          # a busy machine: 2 threads 5x slower
    ch = ThreadChooser(work=10**9)
    used = drive(ch, clock, 200)
    assert used[0] == 2                      # starts on all it may use
    assert ch.choice == 1
    assert used[-50:].count(1) >= 45         # then stays there but for the trials


def test_chooser_keeps_all_threads_when_they_are_faster(clock):
    pg.set_n_threads(8)
    clock.cost = {1: 8e-3, 4: 2.5e-3, 8: 1.5e-3}
    ch = ThreadChooser(work=10**9)
    used = drive(ch, clock, 300)
    assert ch.choice == 8
    # the trials thin out while the answer holds: few runs spent on the slow counts
    assert used[100:].count(1) <= 6


def test_chooser_follows_a_change_of_load(clock):
    pg.set_n_threads(2)
    clock.cost = {1: 2e-3, 2: 1e-3}
    ch = ThreadChooser(work=10**9)
    drive(ch, clock, 100)
    assert ch.choice == 2
    clock.cost = {1: 2e-3, 2: 20e-3}         # another process starts
    drive(ch, clock, 3000)
    assert ch.choice == 1
    clock.cost = {1: 2e-3, 2: 1e-3}          # and stops
    drive(ch, clock, 6000)
    assert ch.choice == 2


def test_a_noise_level_difference_does_not_switch(clock):
    pg.set_n_threads(2)
    clock.cost = {1: 1.0e-3, 2: 1.02e-3}     # within the 5% margin
    ch = ThreadChooser(work=10**9)
    drive(ch, clock, 500)
    assert ch.choice == 2


def test_fixed_count_and_small_work(clock):
    clock.cost = {1: 1e-3, 2: 9e-3}
    pg.set_n_threads(2, adaptive=False)
    assert set(drive(ThreadChooser(work=10**9), clock, 100)) == {2}
    # ... but a fixed count holds for tiny graphs too
    assert set(drive(ThreadChooser(work=10), clock, 50)) == {2}
    pg.set_n_threads(None)
    # tiny graphs run on one thread unless the user fixed a count
    assert set(drive(ThreadChooser(work=10), clock, 50)) == {1}
    pg.set_n_threads(2)                       # a ceiling (adaptive): still one
    assert set(drive(ThreadChooser(work=10), clock, 50)) == {1}
    pg.set_n_threads(None)


def test_failed_runs_end_a_trial(clock):
    pg.set_n_threads(2)
    clock.cost = {1: 1e-3, 2: 5e-3}
    ch = ThreadChooser(work=10**9)
    for _ in range(200):
        ch.pick()
        clock.t += 1e-3
        ch.abandon()                         # every run fails
    assert ch.trial is None or ch.trial       # never stuck with an empty trial
    drive(ch, clock, 200)
    assert ch.choice == 1


def test_a_busy_process_on_the_other_cpu_means_one_thread(clock, load):
    # two CPUs, another process runnable on one: one thread, without trials on two (whose
    # runs are sometimes fast while the other waits, and a time slice slow otherwise)
    pg.set_n_threads(2)
    load.cpus, load.others = 2, 1
    clock.cost = {1: 1e-3, 2: 0.5e-3}
    ch = ThreadChooser(work=10**9)
    used = drive(ch, clock, 300)
    assert ch.choice == 1
    assert 2 not in used[thread_policy._WARMUP:]
    # the other process stops: trials again, and the faster count
    load.others = 0
    drive(ch, clock, 5000)
    assert ch.choice == 2


def test_load_leaves_out_the_counts_without_free_cpus(clock, load):
    pg.set_n_threads(8)
    load.cpus, load.others = 8, 3
    clock.cost = {1: 8e-3, 4: 2.5e-3, 8: 1.5e-3}
    ch = ThreadChooser(work=10**9)
    used = drive(ch, clock, 300)
    assert ch.choice == 4
    assert 8 not in used[thread_policy._WARMUP:]


def test_others_running_sees_a_busy_process():
    import subprocess
    import sys
    import time

    assert thread_policy.others_running() >= 0
    assert thread_policy.cpus() >= 1
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        seen = []
        for _ in range(20):
            seen.append(thread_policy.others_running())
            time.sleep(0.01)
        assert max(seen) >= 1, seen
    finally:
        busy.kill()
        busy.wait()


def test_set_n_threads_checks_adaptive():
    with pytest.raises(TypeError, match="adaptive"):
        pg.set_n_threads(2, adaptive="yes")
    with pytest.raises(ValueError):
        pg.set_n_threads(-1)


def models():
    yield "mlp", lambda: pg.Sequential([L.Dense(64, activation="relu"), L.Dense(4, activation="softmax")],
                                       input_shape=32), (32,), 4
    yield "cnn", lambda: pg.Sequential([L.Conv2D(8, 3, padding="same", activation="relu"), L.MaxPooling2D(),
                                        L.BatchNormalization(), L.Conv2D(8, 3, activation="relu"), L.Flatten(),
                                        L.Dense(4, activation="softmax")], input_shape=(12, 12, 1)), (12, 12, 1), 4
    # channels enough for the blocked products (forward, kernel and strided input gradients)
    yield "cnn_wide", lambda: pg.Sequential([L.Conv2D(32, 3, padding="same", activation="relu"),
                                             L.Conv2D(48, 5, strides=2, padding="same", activation="relu"),
                                             L.Flatten(), L.Dense(4, activation="softmax")],
                                            input_shape=(12, 12, 3)), (12, 12, 3), 4
    # depthwise (patch 0043): 40 channels (a vector block and a remainder), shared out by channel
    # for the kernel gradient, by rows otherwise
    yield "cnn_depthwise", lambda: pg.Sequential([L.Conv2D(40, 1), L.DepthwiseConv2D(5, padding="same",
                                                                                      activation="relu"),
                                                  L.DepthwiseConv2D(3, strides=2), L.Flatten(),
                                                  L.Dense(4, activation="softmax")],
                                                 input_shape=(12, 12, 3)), (12, 12, 3), 4
    yield "lstm", lambda: pg.Sequential([L.Bidirectional(L.LSTM(8)), L.Dense(4, activation="softmax")],
                                        input_shape=(10, 6)), (10, 6), 4

    def tfm():
        inp = pg.Input((8, 16))
        h = L.LayerNormalization()(L.MultiHeadAttention(2, 8)(inp, inp) + inp)
        return pg.Model(inp, L.Dense(4, activation="softmax")(L.GlobalAveragePooling1D()(h)))
    yield "transformer", tfm, (8, 16), 4


@pytest.mark.parametrize("name,make,shape,k", list(models()), ids=[m[0] for m in models()])
def test_results_do_not_depend_on_the_thread_count(name, make, shape, k):
    # what lets the chooser switch counts mid-training: every count gives the
    # same bits (ggml shares out the outputs of an operation, never a sum)
    rng = np.random.default_rng(0)
    x = rng.random((96,) + shape, dtype=np.float32)
    y = np.eye(k, dtype=np.float32)[rng.integers(0, k, 96)]
    got = []
    for n in (1, 2, 3, 4):
        pg.set_n_threads(n, adaptive=False)
        pg.set_seed(0)
        m = make().compile(optimizer="adam", loss="categorical_crossentropy", seed=0)
        m.fit(x, y, epochs=2, batch_size=32, verbose=0, shuffle=False)
        got.append((m.get_weights(), m.predict(x, verbose=0)))
    w1, p1 = got[0]
    for wn, pn in got[1:]:
        assert all(np.array_equal(w1[key], wn[key]) for key in w1)
        assert np.array_equal(p1, pn)


def test_adaptive_training_matches_fixed_training():
    rng = np.random.default_rng(1)
    x = rng.random((256, 32), dtype=np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 256)]

    def train(**kw):
        pg.set_n_threads(2, **kw)
        pg.set_seed(0)
        m = pg.Sequential([L.Dense(256, activation="relu"), L.Dense(4, activation="softmax")], input_shape=32)
        m.compile(optimizer="adam", loss="categorical_crossentropy", seed=0)
        m.fit(x, y, epochs=6, batch_size=8, verbose=0, shuffle=False)   # 192 steps: trials included
        return m.get_weights()
    a, b = train(adaptive=True), train(adaptive=False)
    assert all(np.array_equal(a[key], b[key]) for key in a)
