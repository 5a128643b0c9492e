"""The seed's test-trainer.R (ggmlR's trainer tests), every test_that block,
in Python.  Each scenario also runs on a model loaded from GGUF and on a model
that went through fit first (the ``variant`` parameter)."""

import gc

import numpy as np
import pytest

import pyggml as pg

VARIANTS = ["plain", "loaded", "after_fit"]


@pytest.fixture(params=VARIANTS)
def variant(request):
    return request.param


def make_data(n=64, nfeat=4, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.random((n, nfeat))
    y = np.zeros((n, 2))
    for i in range(n):
        y[i, 0 if x[i].sum() > nfeat / 2 else 1] = 1
    return x, y


def make_regression(n=64, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4))
    y = np.stack([x.sum(1), x[:, 0] - x[:, 1], x[:, 2]], axis=1)
    return x, y


def _variant(m, variant, tmp_path, x, y):
    if variant == "loaded":
        path = tmp_path / f"m{id(m)}.gguf"
        m.save(path)
        m.free()
        return pg.load_model(path)
    if variant == "after_fit":
        m.fit(x, y, epochs=1, batch_size=16, verbose=0, shuffle=False)
    return m


def build_model(variant="plain", tmp_path=None, nfeat=4, seed=1, optimizer="adam"):
    pg.set_seed(seed)                                # weights are drawn at compile time
    m = pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2, activation="softmax")])
    m.input_shape = nfeat
    m.compile(optimizer=optimizer, loss="categorical_crossentropy")
    x, y = make_data(nfeat=nfeat)
    return _variant(m, variant, tmp_path, x, y)


def build_functional(variant="plain", tmp_path=None, seed=1, loss="mse", n_out=3):
    pg.set_seed(seed)
    inp = pg.Input(shape=4)
    h = pg.layers.Dense(8, activation="relu")(inp)
    out = pg.layers.Dense(n_out)(h)
    m = pg.Model(inputs=inp, outputs=out).compile(optimizer="adam", loss=loss)
    x, y = make_regression()
    y = y[:, :n_out]
    if loss == "categorical_crossentropy":
        y = np.eye(n_out)[np.argmax(y, axis=1)]
    return _variant(m, variant, tmp_path, x, y)


def batch(i):
    return slice(i * 16, (i + 1) * 16)


