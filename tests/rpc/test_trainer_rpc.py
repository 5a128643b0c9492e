"""The seed's Trainer scenarios (tests/test_trainer.py) on a remote device.

Each scenario runs twice, on the CPU and on the device of a real RPC server
(a subprocess on 127.0.0.1, one CPU thread): the scenario's own assertions
hold on the remote device, and every loss, prediction and weight it records
agrees with the CPU run to 1e-5.  The weights and the Adam moments live on
the server: the client holds none of them."""

import numpy as np
import pytest

import pyggml as pg

VARIANTS = ["plain", "loaded", "after_fit"]
TOL = dict(rtol=1e-5, atol=1e-5)


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


def batch(i):
    return slice(i * 16, (i + 1) * 16)


def _variant(m, variant, backend, tmp_path, x, y):
    if variant == "loaded":
        path = tmp_path / f"m{id(m)}_{backend}.gguf"
        m.save(path)
        m.free()
        loaded = pg.load_model(path, backend=backend)
        assert loaded.backend_name == backend
        return loaded
    if variant == "after_fit":
        m.fit(x, y, epochs=1, batch_size=16, verbose=0, shuffle=False)
    return m


def build_model(backend, variant="plain", tmp_path=None, seed=1):
    pg.set_seed(seed)
    m = pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(2, activation="softmax")])
    m.input_shape = 4
    m.compile(optimizer="adam", loss="categorical_crossentropy", backend=backend)
    x, y = make_data()
    return _variant(m, variant, backend, tmp_path, x, y)


def build_functional(backend, variant="plain", tmp_path=None, seed=1, n_out=3):
    pg.set_seed(seed)
    inp = pg.Input(shape=4)
    h = pg.layers.Dense(8, activation="relu")(inp)
    out = pg.layers.Dense(n_out)(h)
    m = pg.Model(inputs=inp, outputs=out).compile(optimizer="adam", loss="mse", backend=backend)
    x, y = make_regression()
    return _variant(m, variant, backend, tmp_path, x, y[:, :n_out])


# ---- the scenarios: each returns what it observed, in order ------------------------

