"""What a Keras user's script relies on (issues 17 and 21): the short last batch,
evaluate's return values, losses, optimizers and schedules, metrics, callbacks,
data sources, nested and dict-input models, custom training steps."""

import csv
import math
import os
import warnings

import numpy as np
import pytest

import pyggml as pg

L = pg.layers


def regression(n=40, seed=0, d=3, k=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x, (x @ rng.normal(size=(d, k))).astype(np.float32)


# --- the short last batch (17.1) -------------------------------------------------------------

def test_the_last_short_batch_keeps_padding_out_of_batchnorm_and_the_loss():
    """34 rows at batch 32: the last batch has 2 rows and runs as a batch of 2.  The loss,
    the weights and BatchNormalization's running statistics equal a PyTorch twin's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.normal(size=(34, 3)).astype(np.float32) * 2 + 1
    y = rng.normal(size=(34, 1)).astype(np.float32)
    pg.set_seed(0)
    m = pg.Sequential([L.Dense(4), L.BatchNormalization(momentum=0.0), L.Dense(1)], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    w0 = m.get_weights()
    h = m.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    w1 = m.get_weights()

    d1, d2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
    bn = torch.nn.BatchNorm1d(4, eps=1e-3, momentum=1.0)          # PyTorch's momentum = 1 - Keras's
    with torch.no_grad():
        d1.weight.copy_(torch.from_numpy(w0["dense.weight"]))
        d1.bias.copy_(torch.from_numpy(w0["dense.bias"]))
        d2.weight.copy_(torch.from_numpy(w0["dense_1.weight"]))
        d2.bias.copy_(torch.from_numpy(w0["dense_1.bias"]))
    params = list(d1.parameters()) + list(bn.parameters()) + list(d2.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    losses, last_batch = [], None
    for s in (slice(0, 32), slice(32, 34)):
        xb, yb = torch.from_numpy(x[s]), torch.from_numpy(y[s])
        opt.zero_grad()
        hb = d1(xb)
        loss = ((d2(bn(hb)) - yb) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()) * (s.stop - s.start))
        last_batch = hb.detach().numpy()
    np.testing.assert_allclose(h.history["loss"][0], sum(losses) / 34, rtol=1e-5)
    for ours, theirs in (("dense.weight", d1.weight), ("dense_1.weight", d2.weight), ("dense_1.bias", d2.bias),
                         ("batch_normalization.weight", bn.weight), ("batch_normalization.bias", bn.bias)):
        # the 2-row batch normalises by a variance as small as 0.008: float32 gradients of the
        # first Dense are ~5 and differ from float64's by up to 2e-5 (PyTorch's float32 too),
        # so 0.1 * that is the floor; a padded row moves these weights by more than 1e-2
        np.testing.assert_allclose(w1[ours], theirs.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=ours)
    # momentum 0: the running statistics are the last batch's (Keras keeps the biased variance)
    np.testing.assert_allclose(w1["batch_normalization.running_mean"], last_batch.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w1["batch_normalization.running_var"], last_batch.var(0), rtol=1e-4, atol=1e-6)
    m.free()


def test_a_one_row_last_batch_is_its_own_batch():
    """33 rows at batch 32, momentum 0: running_mean is the 33rd row's activation, not it / 32."""
    x, y = regression(33)
    pg.set_seed(0)
    m = pg.Sequential([L.Dense(4), L.BatchNormalization(momentum=0.0)], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(0.0), loss="mse")
    w = m.get_weights()
    m.fit(x, np.zeros((33, 4)), batch_size=32, epochs=1, shuffle=False, verbose=0)
    last = x[32] @ w["dense.weight"].T + w["dense.bias"]
    np.testing.assert_allclose(m.get_weights()["batch_normalization.running_mean"], last, rtol=1e-5, atol=1e-6)
    m.free()


# --- evaluate (17.2) ----------------------------------------------------------------------------

def test_evaluate_returns_as_keras_does():
    x, y = regression()
    m = pg.Sequential([L.Dense(2)], input_shape=3).compile(loss="mse")
    assert isinstance(m.evaluate(x, y), float)
    assert m.metrics_names == ["loss"]
    m.compile(loss="mse", metrics=["mae", "mse"])
    score = m.evaluate(x, y)
    assert isinstance(score, list) and len(score) == 3 == len(m.metrics_names)
    d = m.evaluate(x, y, return_dict=True)
    assert list(d) == m.metrics_names == ["loss", "mae", "mse"]
    assert score == [d[k] for k in m.metrics_names]
    np.testing.assert_allclose(d["mse"], d["loss"], rtol=1e-5)
    m.free()


def test_train_and_test_on_batch_are_one_step_and_one_evaluation():
    """Keras's train_on_batch is one optimizer step on all the rows given: the same weights and
    loss as fit over one batch of them, the optimizer state carried on to the next call, the
    result shaped as evaluate's; test_on_batch is evaluate on them."""
    x, y = regression(n=24, seed=5)

    def model():
        return pg.Sequential([L.Dense(8, activation="tanh"), L.Dense(2)], input_shape=3).compile(
            optimizer=pg.optimizers.Adam(learning_rate=0.05), loss="mse", metrics=["mae"], seed=3)
    a, b = model(), model()
    losses = [a.train_on_batch(x, y) for _ in range(3)]
    h = b.fit(x, y, batch_size=len(x), epochs=3, shuffle=False, verbose=0)
    assert all(isinstance(v, list) and len(v) == 2 for v in losses)
    np.testing.assert_allclose([v[0] for v in losses], h.history["loss"], rtol=1e-6)
    np.testing.assert_allclose([v[1] for v in losses], h.history["mae"], rtol=1e-6)
    for k, w in a.get_weights().items():
        np.testing.assert_allclose(w, b.get_weights()[k], rtol=1e-6, atol=1e-7)
    assert losses[2][0] < losses[0][0]
    d = a.train_on_batch(x, y, return_dict=True)
    assert list(d) == ["loss", "mae"]
    assert a.test_on_batch(x, y) == a.evaluate(x, y, batch_size=len(x), verbose=0)
    assert a.test_on_batch(x, y, return_dict=True) == a.evaluate(x, y, batch_size=len(x), verbose=0,
                                                                 return_dict=True)
    w = np.ones(len(x), np.float32)
    w[:12] = 0
    assert a.test_on_batch(x, y, sample_weight=w) == a.evaluate(x, y, sample_weight=w, batch_size=len(x),
                                                                verbose=0)
    assert a.test_on_batch(x, y, sample_weight=w)[0] != a.test_on_batch(x, y)[0]
    with pytest.raises(TypeError, match="arrays"):
        a.train_on_batch(iter([(x, y)]))
    with pytest.raises(ValueError, match="targets"):
        a.train_on_batch(x)
    for m in (a, b):
        m.free()


# --- losses (17.5, 21.6) --------------------------------------------------------------------

def test_loss_objects_on_numpy_arrays():
    y, p = np.array([[0.0, 1.0], [1.0, 2.0]]), np.array([[0.5, 1.0], [3.0, 2.0]])
    assert pg.losses.Huber()(y, p) == pytest.approx(np.mean([0.125, 0, 1.5, 0]), rel=1e-6)
    assert pg.losses.MeanSquaredError()(y, p) == pytest.approx(np.mean((y - p) ** 2), rel=1e-6)
    assert pg.losses.MeanAbsoluteError()(y, p, sample_weight=[1, 0]) == pytest.approx(0.125, rel=1e-6)
    z = np.array([[2.0, -1.0, 0.5]])
    lp = z - np.log(np.exp(z).sum())
    assert pg.losses.CategoricalCrossentropy(from_logits=True)([[0, 1, 0]], z) == pytest.approx(-lp[0, 1], rel=1e-5)
    assert pg.losses.SparseCategoricalCrossentropy(from_logits=True)([1], z) == pytest.approx(-lp[0, 1], rel=1e-5)
    assert pg.losses.BinaryCrossentropy(from_logits=True)([[1.0]], [[0.0]]) == pytest.approx(math.log(2), rel=1e-5)


def test_a_string_loss_on_a_linear_output_stays_finite():
    x, _ = regression()
    y = (x[:, :1] > 0).astype(np.float32)
    m = pg.Sequential([L.Dense(1)], input_shape=3).compile(optimizer=pg.optimizers.SGD(1.0),
                                                           loss="binary_crossentropy")
    m.set_weights({"dense.weight": np.full((1, 3), 5.0, np.float32), "dense.bias": np.array([3.0], np.float32)})
    h = m.fit(x, y, epochs=3, batch_size=8, verbose=0)
    assert all(np.isfinite(h.history["loss"]))
    m.free()


def test_losses_per_output_none_dicts_functions_and_subclasses():
    x, y = regression(k=2)
    inp = pg.Input(3)
    a, b = L.Dense(2, name="a")(inp), L.Dense(2, name="b")(inp)

    def halved_mse(y_true, y_pred):
        return pg.ops.scale(pg.ops.sqr(y_pred - y_true), 0.5)

    class Absolute(pg.losses.Loss):
        def call(self, y_true, y_pred):
            return pg.ops.abs(y_pred - y_true)

    m = pg.Model(inp, [a, b])
    for loss, a_trains in (([None, "mse"], False), ({"b": "mse"}, False), ([halved_mse, Absolute()], True)):
        m.compile(optimizer=pg.optimizers.SGD(0.05), loss=loss)
        w0 = m.get_weights()
        m.fit(x, [y, y], epochs=2, batch_size=8, verbose=0)
        w1 = m.get_weights()
        assert (not np.array_equal(w0["a.weight"], w1["a.weight"])) == a_trains
        assert not np.array_equal(w0["b.weight"], w1["b.weight"])
    pa, pb = m.predict(x)
    r = m.evaluate(x, [y, y], return_dict=True)
    assert r["a_loss"] == pytest.approx(0.5 * np.mean((pa - y) ** 2), rel=1e-4)
    assert r["b_loss"] == pytest.approx(np.mean(np.abs(pb - y)), rel=1e-4)
    m.free()


# --- optimizers (17.6) ---------------------------------------------------------------------

def _keras_step(name, w, g, state, t, lr=0.1):
    """Keras's update rules, in numpy."""
    if name == "rmsprop":
        v = state.setdefault("v", np.zeros_like(w))
        v[:] = 0.9 * v + 0.1 * g * g
        return w - lr * g / np.sqrt(v + 1e-7)
    if name == "adagrad":
        a = state.setdefault("a", np.full_like(w, 0.1))
        a += g * g
        return w - lr * g / np.sqrt(a + 1e-7)
    if name in ("sgd_momentum", "sgd_nesterov"):
        v = state.setdefault("v", np.zeros_like(w))
        v[:] = 0.9 * v - lr * g
        return w + (0.9 * v - lr * g if name == "sgd_nesterov" else v)
    if name == "nadam":
        m, s = state.setdefault("m", np.zeros_like(w)), state.setdefault("s", np.zeros_like(w))
        mu = lambda k: 0.9 * (1 - 0.5 * 0.96 ** k)                      # noqa: E731
        up = state.setdefault("u", [1.0])
        up[0] *= mu(t)
        u_t, u_next = up[0], up[0] * mu(t + 1)
        m[:] = 0.9 * m + 0.1 * g
        s[:] = 0.999 * s + 0.001 * g * g
        m_hat = mu(t + 1) * m / (1 - u_next) + (1 - mu(t)) * g / (1 - u_t)
        return w - lr * m_hat / (np.sqrt(s / (1 - 0.999 ** t)) + 1e-7)
    raise ValueError(name)


@pytest.mark.parametrize("name", ["rmsprop", "adagrad", "sgd_momentum", "sgd_nesterov", "nadam"])
def test_optimizers_follow_keras_update_rules(name):
    opt = {"rmsprop": pg.optimizers.RMSprop(0.1), "adagrad": pg.optimizers.Adagrad(0.1),
           "sgd_momentum": pg.optimizers.SGD(0.1, momentum=0.9),
           "sgd_nesterov": pg.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
           "nadam": pg.optimizers.Nadam(0.1)}[name]
    x, y = regression(16)
    m = pg.Sequential([L.Dense(2, use_bias=False)], input_shape=3).compile(optimizer=opt, loss="mse")
    w = m.get_weights()["dense.weight"].astype(np.float64)
    state = {}
    for t in range(1, 4):
        g = m.gradients(x, y)["dense.weight"].astype(np.float64)
        w = _keras_step(name, w, g, state, t)
        m.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        np.testing.assert_allclose(m.get_weights()["dense.weight"], w, rtol=2e-5, atol=2e-6)
    m.free()


def test_schedules_callable_rates_and_a_zero_rate():
    s = pg.optimizers.schedules
    assert s.ExponentialDecay(0.1, 10, 0.5)(20) == pytest.approx(0.025)
    assert s.ExponentialDecay(0.1, 10, 0.5, staircase=True)(15) == pytest.approx(0.05)
    assert s.PiecewiseConstantDecay([5, 10], [1.0, 0.5, 0.1])(7) == 0.5
    assert s.CosineDecay(1.0, 10)(5) == pytest.approx(0.5)
    assert s.CosineDecay(0.0, 10, warmup_target=1.0, warmup_steps=4)(2) == pytest.approx(0.5)
    x, y = regression()
    opt = pg.optimizers.SGD(s.PiecewiseConstantDecay([1], [0.1, 0.0]))
    m = pg.Sequential([L.Dense(2)], input_shape=3).compile(optimizer=opt, loss="mse")
    m.fit(x, y, batch_size=20, epochs=1, shuffle=False, verbose=0)      # steps 0, 1: rate 0.1
    w = m.get_weights()
    h = m.fit(x, y, batch_size=20, epochs=2, shuffle=False, verbose=0)   # steps 2..: rate 0
    for k, v in m.get_weights().items():
        np.testing.assert_array_equal(v, w[k])
    assert h.history["learning_rate"] == [0.0, 0.0]
    m.compile(optimizer=pg.optimizers.Adam(learning_rate=lambda step: 0.0), loss="mse")
    w = m.get_weights()
    m.fit(x, y, epochs=1, verbose=0)
    for k, v in m.get_weights().items():
        np.testing.assert_array_equal(v, w[k])
    m.free()


# --- metrics (17.8) --------------------------------------------------------------------------

def test_metrics_by_name_per_output_and_user_metrics():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 4)).astype(np.float32)
    labels = rng.integers(0, 3, 50)
    inp = pg.Input(4)
    cls = L.Dense(3, activation="softmax", name="cls")(inp)
    bin_ = L.Dense(1, activation="sigmoid", name="bin")(inp)

    class MeanPrediction(pg.metrics.Metric):
        def __init__(self, name="mean_prediction"):
            super().__init__(name)
            self.reset_state()

        def reset_state(self):
            self.total, self.n = 0.0, 0

        def update_state(self, y_true, y_pred, sample_weight=None):
            self.total += float(np.sum(y_pred))
            self.n += np.size(y_pred)

        def result(self):
            return self.total / self.n

    m = pg.Model(inp, [cls, bin_]).compile(
        loss=["sparse_categorical_crossentropy", "binary_crossentropy"],
        metrics={"cls": ["accuracy", "sparse_top_k_categorical_accuracy"],
                 "bin": ["binary_accuracy", "precision", "recall", "auc", "true_positives", MeanPrediction()]})
    yb = (x[:, :1] > 0).astype(np.float32)
    r = m.evaluate(x, [labels, yb], return_dict=True)
    pc, pb = m.predict(x)
    assert r["cls_accuracy"] == pytest.approx(float((pc.argmax(1) == labels).mean()))
    assert r["cls_sparse_top_k_categorical_accuracy"] == pytest.approx(1.0)          # 3 classes, k=5
    pred = pb > 0.5
    tp = float((pred & (yb > 0.5)).sum())
    assert r["bin_true_positives"] == tp
    assert r["bin_precision"] == pytest.approx(tp / max(pred.sum(), 1))
    assert r["bin_recall"] == pytest.approx(tp / max((yb > 0.5).sum(), 1))
    assert r["bin_binary_accuracy"] == pytest.approx(float((pred == (yb > 0.5)).mean()))
    assert r["bin_mean_prediction"] == pytest.approx(float(pb.mean()), rel=1e-5)
    assert 0.0 <= r["bin_auc"] <= 1.0
    assert m.metrics_names[:3] == ["loss", "cls_loss", "bin_loss"]
    with pytest.raises(ValueError, match="unknown metric"):
        m.compile(loss="mse", metrics=["aucc"])
    m.free()