def test_stepping_by_hand_trains_the_model(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    losses = []
    # four passes over the same four batches: enough for the loss to move
    for _ in range(4):
        for i in range(4):
            losses.append(tr.step(x[batch(i)], y[batch(i)]))
    assert len(losses) == 16
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    assert tr.n_steps == 16
    tr.free()
    m.free()


def test_the_context_survives_across_steps(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    # the same batch twice: a live context has already moved the weights
    l1 = tr.step(x[:16], y[:16])
    l2 = tr.step(x[:16], y[:16])
    assert not np.isclose(l1, l2, rtol=1.5e-8, atol=0)
    tr.free()
    m.free()


def test_eval_does_not_train(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    e1 = tr.eval(x[:16], y[:16])
    e2 = tr.eval(x[:16], y[:16])
    assert e1 == e2                    # weights untouched, so the loss repeats
    assert tr.n_steps == 0
    tr.free()
    m.free()


def test_model_returns_the_trained_weights(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    for i in range(4):
        tr.step(x[batch(i)], y[batch(i)])
    trained = tr.model()
    preds = trained.predict(x[:16], batch_size=16)
    assert preds.shape == (16, 2)
    assert np.all(np.isfinite(preds))
    tr.free()
    m.free()


def test_a_wrong_batch_size_is_refused():
    pg.set_n_threads(2)
    x, y = make_data()
    m = build_model()
    tr = pg.Trainer(m, batch_size=16)
    with pytest.raises(ValueError, match="exactly 16"):
        tr.step(x[:5], y[:5])
    tr.free()
    m.free()


def test_free_is_idempotent_and_methods_refuse_afterwards(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    tr.step(x[:16], y[:16])
    tr.free()
    tr.free()                          # a no-op, not a double free
    with pytest.raises(pg.GGMLError, match="has been freed"):
        tr.step(x[:16], y[:16])
    with pytest.raises(pg.GGMLError, match="has been freed"):
        tr.model()
    m.free()


def test_set_lr_changes_the_step_size(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_data()

    def run_with_lr(lr):
        m = build_model(variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16)
        tr.set_lr(lr)
        assert tr.lr == pytest.approx(lr)
        for i in range(4):
            tr.step(x[batch(i)], y[batch(i)])
        out = tr.step(x[:16], y[:16])
        tr.free()
        m.free()
        return out

    # same data and seed, so any difference is the learning rate
    assert not np.isclose(run_with_lr(1e-4), run_with_lr(1e-1), rtol=1.5e-8, atol=0)


def test_gradient_accumulation_delays_the_weight_update(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    # nbatch_logical = 2 * batch_size: the optimizer steps every second call
    tr = pg.Trainer(m, batch_size=16, nbatch_logical=32)
    l1 = tr.step(x[:16], y[:16])
    l2 = tr.step(x[:16], y[:16])
    l3 = tr.step(x[:16], y[:16])
    assert l1 == l2                                   # no update between these two
    assert not np.isclose(l2, l3, rtol=1.5e-8, atol=0)   # the update landed before the third
    tr.free()
    m.free()


def test_non_models_and_uncompiled_models_are_refused():
    with pytest.raises(TypeError, match="Sequential"):
        pg.Trainer([], batch_size=8)
    m = pg.Sequential([pg.layers.Dense(4, activation="relu")])
    m.input_shape = 4
    with pytest.raises(ValueError, match="compiled"):
        pg.Trainer(m, batch_size=8)


def test_adam_moments_carry_over_between_steps(variant, tmp_path):
    # Rebuilding a trainer from model() after every step resets the moments and
    # the bias-correction counter: after one step both runs agree, after three not.
    pg.set_n_threads(1)
    x, y = make_data()
    x, y = x[:16], y[:16]

    def live_after(k):
        m = build_model(variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16)
        for _ in range(k):
            tr.step(x, y)
        out = tr.eval(x, y)
        tr.free()
        m.free()
        return out

    def reset_after(k):
        m = build_model(variant, tmp_path)
        cur = m
        for _ in range(k):
            tr = pg.Trainer(cur, batch_size=16)
            tr.step(x, y)
            cur = tr.model()
            tr.free()
        tr = pg.Trainer(cur, batch_size=16)
        out = tr.eval(x, y)
        tr.free()
        m.free()
        return out

    assert live_after(1) == reset_after(1)
    assert not np.isclose(live_after(3), reset_after(3), rtol=1.5e-8, atol=0)


# ---- functional models and loss masks ------------------------------------------

def test_a_functional_model_trains_through_the_trainer(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    losses = [tr.step(x[batch(i)], y[batch(i)]) for _ in range(4) for i in range(4)]
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    preds = tr.model().predict(x[:16], batch_size=16)
    assert preds.shape == (16, 3)
    assert np.all(np.isfinite(preds))
    tr.free()
    m.free()


def test_a_masked_output_does_not_train_whatever_its_target(variant, tmp_path):
    # targets that differ by 100 on every masked cell must give identical weights
    pg.set_n_threads(1)
    x, y = make_regression()
    mask = np.random.default_rng(2).binomial(1, 0.4, size=y.shape).astype(np.float64)
    y_far = y + 100 * (1 - mask)

    def final_preds(yy, loss_mask, w):
        m = build_functional(variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16, loss_mask=loss_mask)
        for i in range(4):
            tr.step(x[batch(i)], yy[batch(i)], None if w is None else w[batch(i)])
        p = tr.model().predict(x[:16], batch_size=16)
        tr.free()
        m.free()
        return p

    np.testing.assert_array_equal(final_preds(y, 3, mask), final_preds(y_far, 3, mask))
    assert not np.allclose(final_preds(y, None, None), final_preds(y_far, None, None))


def test_per_sample_weights_are_accepted_with_loss_mask_1(variant, tmp_path):
    pg.set_n_threads(2)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16, loss_mask=1)
    l = tr.step(x[:16], y[:16], np.tile([1, 0.5], 8))
    assert np.isfinite(l)
    # a weight of zero everywhere leaves nothing to fit
    assert tr.eval(x[:16], y[:16], np.zeros(16)) == 0
    tr.free()
    m.free()


def test_loss_weights_are_refused_where_they_cannot_apply():
    pg.set_n_threads(2)
    x, y = make_regression()
    x, y = x[:16], y[:16]
    m = build_functional()
    with pytest.raises(ValueError, match="number of outputs"):
        pg.Trainer(m, batch_size=16, loss_mask=2)
    tr = pg.Trainer(m, batch_size=16)
    with pytest.raises(ValueError, match="without loss_mask"):
        tr.step(x, y, np.ones((16, 3)))
    tr.free()
    tr = pg.Trainer(m, batch_size=16, loss_mask=3)
    with pytest.raises(ValueError, match=r"\(16, 3\)"):
        tr.step(x, y, np.ones((16, 2)))
    tr.free()
    m.free()
    mc = build_functional(loss="categorical_crossentropy")
    with pytest.raises(ValueError, match="mse"):
        pg.Trainer(mc, batch_size=16, loss_mask=3)
    mc.free()


def test_fit_honours_sample_weight_on_a_functional_model():
    # ggmlR's fit swallowed sample_weight on functional models (its test expects
    # a refusal); API.md makes per-cell weights part of fit, so here a weight of
    # zero everywhere must leave the weights exactly where they were.
    x, y = make_regression()
    m = build_functional()
    before = m.get_weights()
    m.fit(x, y, batch_size=16, verbose=0, sample_weight=np.zeros((64, 3)))
    after = m.get_weights()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    m.fit(x, y, batch_size=16, verbose=0, sample_weight=np.ones((64, 3)))
    assert any(not np.array_equal(before[k], v) for k, v in m.get_weights().items())
    m.free()


def test_a_predict_between_steps_neither_crashes_nor_disturbs_training(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()

    def run(with_predict):
        m = build_functional(variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16)
        losses = []
        for k in range(8):
            i = k % 4
            losses.append(tr.step(x[batch(i)], y[batch(i)]))
            if with_predict and k % 2 == 1:
                tr.model().predict(x[:16], batch_size=16)
        p = tr.model().predict(x[:16], batch_size=16)
        tr.free()
        m.free()
        return losses, p

    plain, mixed = run(False), run(True)
    assert mixed[0] == plain[0]
    np.testing.assert_array_equal(mixed[1], plain[1])


# ---- predict ---------------------------------------------------------------------

def test_predict_agrees_with_the_handed_out_model(variant, tmp_path):
    # forty rows against a batch of sixteen: the last batch is padded and trimmed
    pg.set_n_threads(1)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    for i in range(4):
        tr.step(x[batch(i)], y[batch(i)])
    p = tr.predict(x[:40])
    assert p.shape == (40, 3)
    np.testing.assert_array_equal(p, tr.model().predict(x[:40], batch_size=16))
    tr.free()
    m.free()


def test_predict_takes_fewer_rows_than_a_batch(variant, tmp_path):
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    tr.step(x[:16], y[:16])
    p = tr.predict(x[:5])
    assert p.shape == (5, 3)
    np.testing.assert_array_equal(p, tr.model().predict(x[:5], batch_size=5))
    assert tr.predict(x[:1]).shape == (1, 3)
    tr.free()
    m.free()


def test_predict_reads_the_current_weights(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    p0 = tr.predict(x[:16])
    tr.step(x[:16], y[:16])
    p1 = tr.predict(x[:16])
    tr.step(x[:16], y[:16])
    p2 = tr.predict(x[:16])
    assert not np.allclose(p0, p1, rtol=1.5e-8, atol=0)
    assert not np.allclose(p1, p2, rtol=1.5e-8, atol=0)
    tr.free()
    m.free()


def test_predict_between_steps_leaves_training_exactly_as_it_was(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()

    def run(with_predict):
        m = build_functional(variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16, loss_mask=3)
        losses = []
        for k in range(8):
            i = k % 4
            losses.append(tr.step(x[batch(i)], y[batch(i)]))
            if with_predict:
                tr.predict(x[:40])
        p = tr.predict(x[:16])
        tr.free()
        m.free()
        return losses, p

    plain, mixed = run(False), run(True)
    assert mixed[0] == plain[0]
    np.testing.assert_array_equal(mixed[1], plain[1])


def test_predict_leaves_handed_out_models_alone(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    handed = tr.model()
    tr.predict(x[:16])
    assert handed is m
    assert tr.model() is m
    tr.free()
    with pytest.raises(pg.GGMLError, match="has been freed"):
        tr.predict(x[:16])
    m.free()


def test_predict_works_for_a_sequential_model(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    tr.step(x[:16], y[:16])
    np.testing.assert_array_equal(tr.predict(x[:40]), tr.model().predict(x[:40], batch_size=16))
    tr.free()
    m.free()


# ---- snapshot / update_target ---------------------------------------------------

def train_steps(tr, x, y, k):
    for i in range(k):
        tr.step(x[batch(i % 4)], y[batch(i % 4)])


def test_a_snapshot_starts_equal_and_stays_put(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    train_steps(tr, x, y, 2)
    target = tr.snapshot()
    p_snap = target.predict(x[:16], batch_size=16)
    np.testing.assert_array_equal(p_snap, tr.predict(x[:16]))
    train_steps(tr, x, y, 3)
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), p_snap)
    assert not np.allclose(tr.predict(x[:16]), p_snap, rtol=1.5e-8, atol=0)
    tr.free()                                 # it outlives the trainer
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), p_snap)
    target.free()
    target.free()                             # a no-op
    m.free()


def test_update_target_copies_keeps_and_averages(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    target = tr.snapshot()
    train_steps(tr, x, y, 3)
    old = target.get_weights()
    live = tr.model().get_weights()
    tr.update_target(target, tau=0)
    for k, v in target.get_weights().items():
        np.testing.assert_array_equal(v, old[k])
    tr.update_target(target, tau=0.5)
    for k, v in target.get_weights().items():
        np.testing.assert_allclose(v, 0.5 * (old[k] + live[k]), rtol=1e-6, atol=1e-7, err_msg=k)
    tr.update_target(target, tau=1)
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), tr.predict(x[:16]))
    target.free()
    tr.free()
    m.free()


def test_update_target_refuses_a_target_that_does_not_match():
    pg.set_n_threads(1)
    m1 = build_functional(n_out=3)
    m2 = build_functional(n_out=2)
    tr1 = pg.Trainer(m1, batch_size=16)
    tr2 = pg.Trainer(m2, batch_size=16)
    other = tr2.snapshot()
    with pytest.raises(ValueError, match="same weights"):
        tr1.update_target(other)
    with pytest.raises(TypeError, match="live snapshot"):
        tr1.update_target(tr1.model())
    own = tr1.snapshot()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tr1.update_target(own, tau=2)
    own.free()
    with pytest.raises(TypeError, match="live snapshot"):
        tr1.update_target(own)
    other.free()
    tr1.free()
    tr2.free()
    m1.free()
    m2.free()


def test_a_sequential_model_snapshots_and_updates_too(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_data()
    m = build_model(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    target = tr.snapshot()
    p0 = target.predict(x[:16], batch_size=16)
    tr.step(x[:16], y[:16])
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), p0)
    tr.update_target(target)
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), tr.predict(x[:16]))
    target.free()
    tr.free()
    m.free()


def test_taking_and_releasing_a_snapshot_leaves_the_weights_alone(variant, tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()
    m = build_functional(variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    train_steps(tr, x, y, 2)
    before = tr.model().get_weights()
    target = tr.snapshot()
    for k, v in tr.model().get_weights().items():
        np.testing.assert_array_equal(v, before[k])
    snap = target.get_weights()
    for k, v in snap.items():                 # equal in value
        np.testing.assert_array_equal(v, before[k])
    # distinct in memory: the snapshot's weights live in memory of their own, so a
    # training step moves the model's weights and leaves the snapshot's as they were
    assert np.isfinite(tr.step(x[:16], y[:16]))
    assert any(not np.array_equal(v, before[k]) for k, v in tr.model().get_weights().items())
    for k, v in target.get_weights().items():
        np.testing.assert_array_equal(v, before[k])
    before = tr.model().get_weights()
    target.free()
    for k, v in tr.model().get_weights().items():
        np.testing.assert_array_equal(v, before[k])
    with pytest.raises(pg.GGMLError, match="released"):
        target.predict(x[:16], batch_size=16)
    # and training goes on as if nothing happened
    assert np.isfinite(tr.step(x[:16], y[:16]))
    tr.free()
    m.free()


# ---- a trainer built on a loaded model --------------------------------------------

def test_a_trainer_on_a_loaded_model_predicts_from_the_trained_weights(tmp_path):
    pg.set_n_threads(1)
    x, y = make_regression()
    m0 = build_functional()
    tr0 = pg.Trainer(m0, batch_size=16)
    train_steps(tr0, x, y, 3)
    f0 = tmp_path / "m0.gguf"
    tr0.model().save(f0)
    tr0.free()

    loaded = pg.load_model(f0)
    p_saved = loaded.predict(x[:16], batch_size=16)
    tr = pg.Trainer(loaded, batch_size=16)
    np.testing.assert_array_equal(tr.predict(x[:16]), p_saved)   # starts from the loaded weights
    train_steps(tr, x, y, 5)
    p_live = tr.predict(x[:16])
    assert not np.allclose(p_live, p_saved, rtol=1.5e-8, atol=0)

    # all three paths out of the trainer agree with the live weights
    target = tr.snapshot()
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), p_live)
    target.free()
    trained = tr.model()
    np.testing.assert_array_equal(trained.predict(x[:16], batch_size=16), p_live)

    # saved and loaded again, it is the trained net that comes back
    f1 = tmp_path / "m1.gguf"
    trained.save(f1)
    reloaded = pg.load_model(f1)
    np.testing.assert_array_equal(reloaded.predict(x[:16], batch_size=16), p_live)
    tr.free()
    for mm in (reloaded, loaded, m0):
        mm.free()
    gc.collect()


def test_a_freed_model_under_a_live_trainer():
    x, y = make_data()
    m = build_model()
    tr = pg.Trainer(m, batch_size=16)
    m.free()
    with pytest.raises(pg.GGMLError, match="freed"):
        tr.step(x[:16], y[:16])
    tr.free()


@pytest.mark.parametrize("loss, loss_mask", [("categorical_crossentropy", None), ("mse", None), ("mse", 1),
                                             ("mse", 2)])
def test_the_one_call_step_trains_as_the_checked_path(loss, loss_mask):
    """float32 C-contiguous batches take Trainer.step's one call into the core; the same
    batches as float64 (converted and checked on the way) take the general path: the two
    trainers give the same losses and weights, step for step."""
    def make():
        act = "softmax" if loss == "categorical_crossentropy" else None
        m = pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2, activation=act)],
                          input_shape=3).compile(optimizer="adam", loss=loss, seed=3)
        return pg.Trainer(m, batch_size=16, loss_mask=loss_mask)
    fast, slow = make(), make()
    rng = np.random.default_rng(5)
    for _ in range(30):
        x = rng.standard_normal((16, 3)).astype(np.float32)
        y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 16)]
        a = fast.step(x, y)
        b = slow.step(x.astype(np.float64), y.astype(np.float64))
        assert a == b
    assert fast.n_steps == slow.n_steps == 30
    for (na, va), (nb, vb) in zip(fast.model().named_variables(), slow.model().named_variables()):
        assert na == nb
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    assert fast.optimizer.iterations == slow.optimizer.iterations == 30