def stepping_by_hand_trains_the_model(backend, variant, tmp_path):
    x, y = make_data()
    m = build_model(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    losses = [tr.step(x[batch(i)], y[batch(i)]) for _ in range(4) for i in range(4)]
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    assert tr.n_steps == 16
    out = {"losses": losses, "weights": tr.model().get_weights()}
    tr.free()
    m.free()
    return out


def the_context_survives_across_steps(backend, variant, tmp_path):
    x, y = make_data()
    m = build_model(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    l1 = tr.step(x[:16], y[:16])
    l2 = tr.step(x[:16], y[:16])
    assert not np.isclose(l1, l2, rtol=1.5e-8, atol=0)
    tr.free()
    m.free()
    return {"losses": [l1, l2]}


def eval_does_not_train(backend, variant, tmp_path):
    x, y = make_data()
    m = build_model(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    e1 = tr.eval(x[:16], y[:16])
    e2 = tr.eval(x[:16], y[:16])
    assert e1 == e2
    assert tr.n_steps == 0
    tr.free()
    m.free()
    return {"losses": [e1, e2]}


def set_lr_changes_the_step_size(backend, variant, tmp_path):
    x, y = make_data()

    def run_with_lr(lr):
        m = build_model(backend, variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16)
        tr.set_lr(lr)
        assert tr.lr == pytest.approx(lr)
        for i in range(4):
            tr.step(x[batch(i)], y[batch(i)])
        out = tr.step(x[:16], y[:16])
        tr.free()
        m.free()
        return out

    small, large = run_with_lr(1e-4), run_with_lr(1e-1)
    assert not np.isclose(small, large, rtol=1.5e-8, atol=0)
    return {"losses": [small, large]}


def gradient_accumulation_delays_the_weight_update(backend, variant, tmp_path):
    x, y = make_data()
    m = build_model(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16, nbatch_logical=32)
    ls = [tr.step(x[:16], y[:16]) for _ in range(3)]
    assert ls[0] == ls[1]
    assert not np.isclose(ls[1], ls[2], rtol=1.5e-8, atol=0)
    tr.free()
    m.free()
    return {"losses": ls}


def adam_moments_carry_over_between_steps(backend, variant, tmp_path):
    x, y = make_data()
    x, y = x[:16], y[:16]

    def live_after(k):
        m = build_model(backend, variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16)
        for _ in range(k):
            tr.step(x, y)
        out = tr.eval(x, y)
        tr.free()
        m.free()
        return out

    def reset_after(k):
        m = build_model(backend, variant, tmp_path)
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

    l1, r1, l3, r3 = live_after(1), reset_after(1), live_after(3), reset_after(3)
    assert l1 == r1
    assert not np.isclose(l3, r3, rtol=1.5e-8, atol=0)
    return {"losses": [l1, r1, l3, r3]}


def a_functional_model_trains_through_the_trainer(backend, variant, tmp_path):
    x, y = make_regression()
    m = build_functional(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    losses = [tr.step(x[batch(i)], y[batch(i)]) for _ in range(4) for i in range(4)]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    preds = tr.model().predict(x[:16], batch_size=16)
    assert preds.shape == (16, 3)
    tr.free()
    m.free()
    return {"losses": losses, "preds": preds}


def a_masked_output_does_not_train_whatever_its_target(backend, variant, tmp_path):
    x, y = make_regression()
    mask = np.random.default_rng(2).binomial(1, 0.4, size=y.shape).astype(np.float64)
    y_far = y + 100 * (1 - mask)

    def final_preds(yy, loss_mask, w):
        m = build_functional(backend, variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16, loss_mask=loss_mask)
        for i in range(4):
            tr.step(x[batch(i)], yy[batch(i)], None if w is None else w[batch(i)])
        p = tr.model().predict(x[:16], batch_size=16)
        tr.free()
        m.free()
        return p

    near, far = final_preds(y, 3, mask), final_preds(y_far, 3, mask)
    np.testing.assert_array_equal(near, far)
    assert not np.allclose(final_preds(y, None, None), final_preds(y_far, None, None))
    return {"preds": near}


def per_sample_weights_are_accepted_with_loss_mask_1(backend, variant, tmp_path):
    x, y = make_regression()
    m = build_functional(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16, loss_mask=1)
    l = tr.step(x[:16], y[:16], np.tile([1, 0.5], 8))
    assert np.isfinite(l)
    assert tr.eval(x[:16], y[:16], np.zeros(16)) == 0
    tr.free()
    m.free()
    return {"losses": [l]}


def predict_between_steps_leaves_training_exactly_as_it_was(backend, variant, tmp_path):
    x, y = make_regression()

    def run(with_predict):
        m = build_functional(backend, variant, tmp_path)
        tr = pg.Trainer(m, batch_size=16, loss_mask=3)
        losses = []
        for k in range(8):
            losses.append(tr.step(x[batch(k % 4)], y[batch(k % 4)]))
            if with_predict:
                tr.predict(x[:40])
        p = tr.predict(x[:16])
        tr.free()
        m.free()
        return losses, p

    plain, mixed = run(False), run(True)
    assert mixed[0] == plain[0]
    np.testing.assert_array_equal(mixed[1], plain[1])
    return {"losses": plain[0], "preds": plain[1]}


def predict_reads_the_current_weights(backend, variant, tmp_path):
    x, y = make_regression()
    m = build_functional(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    p0 = tr.predict(x[:16])
    tr.step(x[:16], y[:16])
    p1 = tr.predict(x[:40])
    assert not np.allclose(p0, p1[:16], rtol=1.5e-8, atol=0)
    np.testing.assert_array_equal(p1, tr.model().predict(x[:40], batch_size=16))
    tr.free()
    m.free()
    return {"preds": np.concatenate([p0, p1])}


def a_snapshot_starts_equal_and_stays_put(backend, variant, tmp_path):
    x, y = make_regression()
    m = build_functional(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    for i in range(2):
        tr.step(x[batch(i)], y[batch(i)])
    target = tr.snapshot()
    p_snap = target.predict(x[:16], batch_size=16)
    np.testing.assert_array_equal(p_snap, tr.predict(x[:16]))
    for i in range(3):
        tr.step(x[batch(i)], y[batch(i)])
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), p_snap)
    p_live = tr.predict(x[:16])
    assert not np.allclose(p_live, p_snap, rtol=1.5e-8, atol=0)
    tr.free()
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), p_snap)
    target.free()
    m.free()
    return {"preds": np.concatenate([p_snap, p_live])}


def update_target_copies_keeps_and_averages(backend, variant, tmp_path):
    x, y = make_regression()
    m = build_functional(backend, variant, tmp_path)
    tr = pg.Trainer(m, batch_size=16)
    target = tr.snapshot()
    for i in range(3):
        tr.step(x[batch(i)], y[batch(i)])
    old = target.get_weights()
    live = tr.model().get_weights()
    tr.update_target(target, tau=0)
    for k, v in target.get_weights().items():
        np.testing.assert_array_equal(v, old[k])
    tr.update_target(target, tau=0.5)
    half = target.get_weights()
    for k, v in half.items():
        np.testing.assert_allclose(v, 0.5 * (old[k] + live[k]), rtol=1e-6, atol=1e-7, err_msg=k)
    tr.update_target(target, tau=1)
    np.testing.assert_array_equal(target.predict(x[:16], batch_size=16), tr.predict(x[:16]))
    target.free()
    tr.free()
    m.free()
    return {"weights": half}


def a_trainer_on_a_loaded_model_predicts_from_the_trained_weights(backend, variant, tmp_path):
    x, y = make_regression()
    m0 = build_functional(backend)
    tr0 = pg.Trainer(m0, batch_size=16)
    for i in range(3):
        tr0.step(x[batch(i)], y[batch(i)])
    f0 = tmp_path / f"m0_{backend}.gguf"
    tr0.model().save(f0)
    tr0.free()
    loaded = pg.load_model(f0, backend=backend)
    p_saved = loaded.predict(x[:16], batch_size=16)
    tr = pg.Trainer(loaded, batch_size=16)
    np.testing.assert_array_equal(tr.predict(x[:16]), p_saved)
    for i in range(5):
        tr.step(x[batch(i % 4)], y[batch(i % 4)])
    p_live = tr.predict(x[:16])
    assert not np.allclose(p_live, p_saved, rtol=1.5e-8, atol=0)
    f1 = tmp_path / f"m1_{backend}.gguf"
    tr.model().save(f1)
    reloaded = pg.load_model(f1, backend=backend)
    np.testing.assert_array_equal(reloaded.predict(x[:16], batch_size=16), p_live)
    tr.free()
    for mm in (reloaded, loaded, m0):
        mm.free()
    return {"preds": np.concatenate([p_saved, p_live])}


SCENARIOS = [
    stepping_by_hand_trains_the_model,
    the_context_survives_across_steps,
    eval_does_not_train,
    set_lr_changes_the_step_size,
    gradient_accumulation_delays_the_weight_update,
    adam_moments_carry_over_between_steps,
    a_functional_model_trains_through_the_trainer,
    a_masked_output_does_not_train_whatever_its_target,
    per_sample_weights_are_accepted_with_loss_mask_1,
    predict_between_steps_leaves_training_exactly_as_it_was,
    predict_reads_the_current_weights,
    a_snapshot_starts_equal_and_stays_put,
    update_target_copies_keeps_and_averages,
]


def _compare(remote, cpu):
    assert remote.keys() == cpu.keys()
    for k in cpu:
        if k == "weights":
            assert remote[k].keys() == cpu[k].keys()
            for name in cpu[k]:
                np.testing.assert_allclose(remote[k][name], cpu[k][name], **TOL, err_msg=name)
        else:
            np.testing.assert_allclose(np.asarray(remote[k]), np.asarray(cpu[k]), **TOL, err_msg=k)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_scenario_on_the_remote_device_agrees_with_the_cpu(scenario, variant, rpc_device, tmp_path):
    pg.set_n_threads(1)
    try:
        cpu = scenario("cpu", variant, tmp_path)
        remote = scenario(rpc_device, variant, tmp_path)
    finally:
        pg.set_n_threads(None)
    _compare(remote, cpu)


def test_a_trainer_on_a_loaded_model_round_trips_through_the_remote_device(rpc_device, tmp_path):
    pg.set_n_threads(1)
    try:
        cpu = a_trainer_on_a_loaded_model_predicts_from_the_trained_weights("cpu", "plain", tmp_path)
        remote = a_trainer_on_a_loaded_model_predicts_from_the_trained_weights(rpc_device, "plain", tmp_path)
    finally:
        pg.set_n_threads(None)
    _compare(remote, cpu)


def test_the_weights_and_the_moments_live_on_the_server(rpc_device, server):
    """The model's buffers are remote ones, and a step moves them there: the
    traffic of a step is a few small messages, not the weights."""
    x, y = make_regression()
    m = build_functional(rpc_device)
    assert m.backend_name == rpc_device
    tr = pg.Trainer(m, batch_size=16)
    tr.step(x[:16], y[:16])
    before = pg.rpc.stats(server.endpoint)
    for i in range(10):
        tr.step(x[batch(i % 4)], y[batch(i % 4)])
    after = pg.rpc.stats(server.endpoint)
    n_weights = sum(v.size for v in m.get_weights().values())
    sent = (after["bytes_sent"] - before["bytes_sent"]) / 10
    received = (after["bytes_received"] - before["bytes_received"]) / 10
    # a step sends its batch (16 x (4 + 3) f32 = 448 bytes) and small commands, and reads the loss
    assert received < 64
    assert sent < 4 * 16 * 7 + 2048
    assert after["round_trips"] - before["round_trips"] <= 10 * 2
    assert n_weights * 4 > received        # the weights (and moments) never travel
    tr.free()
    m.free()