def test_auc_matches_the_rank_statistic():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    p = np.clip(y * 0.3 + rng.random(400) * 0.7, 0, 1)
    auc = pg.metrics.AUC(num_thresholds=1000)
    auc.update_state(y, p)
    pos, neg = p[y == 1], p[y == 0]
    exact = float((pos[:, None] > neg[None, :]).mean())
    assert auc.result() == pytest.approx(exact, abs=5e-3)


# --- callbacks (17.9) ----------------------------------------------------------------------

def test_callback_hooks_get_logs_and_batch_hooks_run():
    x, y = regression(40)
    seen = []

    class Spy(pg.callbacks.Callback):
        def on_train_begin(self, logs):
            seen.append(("train_begin", dict(logs)))

        def on_epoch_end(self, epoch, logs):
            seen.append(("epoch_end", sorted(logs)))

        def on_batch_end(self, batch, logs):
            seen.append(("batch_end", batch, "loss" in logs))

    m = pg.Sequential([L.Dense(2)], input_shape=3).compile(loss="mse", metrics=["mae"])
    m.fit(x, y, epochs=2, batch_size=16, verbose=0, callbacks=[Spy()], validation_split=0.25)
    assert seen[0] == ("train_begin", {})
    assert [s for s in seen if s[0] == "batch_end"] == [("batch_end", i, True) for i in (0, 1)] * 2
    assert ("epoch_end", ["learning_rate", "loss", "mae", "val_loss", "val_mae"]) in seen
    m.free()


