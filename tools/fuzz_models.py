#!/usr/bin/env python3
"""Property-based fuzzing of call sequences on models, trainers and snapshots.

A hypothesis state machine builds models, compiles, fits, predicts, steps
trainers, takes and updates snapshots, saves and loads, frees things in any
order, and feeds wrong inputs now and then.  Every call must end in a result or
a Python exception; the process must never die.  Run it in a subprocess (the
test does) so that a crash is caught:

    python tools/fuzz_models.py --examples 2000      # the long run
    python tools/fuzz_models.py --examples 60 --seed 0   # what CI runs
"""

import argparse
import os
import sys
import tempfile

import numpy as np
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

import pyggml as pg

OK_ERRORS = (pg.GGMLError, ValueError, TypeError, KeyError, RuntimeError, OSError, MemoryError)
TMP = tempfile.mkdtemp(prefix="pyggml-fuzz-")

widths = st.integers(1, 6)
rows = st.integers(0, 20)
junk = st.sampled_from([None, "x", np.zeros((2, 2, 2)), np.array([[np.nan] * 3]), np.zeros((0, 3)),
                        np.ones((3, 3), dtype=complex), [[1, 2, 3]], np.asfortranarray(np.ones((4, 3)))])


def attempt(fn, *a, **k):
    try:
        return fn(*a, **k)
    except OK_ERRORS:
        return None


class Calls(RuleBasedStateMachine):
    models = Bundle("models")
    trainers = Bundle("trainers")
    snapshots = Bundle("snapshots")

    @initialize()
    def start(self):
        self.rng = np.random.default_rng(0)

    @rule(target=models, hidden=widths, out=widths, act=st.sampled_from([None, "relu", "tanh", "gelu", "softmax"]),
          loss=st.sampled_from(["mse", "mae", "huber", "categorical_crossentropy"]),
          opt=st.sampled_from(["adam", "adamw", "sgd"]))
    def build(self, hidden, out, act, loss, opt):
        m = pg.Sequential([pg.layers.Dense(hidden, activation="relu"), pg.layers.Dense(out, activation=act)],
                          input_shape=3)
        return attempt(m.compile, optimizer=opt, loss=loss) or m

    @rule(m=models, n=rows, bs=st.integers(-1, 9))
    def predict(self, m, n, bs):
        p = attempt(m.predict, self.rng.random((n, 3)), batch_size=bs)
        if p is not None:
            assert p.shape[0] == n and p.dtype == np.float32

    @rule(m=models, n=st.integers(1, 20), bs=st.integers(1, 9), epochs=st.integers(0, 2))
    def fit(self, m, n, bs, epochs):
        out = m._outputs[0].shape[0] if hasattr(m, "_outputs") else 2
        attempt(m.fit, self.rng.random((n, 3)), self.rng.random((n, out)), epochs=epochs, batch_size=bs, verbose=0)

    @rule(m=models, x=junk)
    def wrong_input(self, m, x):
        attempt(m.predict, x)

    @rule(target=trainers, m=models, bs=st.integers(1, 8), mask=st.sampled_from([None, 1, 2, 5]))
    def trainer(self, m, bs, mask):
        return attempt(pg.Trainer, m, bs, loss_mask=mask) or m

    @rule(t=trainers, weights=st.booleans())
    def step(self, t, weights):
        if not isinstance(t, pg.Trainer):
            return
        n = t.batch_size
        out = t._n_out if not t._freed else 2
        w = self.rng.random((n,)) if weights else None
        attempt(t.step, self.rng.random((n, 3)), self.rng.random((n, out)), w)
        attempt(t.eval, self.rng.random((n, 3)), self.rng.random((n, out)))

    @rule(target=snapshots, t=trainers)
    def snapshot(self, t):
        if isinstance(t, pg.Trainer):
            return attempt(t.snapshot) or t
        return t

    @rule(t=trainers, s=snapshots, tau=st.one_of(st.floats(-0.5, 1.5), st.just(float("nan"))))
    def update(self, t, s, tau):
        if isinstance(t, pg.Trainer):
            attempt(t.update_target, s, tau)

    @rule(s=snapshots)
    def use_snapshot(self, s):
        if isinstance(s, pg.Snapshot):
            attempt(s.predict, self.rng.random((3, 3)))
            attempt(s.get_weights)

    @rule(m=models)
    def save_load(self, m):
        path = os.path.join(TMP, "m.gguf")
        if attempt(m.save, path) is None and os.path.exists(path):
            loaded = attempt(pg.load_model, path)
            if loaded is not None:
                loaded.free()

    @rule(obj=st.one_of(models, trainers, snapshots))
    def free(self, obj):
        obj.free()

    @invariant()
    def alive(self):
        assert True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--seed", type=int, default=None, help="fixed seed (derandomized run)")
    a = ap.parse_args()
    pg.set_n_threads(1)
    Calls.TestCase.settings = settings(max_examples=a.examples, stateful_step_count=a.steps, deadline=None,
                                       derandomize=a.seed is not None, database=None,
                                       suppress_health_check=list(HealthCheck))
    import unittest
    suite = unittest.TestLoader().loadTestsFromTestCase(Calls.TestCase)
    res = unittest.TextTestRunner(verbosity=0).run(suite)
    print(f"fuzz: {a.examples} examples of up to {a.steps} calls: {'ok' if res.wasSuccessful() else 'FAILED'}")
    sys.exit(0 if res.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
