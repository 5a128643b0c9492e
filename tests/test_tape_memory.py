"""A GradientTape's memory goes back when its step is over, without waiting for Python's
garbage collector (which counts objects, not bytes): the tape's context and its builder held
each other, and so did the packed gradients, so a large tape (a GAN critic's step: hundreds
of megabytes) left its memory behind for several steps, and each step took fresh pages from
the system.  The memory comes from pyggml's pool, and the next step takes it again."""

import gc

import numpy as np
import pytest

import pyggml as pg
from pyggml import core, layers, ops


@pytest.fixture
def no_gc():
    gc.collect()
    core.pool_release()
    gc.disable()
    yield
    gc.enable()
    gc.collect()
    core.pool_release()


def _critic():
    pg.set_seed(0)
    inp = pg.Input((16, 16, 3))
    x = layers.LeakyReLU(0.2)(layers.Conv2D(32, 3, strides=2, padding="same")(inp))
    x = layers.LeakyReLU(0.2)(layers.Conv2D(64, 3, strides=2, padding="same")(x))
    return pg.Model(inp, layers.Dense(1)(layers.Flatten()(x)))


RNG = np.random.default_rng(3)
REAL = RNG.normal(size=(64, 16, 16, 3)).astype(np.float32)
FAKE = RNG.normal(size=(64, 16, 16, 3)).astype(np.float32)


def _penalised_step(critic, opt):
    # keras-io's WGAN-GP critic step: a tape inside the step's tape
    with pg.GradientTape() as tape:
        cost = ops.mean(critic(FAKE, training=True)) - ops.mean(critic(REAL, training=True))
        mix = REAL + 0.3 * (FAKE - REAL)
        with pg.GradientTape() as gp_tape:
            gp_tape.watch(mix)
            pred = critic(mix, training=True)
        g = gp_tape.gradient(pred, [mix])[0]
        loss = cost + 10.0 * ops.mean((ops.sqrt(ops.sum(ops.square(g), axis=[1, 2, 3])) - 1.0) ** 2)
    grads = tape.gradient(loss, critic.trainable_variables)
    opt.apply_gradients(zip(grads, critic.trainable_variables))
    return float(loss)


def test_a_finished_step_s_tape_memory_returns_without_the_garbage_collector(no_gc):
    critic, opt = _critic(), pg.optimizers.Adam(1e-3)
    losses = []
    for _ in range(4):
        losses.append(_penalised_step(critic, opt))
        s = core.pool_stats()
        # nothing of the step's tapes is left in use, and what they used is kept for the next
        assert s["in_use"] == 0, s
        assert s["held"] > 1 << 20
    held = core.pool_stats()["held"]
    _penalised_step(critic, opt)
    assert core.pool_stats()["held"] == held      # the same blocks again: none taken from the system
    assert all(np.isfinite(losses))


def test_tensors_kept_from_a_finished_tape_keep_their_values_and_compute_on_demand(no_gc):
    x = RNG.normal(size=(300, 1024)).astype(np.float32)     # over a MiB: a pooled buffer
    w = pg.Variable(RNG.normal(size=(1024, 8)).astype(np.float32) * 0.1)

    def step():
        with pg.GradientTape() as tape:
            y = ops.matmul(x, w)
            loss = ops.mean(ops.square(y))
            side = ops.sum(ops.abs(y))              # recorded, never computed in the step
        grads = tape.gradient(loss, [w])
        return loss, side, grads

    loss, side, grads = step()
    assert core.pool_stats()["in_use"] > 0           # the kept tensors hold their tape's memory
    want = x.astype(np.float64) @ w.numpy().astype(np.float64)
    np.testing.assert_allclose(float(loss), np.mean(want ** 2), rtol=1e-5)
    np.testing.assert_allclose(float(side), np.sum(np.abs(want)), rtol=1e-5)     # computed now
    np.testing.assert_allclose(grads[0], 2 * x.T.astype(np.float64) @ want / want.size, rtol=1e-4, atol=1e-7)
    del loss, side
    assert core.pool_stats()["in_use"] == 0          # the last tensor took the memory with it


def test_a_persistent_tape_keeps_its_memory_until_it_is_gone(no_gc):
    x = RNG.normal(size=(300, 1024)).astype(np.float32)
    w = pg.Variable(np.ones((1024, 2), np.float32))
    with pg.GradientTape(persistent=True) as tape:
        loss = ops.mean(ops.matmul(x, w))
    g1 = tape.gradient(loss, [w])[0]
    g2 = tape.gradient(loss, [w])[0]
    np.testing.assert_array_equal(g1, g2)
    del loss
    assert core.pool_stats()["in_use"] > 0           # the tape records (watch) and computes again
    del tape
    assert core.pool_stats()["in_use"] == 0