def test_checkpoints_every_n_batches_csv_and_nan(tmp_path):
    x, y = regression(40)
    m = pg.Sequential([L.Dense(2)], input_shape=3).compile(loss="mse")
    ck = pg.callbacks.ModelCheckpoint(str(tmp_path / "m-{epoch}-{batch}.gguf"), save_freq=3)
    log = pg.callbacks.CSVLogger(str(tmp_path / "log.csv"))
    m.fit(x, y, epochs=2, batch_size=10, verbose=0, callbacks=[ck, log])      # 8 batches: saves at 3 and 6
    assert sorted(os.listdir(tmp_path)) == ["log.csv", "m-1-3.gguf", "m-2-2.gguf"]
    rows = list(csv.reader(open(tmp_path / "log.csv")))
    assert rows[0] == ["epoch", "learning_rate", "loss"] and len(rows) == 3
    bad = np.full_like(y, np.inf)
    with pytest.raises(ValueError, match="NaN or inf"):
        m.fit(x, bad, verbose=0)
    huge = pg.Sequential([L.Dense(2)], input_shape=3).compile(optimizer=pg.optimizers.SGD(1e30), loss="mse")
    h = huge.fit(x * 1e10, y, epochs=5, batch_size=10, verbose=0, callbacks=[pg.callbacks.TerminateOnNaN()])
    assert len(h.epoch) < 5
    m.free()
    huge.free()


def test_backup_and_restore_resumes_an_interrupted_fit(tmp_path):
    pg.set_n_threads(1)
    x, y = regression(30)

    def make():
        pg.set_seed(7)
        return pg.Sequential([L.Dense(4, activation="relu"), L.Dense(2)], input_shape=3).compile(loss="mse")

    class Crash(pg.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 2:
                raise KeyboardInterrupt("the power went out")

    ref = make()
    ref.fit(x, y, epochs=5, batch_size=10, shuffle=False, verbose=0)
    m = make()
    backup = pg.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with pytest.raises(KeyboardInterrupt):
        m.fit(x, y, epochs=5, batch_size=10, shuffle=False, verbose=0, callbacks=[backup, Crash()])
    again = make()                      # a new process would build the model anew
    h = again.fit(x, y, epochs=5, batch_size=10, shuffle=False, verbose=0,
                  callbacks=[pg.callbacks.BackupAndRestore(str(tmp_path / "backup"))])
    assert h.epoch == [3, 4]            # epochs 0-2 were done (the crash came after epoch 2's backup)
    for k, v in ref.get_weights().items():
        np.testing.assert_array_equal(again.get_weights()[k], v)
    assert not os.path.exists(tmp_path / "backup" / "backup.gguf")
    for mm in (ref, m, again):
        mm.free()
    pg.set_n_threads(None)


# --- data (17.10) ------------------------------------------------------------------------------

def test_datasets_without_steps_per_epoch():
    x, y = regression(40)

    class Batches(pg.utils.PyDataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return x[i * 10:(i + 1) * 10], y[i * 10:(i + 1) * 10]

    class Pairs:
        """An iterable with a length (re-iterable each epoch), as a user writes one."""

        def __len__(self):
            return 4

        def __iter__(self):
            return iter([(x[i:i + 10], y[i:i + 10]) for i in range(0, 40, 10)])

    m = pg.Sequential([L.Dense(2)], input_shape=3).compile(loss="mse")
    h1 = m.fit(Batches(), epochs=2, verbose=0)
    h2 = m.fit(Pairs(), epochs=2, verbose=0)
    assert len(h1.epoch) == len(h2.epoch) == 2
    np.testing.assert_allclose(m.evaluate(Batches()), m.evaluate(x, y), rtol=1e-5)
    np.testing.assert_allclose(m.predict(Batches()), m.predict(x), rtol=1e-6)
    np.testing.assert_allclose(m.predict((b[0] for b in Pairs())), m.predict(x), rtol=1e-6)
    m.free()


# --- the Trainer's own optimizer state (17.11) -------------------------------------------

def test_a_new_trainer_starts_with_fresh_optimizer_state():
    """A trainer made after fit (whose Adam moments are far from zero) steps exactly as a
    trainer on a fresh model holding the same weights: it does not continue fit's state."""
    pg.set_n_threads(1)
    x, y = regression(32)

    def make():
        pg.set_seed(2)
        return pg.Sequential([L.Dense(8, activation="tanh"), L.Dense(2)], input_shape=3).compile(
            optimizer=pg.optimizers.Adam(0.05), loss="mse")

    trained = make()
    trained.fit(x, y, epochs=5, batch_size=8, verbose=0)
    fresh = make()
    fresh.set_weights(trained.get_weights())
    a, b = pg.Trainer(trained, 32), pg.Trainer(fresh, 32)
    for _ in range(3):
        assert a.step(x, y) == b.step(x, y)
    for k, v in fresh.get_weights().items():
        np.testing.assert_array_equal(trained.get_weights()[k], v)
    # and fit's own state was not touched by the trainer
    assert trained.optimizer.iterations == 20
    for o in (a, b, trained, fresh):
        o.free()
    pg.set_n_threads(None)


# --- models: nesting, dict inputs, int64, uncompiled calls, layer.output (17.7, 21.3, 21.4, 21.8) --

def test_models_nest_take_dicts_and_int64_and_run_uncompiled():
    enc = pg.Sequential([L.Dense(4, activation="relu"), L.Dense(2)], input_shape=3, name="encoder")
    x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    p = enc(x)                                         # before compile: Keras's forward pass
    assert p.shape == (6, 2)
    inp = pg.Input(3)
    auto = pg.Model(inp, L.Dense(3)(enc(inp)))
    assert auto.layers[1] is enc and enc.output.shape == (None, 2) and auto.input is inp
    auto.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    np.testing.assert_allclose(auto.get_weights()["encoder.dense.weight"], enc.get_weights()["dense.weight"])
    auto.fit(x, x, epochs=3, verbose=0)
    # the inner model holds the trained weights (they are the same variables)
    np.testing.assert_allclose(enc.predict(x), enc.get_weights() and enc(x), rtol=1e-6)
    assert not np.allclose(enc(x), p)
    ids = {"age": pg.Input((1,), name="age"), "kind": pg.Input((1,), name="kind", dtype="int64")}
    h = L.concatenate([ids["age"], L.Flatten()(L.Embedding(5, 2)(ids["kind"]))])
    m = pg.Model(inputs=ids, outputs=L.Dense(1)(h)).compile(loss="mse")
    data = {"age": np.ones((4, 1)), "kind": np.array([[0], [1], [4], [2]], dtype=np.int64)}
    m.fit(data, np.zeros((4, 1)), verbose=0)
    assert m.predict(data).shape == (4, 1)
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        m.predict({"age": np.ones((1, 1)), "kind": np.array([[5]])})
    for mm in (auto, m, enc):
        mm.free()


def test_no_overflow_warning_for_confident_sigmoid_outputs():
    x = np.full((8, 1), 100.0, np.float32)
    m = pg.Sequential([L.Dense(1, activation="sigmoid")], input_shape=1).compile(
        loss="binary_crossentropy", metrics=["accuracy"])
    m.set_weights({"dense.weight": np.array([[-10.0]], np.float32), "dense.bias": np.zeros(1, np.float32)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.fit(x, np.ones((8, 1)), verbose=0)
        m.evaluate(x, np.ones((8, 1)))
    m.free()


# --- custom training steps (21.7) ------------------------------------------------------------

def test_gradients_and_apply_gradients_reproduce_fit():
    pg.set_n_threads(1)
    x, y = regression(16)
    for opt in (pg.optimizers.SGD(0.1), pg.optimizers.Adam(0.01)):
        pg.set_seed(9)
        a = pg.Sequential([L.Dense(5, activation="tanh"), L.Dense(2)], input_shape=3).compile(optimizer=opt,
                                                                                              loss="mse")
        pg.set_seed(9)
        b = pg.Sequential([L.Dense(5, activation="tanh"), L.Dense(2)], input_shape=3).compile(
            optimizer=type(opt).from_config(opt.get_config()), loss="mse")
        for _ in range(3):
            grads = a.gradients(x, y)
            assert list(grads) == a.trainable_weights
            a.optimizer.apply_gradients(zip(grads.values(), a.trainable_variables))
            b.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        for k, v in b.get_weights().items():
            np.testing.assert_allclose(a.get_weights()[k], v, rtol=1e-6, atol=1e-7)
        a.free()
        b.free()
    pg.set_n_threads(None)


# --- integer inputs, nested models, Keras's own files -------------------------------------

def test_integer_inputs_feed_float_layers_as_keras_promotes():
    rng = np.random.default_rng(3)
    xi = rng.integers(-5, 5, size=(6, 4)).astype(np.int64)
    inp = pg.Input((4,), dtype="int64")
    m = pg.Model(inp, L.Dense(3)(inp)).compile(optimizer="sgd", loss="mse")
    w = m.get_weights()
    np.testing.assert_allclose(m.predict(xi), xi @ w["dense.weight"].T + w["dense.bias"], rtol=1e-5, atol=1e-5)
    h = m.fit(xi, np.ones((6, 3), np.float32), epochs=3, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    i2 = pg.Input((5,), dtype="int32")
    c = L.Conv1D(2, 3)(L.Reshape((5, 1))(i2))
    m2 = pg.Model(i2, c)
    x2 = np.arange(10).reshape(2, 5)
    out = m2.predict(x2)
    k = m2.layers[-1].get_weights()
    # Conv1D valid over 3 taps, PyTorch's (out, in, k) layout
    want = np.stack([np.stack([(x2[b, t:t + 3] * k["weight"][o, 0]).sum() + k["bias"][o] for o in range(2)])
                     for b in range(2) for t in range(3)]).reshape(2, 3, 2)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    m.free()
    m2.free()


def test_a_model_first_in_a_sequential_gives_it_its_input():
    inner_in = pg.Input((4,))
    inner = pg.Model(inner_in, L.Dense(3, activation="relu")(inner_in))
    outer = pg.Sequential([inner, L.Dense(1)]).compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).random((5, 4), dtype=np.float32)
    wi, wo = inner.get_weights(), outer.layers[-1].get_weights()
    h = np.maximum(x @ wi["dense.weight"].T + wi["dense.bias"], 0)
    np.testing.assert_allclose(outer.predict(x), h @ wo["weight"].T + wo["bias"], rtol=1e-5, atol=1e-6)
    # a Sequential without an input first: as Keras, both are built by the first data
    waiting = pg.Sequential([pg.Sequential([L.Dense(2)]), L.Dense(1)]).compile(loss="mse")
    waiting.fit(x[:, :3], np.zeros((5, 1)), verbose=0)
    assert waiting.input_shape == (None, 3) and waiting.predict(x[:, :3]).shape == (5, 1)
    outer.free()
    waiting.free()


@pytest.mark.parametrize("magic,what", [(b"PK\x03\x04", "Keras's .keras"), (b"\x89HDF\r\n\x1a\n", "Keras's .h5")])
def test_keras_files_are_refused_by_name(tmp_path, magic, what):
    p = tmp_path / "model.keras"
    p.write_bytes(magic + b"\0" * 64)
    with pytest.raises(pg.GGUFError, match=what):
        pg.load_model(str(p))
    m = pg.Sequential([L.Dense(2)], input_shape=3)
    with pytest.raises(pg.GGUFError, match="not GGUF"):
        m.load_weights(str(p))
    m.free()


def test_an_augmentation_sequential_inside_a_model_takes_images_of_any_size():
    # keras-io's image examples: data_augmentation = keras.Sequential([RandomFlip, RandomRotation])
    # called on Input((None, None, 3)): its input shape keeps the images' leading None
    aug = pg.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1)])
    x = pg.Input((None, None, 3))
    y = L.Dense(2)(L.GlobalAveragePooling2D()(L.Conv2D(4, 3)(aug(x))))
    model = pg.Model(x, y)
    assert aug.input_shape == (None, None, None, 3)
    model.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(5)
    for h, w in ((8, 8), (11, 9)):
        model.fit(rng.random((4, h, w, 3)), rng.random((4, 2)), verbose=0)
    assert model.predict(rng.random((2, 10, 7, 3)), verbose=0).shape == (2, 2)
    seq = pg.Sequential([L.Dense(2)])
    seq.build((None, 5))                                         # Keras's batch shape
    assert seq.input_shape == (None, 5) and seq.layers[0].weight.shape == (2, 5)


def test_a_trained_layer_deep_copies_and_pickles_with_its_values_as_an_unbound_twin():
    import copy
    import pickle
    m = pg.Sequential([pg.Input((3,)), L.Dense(2)])
    m.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(6)
    m.fit(rng.random((8, 3)), rng.random((8, 2)), verbose=0)
    dense = m.layers[0]
    x = rng.random((4, 3)).astype(np.float32)
    for twin in (copy.deepcopy(dense), pickle.loads(pickle.dumps(dense))):      # PyTorch's copy.deepcopy(head)
        assert twin.weight is not dense.weight and twin.weight.device_tensor is None
        np.testing.assert_array_equal(twin.weight.numpy(), dense.weight.numpy())
        np.testing.assert_allclose(twin(x), dense(x), rtol=1e-6)
        twin.weight.assign(np.zeros((2, 3)))
        assert dense.weight.numpy().any()                    # the original keeps its values
    reused = pg.Sequential([pg.Input((3,)), copy.deepcopy(dense)])
    reused.compile(loss="mse")
    np.testing.assert_allclose(reused.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)


def test_training_given_at_a_functional_call_holds_in_every_run():
    # the transfer-learning guide: x = base_model(x, training=False), then fine-tuning with
    # base_model.trainable = True keeps its BatchNormalization in inference mode
    rng = np.random.default_rng(7)
    base = pg.Sequential([pg.Input((4,)), L.Dense(8), L.BatchNormalization(), L.Dropout(0.5)])
    inp = pg.Input((4,))
    out = L.Dense(1)(L.Dropout(0.2)(base(inp, training=False), training=False))
    model = pg.Model(inp, out)
    model.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    bn = base.layers[1]
    mean, gamma = bn.moving_mean.numpy().copy(), bn.gamma.numpy().copy()
    x, y = rng.random((16, 4)) * 5, rng.random((16, 1))
    model.fit(x, y, batch_size=16, verbose=0)
    np.testing.assert_array_equal(bn.moving_mean.numpy(), mean)     # inference mode: statistics kept
    assert not np.array_equal(bn.gamma.numpy(), gamma)               # ... while its weights train
    # in that mode the model is deterministic (no dropout) and equals its predict
    first = model.predict(x, verbose=0)
    np.testing.assert_array_equal(model(x, training=True), first)
    # training=True at the call: Monte Carlo dropout in predict
    i2 = pg.Input((4,))
    mc = pg.Model(i2, L.Dropout(0.5)(i2, training=True))
    dropped = (mc.predict(np.ones((2000, 4)), verbose=0) == 0).mean()
    assert 0.45 < dropped < 0.55


def test_outputs_given_as_a_dict_come_back_as_a_dict_by_their_keys(tmp_path):
    # the functional guide's multi-output model: Model(inputs, outputs={"priority": ..., ...})
    rng = np.random.default_rng(8)
    inp = pg.Input((3,))
    h = L.Dense(8, activation="relu")(inp)
    model = pg.Model(inp, {"score": L.Dense(1)(h), "cls": L.Dense(3, activation="softmax")(h)})
    assert model.output_names == ["score", "cls"]                  # the keys, not the layers' names
    model.compile(optimizer="adam", loss={"score": "mse", "cls": "sparse_categorical_crossentropy"},
                  metrics={"cls": ["accuracy"]})
    x, y = rng.random((32, 3)), {"score": rng.random((32, 1)), "cls": rng.integers(0, 3, 32)}
    history = model.fit(x, y, epochs=1, verbose=0)
    assert {"score_loss", "cls_loss", "cls_accuracy"} <= set(history.history)
    pred = model.predict(x[:4], verbose=0)
    assert list(pred) == ["score", "cls"] and pred["score"].shape == (4, 1) and pred["cls"].shape == (4, 3)
    np.testing.assert_allclose(pred["cls"].sum(axis=1), 1, rtol=1e-5)
    assert list(model(x[:4])) == ["score", "cls"]
    model.save(tmp_path / "d.keras")
    back = pg.models.load_model(tmp_path / "d.keras")
    again = back.predict(x[:4], verbose=0)
    assert list(again) == ["score", "cls"] and back.output_names == ["score", "cls"]
    np.testing.assert_allclose(again["score"], pred["score"], rtol=1e-6)
    assert list(pg.models.clone_model(model).predict(x[:4], verbose=0)) == ["score", "cls"]
    with pytest.raises(TypeError, match="need string keys"):
        pg.Model(inp, {1: h})
