"""pyggml.regularizers and pyggml.constraints: the objects on their own (against
numpy's formulas), their names and configs, wrong arguments; in a model: the
penalty in the training loss and its gradients (against PyTorch), reported in
fit's and evaluate's loss but not in the metrics, the constraints after every
update (fit, Trainer, apply_gradients), add_loss, layer.losses, saving.

(Per-layer checks of the layers' own arguments, in both graph forms, are in
tests/layers/test_weight_options.py.)"""

import json

import numpy as np
import pytest

import pyggml as pg

R, C, L = pg.regularizers, pg.constraints, pg.layers
EPS = 1e-7


def _close(a, b, rtol=1e-5, what=""):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=rtol,
                               atol=rtol * max(1e-3, float(np.max(np.abs(b)))), err_msg=what)


# --- numpy references --------------------------------------------------------------------

def orthogonal_ref(w, factor, mode):
    w = np.asarray(w, dtype=np.float64)
    x = w if mode == "rows" else w.T
    u = x / np.maximum(np.sqrt((x ** 2).sum(axis=1, keepdims=True)), EPS)
    p = u @ u.T
    n = len(x)
    return factor * 0.5 * np.abs(p * (1 - np.eye(n))).sum() / (n * (n - 1) / 2)


def norms(w, axis):
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    return np.sqrt((np.asarray(w, dtype=np.float64) ** 2).sum(axis=axis, keepdims=True))


def max_norm_ref(w, m, axis=0):
    n = norms(w, axis)
    return w * np.clip(n, 0, m) / (EPS + n)


def min_max_norm_ref(w, lo, hi, rate, axis=0):
    n = norms(w, axis)
    return w * (rate * np.clip(n, lo, hi) + (1 - rate) * n) / (EPS + n)


# --- the objects on their own ----------------------------------------------------------------

def test_regularizers_on_arrays_match_their_formulas():
    w = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    _close(R.L1(0.3)(w), 0.3 * np.abs(w).sum())
    _close(R.L2(0.2)(w), 0.2 * (w.astype(np.float64) ** 2).sum())
    _close(R.L1L2(0.1, 0.4)(w), 0.1 * np.abs(w).sum() + 0.4 * (w.astype(np.float64) ** 2).sum())
    assert R.L1L2()(w) == 0.0
    for mode in ("rows", "columns"):
        _close(R.OrthogonalRegularizer(0.7, mode)(w), orthogonal_ref(w, 0.7, mode), what=mode)
    # Keras's documented example: L2(2.) of ones (5, 5) is 50
    assert R.L2(2.0)(np.ones((5, 5))) == pytest.approx(50.0)
    # orthonormal rows cost nothing
    assert R.OrthogonalRegularizer(1.0)(np.eye(3)) == pytest.approx(0.0, abs=1e-7)


def test_constraints_on_arrays_match_their_formulas():
    w = np.random.default_rng(1).normal(size=(3, 4, 2)).astype(np.float32)
    _close(C.MaxNorm(1.5)(w), max_norm_ref(w, 1.5))
    _close(C.MaxNorm(0.5, axis=[0, 1])(w), max_norm_ref(w, 0.5, [0, 1]))
    _close(C.MinMaxNorm(2.0, 3.0, rate=0.5, axis=-1)(w), min_max_norm_ref(w, 2.0, 3.0, 0.5, -1))
    _close(C.UnitNorm(axis=1)(w), w / (EPS + norms(w, 1)))
    _close(C.NonNeg()(w), np.maximum(w, 0))
    assert C.MaxNorm(1.0)(w).shape == w.shape and C.MaxNorm(1.0)(w).dtype == np.float32
    with pytest.raises(ValueError, match="out of range"):
        C.MaxNorm(1.0, axis=3)(w)


def test_names_configs_and_keras_defaults():
    assert R.get("l1") == R.L1(0.01) and R.get("l2") == R.L2(0.01)
    assert R.get("l1_l2") == R.L1L2(0.01, 0.01)
    assert isinstance(R.get("orthogonal_regularizer"), R.OrthogonalRegularizer)
    assert R.get(None) is None and R.get(R.L2) == R.L2() and R.l1_l2 is R.L1L2
    r = R.OrthogonalRegularizer(0.2, "columns")
    assert R.get(r) is r
    assert R.deserialize(json.loads(json.dumps(R.serialize(r)))) == r
    # Keras's serialized form (module, registered_name) is read too
    keras_form = {"module": "keras.regularizers", "class_name": "L2", "config": {"l2": 0.5}, "registered_name": None}
    assert R.get(keras_form) == R.L2(0.5)
    assert C.get("max_norm") == C.MaxNorm(2, 0) and C.get("unit_norm") == C.UnitNorm(0)
    assert C.get("min_max_norm") == C.MinMaxNorm(0.0, 1.0, 1.0, 0) and isinstance(C.get("non_neg"), C.NonNeg)
    c = C.MinMaxNorm(0.5, 2.0, 0.3, [0, 1])
    assert C.deserialize(json.loads(json.dumps(C.serialize(c)))) == c
    fn = np.tanh
    assert R.get(fn) is fn and C.get(fn) is fn


@pytest.mark.parametrize("make, err", [
    (lambda: R.L1(-0.1), ValueError), (lambda: R.L2(float("nan")), ValueError), (lambda: R.L2("0.1"), TypeError),
    (lambda: R.L1L2(l2=float("inf")), ValueError), (lambda: R.L2(True), TypeError),
    (lambda: R.OrthogonalRegularizer(mode="diagonal"), ValueError), (lambda: R.get("l3"), ValueError),
    (lambda: R.get(3), TypeError), (lambda: R.get(int), TypeError), (lambda: R.get({"config": {}}), ValueError),
    (lambda: R.get({"class_name": "MaxNorm", "config": {}}), ValueError),
    (lambda: C.MaxNorm(-1), ValueError), (lambda: C.MaxNorm("2"), TypeError), (lambda: C.MaxNorm(2, axis=1.5), TypeError),
    (lambda: C.MinMaxNorm(2.0, 1.0), ValueError), (lambda: C.MinMaxNorm(rate=1.5), ValueError),
    (lambda: C.UnitNorm(axis=[0, 0]), ValueError), (lambda: C.get("clip"), ValueError), (lambda: C.get(2.0), TypeError),
    (lambda: L.Dense(3, kernel_regularizer="l3"), ValueError), (lambda: L.Dense(3, kernel_constraint=5), TypeError),
    (lambda: L.Dense(3, activity_regularizer="l9"), ValueError),
])
def test_wrong_arguments_are_refused(make, err):
    with pytest.raises(err):
        make()


def test_orthogonal_regularizer_needs_a_matrix_of_two_rows_or_more():
    with pytest.raises(ValueError, match="rank 2"):
        R.OrthogonalRegularizer()(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="at least 2"):
        R.OrthogonalRegularizer()(np.ones((1, 4)))
    # a Conv2D kernel is 4-D: refused when the model builds its graph, naming the regularizer
    m = pg.Sequential([L.Conv2D(2, 3, kernel_regularizer=R.OrthogonalRegularizer())], input_shape=(5, 5, 1))
    m.compile(loss="mse")
    with pytest.raises(ValueError, match="OrthogonalRegularizer"):
        m.fit(np.zeros((2, 5, 5, 1)), np.zeros((2, 3, 3, 2)), verbose=0)
    m.free()


# --- in a model: the penalty in the loss -------------------------------------------------------

def _data(rng, n=8, d_in=4, d_out=3):
    return rng.normal(size=(n, d_in)).astype(np.float32), rng.normal(size=(n, d_out)).astype(np.float32)


def _torch_step(w0, x, y, penalty, lr, act=None):
    """One SGD step of mse + penalty(W, b, out) on a Dense layer, in float64."""
    torch = pytest.importorskip("torch")
    W = torch.tensor(w0["dense.weight"], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(w0["dense.bias"], dtype=torch.float64, requires_grad=True)
    out = torch.tensor(x, dtype=torch.float64) @ W.T + b
    loss = ((out - torch.tensor(y, dtype=torch.float64)) ** 2).mean() + penalty(W, b, out)
    loss.backward()
    with torch.no_grad():
        return float(loss), (W - lr * W.grad).numpy(), (b - lr * b.grad).numpy()


@pytest.mark.parametrize("which", ["kernel_l2", "bias_l1", "l1_l2_names", "activity_l2", "orthogonal_rows",
                                   "orthogonal_columns"])
def test_one_sgd_step_equals_pytorch_with_the_penalty_in_the_loss(which):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x, y = _data(rng)
    kw, penalty = {
        "kernel_l2": ({"kernel_regularizer": R.L2(0.05)}, lambda W, b, o: 0.05 * (W ** 2).sum()),
        "bias_l1": ({"bias_regularizer": R.L1(0.2)}, lambda W, b, o: 0.2 * b.abs().sum()),
        "l1_l2_names": ({"kernel_regularizer": "l1_l2", "bias_regularizer": "l2"},
                        lambda W, b, o: 0.01 * W.abs().sum() + 0.01 * (W ** 2).sum() + 0.01 * (b ** 2).sum()),
        # Keras 3 divides the activity penalty by the batch size
        "activity_l2": ({"activity_regularizer": R.L2(0.1)}, lambda W, b, o: 0.1 * (o ** 2).sum() / len(x)),
        # Keras's kernel is (in, units): the transpose of the stored weight
        "orthogonal_rows": ({"kernel_regularizer": R.OrthogonalRegularizer(0.5, "rows")},
                            lambda W, b, o: _torch_orthogonal(torch, W.T, 0.5)),
        "orthogonal_columns": ({"kernel_regularizer": R.OrthogonalRegularizer(0.5, "columns")},
                               lambda W, b, o: _torch_orthogonal(torch, W, 0.5)),
    }[which]
    m = pg.Sequential([L.Dense(3, **kw)], input_shape=4)
    m.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse", metrics=["mse"])
    w0 = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in m.get_weights().items()}
    m.set_weights(w0)
    plain = float(np.mean((x @ w0["dense.weight"].T + w0["dense.bias"] - y) ** 2))
    want_loss, W1, b1 = _torch_step(w0, x, y, penalty, 0.1)
    assert want_loss > plain * 1.001              # the penalty is not negligible here
    _close(m.evaluate(x, y, verbose=0)[0], want_loss, what="evaluate's loss includes the penalty")
    h = m.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    _close(h.history["loss"][0], want_loss, what="fit's loss includes the penalty")
    _close(h.history["mse"][0], plain, what="the metric does not")
    got = m.get_weights()
    _close(got["dense.weight"], W1, what="kernel")
    _close(got["dense.bias"], b1, what="bias")
    m.free()


def _torch_orthogonal(torch, w, factor):
    u = w / torch.clamp(torch.sqrt((w ** 2).sum(dim=1, keepdim=True)), min=EPS)
    p = u @ u.T
    n = w.shape[0]
    return factor * 0.5 * (p * (1 - torch.eye(n, dtype=w.dtype))).abs().sum() / (n * (n - 1) / 2)


def test_the_penalty_counts_for_trainable_weights_only_and_gradients_include_it():
    rng = np.random.default_rng(3)
    x, y = _data(rng)
    first = L.Dense(4, kernel_regularizer=R.L2(1.0), name="first")
    m = pg.Sequential([first, L.Dense(3, name="second")], input_shape=4)
    m.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    w = m.get_weights()
    penalty = float((w["first.weight"].astype(np.float64) ** 2).sum())
    with_pen = m.evaluate(x, y, verbose=0)
    g = m.gradients(x, y)
    first.trainable = False
    without = m.evaluate(x, y, verbose=0)
    _close(with_pen - without, penalty, what="a frozen layer's weights cost nothing")
    first.trainable = True
    # the gradient holds 2 * W from the penalty: the difference of two models' gradients
    m2 = pg.Sequential([L.Dense(4, name="first"), L.Dense(3, name="second")], input_shape=4)
    m2.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    m2.set_weights(w)
    _close(g["first.weight"] - m2.gradients(x, y)["first.weight"], 2 * w["first.weight"])
    assert m.losses == pytest.approx([penalty], rel=1e-5)
    m.free()
    m2.free()


def test_trainer_and_gradient_accumulation_include_the_penalty():
    rng = np.random.default_rng(4)
    x, y = _data(rng, n=4)
    m = pg.Sequential([L.Dense(3, kernel_regularizer=R.L2(0.3))], input_shape=4)
    m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse")
    w = m.get_weights()
    want = float(np.mean((x @ w["dense.weight"].T + w["dense.bias"] - y) ** 2)) + \
        0.3 * float((w["dense.weight"].astype(np.float64) ** 2).sum())
    with pg.Trainer(m, batch_size=4) as tr:
        _close(tr.eval(x, y), want)
        _close(tr.step(x, y), want)
    m.set_weights(w)
    with pg.Trainer(m, batch_size=2, nbatch_logical=4) as tr:       # two micro-steps, one update
        l1, l2 = tr.step(x[:2], y[:2]), tr.step(x[2:], y[2:])
        _close((l1 + l2) / 2, want, what="each micro-step's loss holds the penalty once")
    m.free()


# --- layers' own losses --------------------------------------------------------------------------

@pg.saving.register_serializable(package="test_rc")
class Scaled(L.Layer):
    """A layer with a regularized, constrained weight of its own and an add_loss."""

    def __init__(self, extra=0.0, **kwargs):
        super().__init__(**kwargs)
        self.extra = extra

    def build(self, input_shape):
        self.s = self.add_weight("s", (input_shape[-1],), "ones", regularizer=R.L2(0.5), constraint=C.NonNeg())

    def call(self, inputs, training=None):
        y = inputs * self.s
        if self.extra:
            self.add_loss(pg.ops.reduce_mean(pg.ops.square(y)) * self.extra)
        return y

    def get_config(self):
        c = super().get_config()
        c["extra"] = self.extra
        return c


def test_add_weight_regularizer_constraint_and_add_loss():
    rng = np.random.default_rng(5)
    x, y = _data(rng, d_out=4)
    layer = Scaled(extra=0.25)
    m = pg.Sequential([layer], input_shape=4)
    m.compile(optimizer=pg.optimizers.SGD(1.5), loss="mse")
    s0 = np.array([1.0, -0.5, 2.0, 0.1], dtype=np.float32)
    m.set_weights({"scaled.s": np.abs(s0)})
    s = np.abs(s0).astype(np.float64)
    out = x * s
    want = np.mean((out - y) ** 2) + 0.5 * (s ** 2).sum() + 0.25 * np.mean(out ** 2)
    _close(m.evaluate(x, y, verbose=0), want)
    # the gradient of every term, then NonNeg after the step
    n = out.size
    grad = (2 * (out - y) * x).sum(axis=0) / n + 2 * 0.5 * s + 0.25 * (2 * out * x).sum(axis=0) / n
    m.fit(x, y, batch_size=8, verbose=0)
    _close(m.get_weights()["scaled.s"], np.maximum(s - 1.5 * grad, 0))
    assert (m.get_weights()["scaled.s"] == 0).any()            # the constraint had work to do
    # layer.losses on a call on arrays: the add_loss of that call, then the weight's penalty
    s1 = m.get_weights()["scaled.s"].astype(np.float64)
    layer(x)
    assert layer.losses == pytest.approx([0.25 * np.mean((x * s1) ** 2), 0.5 * (s1 ** 2).sum()], rel=1e-5)
    with pytest.raises(RuntimeError, match="inside call"):
        layer.add_loss(1.0)
    m.free()


def test_add_loss_refuses_what_is_not_a_loss():
    class Bad(L.Layer):
        def call(self, inputs, training=None):
            self.add_loss("big")
            return inputs
    m = pg.Sequential([Bad()], input_shape=2)
    with pytest.raises(TypeError, match="add_loss"):
        m.compile(loss="mse").fit(np.zeros((2, 2)), np.zeros((2, 2)), verbose=0)
    m.free()


# --- constraints after every update ---------------------------------------------------------

def test_max_norm_after_a_step_equals_the_numpy_formula_in_keras_layout():
    rng = np.random.default_rng(6)
    x, y = _data(rng)
    m = pg.Sequential([L.Dense(3, kernel_constraint=C.MaxNorm(0.4), bias_constraint=C.NonNeg())], input_shape=4)
    m.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    w0 = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in m.get_weights().items()}
    m.set_weights(w0)
    _, W1, b1 = _torch_step(w0, x, y, lambda W, b, o: 0.0, 0.1)
    m.fit(x, y, batch_size=8, verbose=0)
    got = m.get_weights()
    # Keras's axis 0 of the kernel (in, units) is the inputs: each unit's incoming weights
    _close(got["dense.weight"], max_norm_ref(W1.T, 0.4, 0).T)
    assert np.sqrt((got["dense.weight"] ** 2).sum(axis=1)).max() <= 0.4 * (1 + 1e-6)
    _close(got["dense.bias"], np.maximum(b1, 0))
    m.free()


@pytest.mark.parametrize("opt", ["adam", "adamw", "sgd_momentum", "rmsprop"])
def test_constraints_hold_after_every_optimizer_and_every_way_of_stepping(opt):
    rng = np.random.default_rng(7)
    x, y = _data(rng, n=8)
    make = {"adam": lambda: pg.optimizers.Adam(0.5), "adamw": lambda: pg.optimizers.AdamW(0.5),
            "sgd_momentum": lambda: pg.optimizers.SGD(0.5, momentum=0.9), "rmsprop": lambda: pg.optimizers.RMSprop(0.5)}
    m = pg.Sequential([L.Dense(5, kernel_constraint=C.UnitNorm(), name="a"),
                       L.Dense(3, kernel_constraint=C.NonNeg(), name="b")], input_shape=4)
    m.compile(optimizer=make[opt](), loss="mse")

    def check(what):
        w = m.get_weights()
        np.testing.assert_allclose(np.sqrt((w["a.weight"] ** 2).sum(axis=1)), 1.0, rtol=2e-6, err_msg=what)
        assert (w["b.weight"] >= 0).all(), what

    m.fit(x, y, batch_size=3, epochs=2, verbose=0)            # batches of 3, 3 and 2
    check("fit")
    with pg.Trainer(m, batch_size=4) as tr:
        tr.step(x[:4], y[:4])
        check("Trainer.step")
        grads = tr.gradients(x[:4], y[:4])
    m.optimizer.apply_gradients([(grads[n], v) for n, v in zip(m.trainable_weights, m.trainable_variables)])
    check("apply_gradients")
    m.free()


def test_accumulation_steps_leave_the_weights_and_the_update_constrains_them():
    rng = np.random.default_rng(8)
    x, y = _data(rng, n=4)
    m = pg.Sequential([L.Dense(3, kernel_constraint=C.MaxNorm(0.1))], input_shape=4)
    m.compile(optimizer=pg.optimizers.SGD(1.0), loss="mse")
    m.set_weights({"dense.weight": np.full((3, 4), 0.5, np.float32)})       # norms 1 > 0.1: not yet constrained
    with pg.Trainer(m, batch_size=2, nbatch_logical=4) as tr:
        tr.step(x[:2], y[:2])
        np.testing.assert_array_equal(m.get_weights()["dense.weight"], 0.5)
        tr.step(x[2:], y[2:])
    assert np.sqrt((m.get_weights()["dense.weight"] ** 2).sum(axis=1)).max() <= 0.1 * (1 + 1e-6)
    m.free()


def test_a_constraint_axis_out_of_range_is_named():
    m = pg.Sequential([L.Dense(3, kernel_constraint=C.MaxNorm(1.0, axis=2))], input_shape=4)
    m.compile(loss="mse")
    with pytest.raises(ValueError, match="MaxNorm: axis 2 is out of range"):
        m.fit(np.zeros((2, 4)), np.zeros((2, 3)), verbose=0)
    m.free()


# --- saving ------------------------------------------------------------------------------------

def test_saved_models_keep_regularizers_constraints_and_their_loss(tmp_path):
    rng = np.random.default_rng(9)
    x, y = _data(rng, d_out=4)
    inp = pg.Input((4,))
    h = L.Dense(6, kernel_regularizer=R.OrthogonalRegularizer(0.1), bias_regularizer=R.L1L2(0.01, 0.02),
                kernel_constraint=C.MinMaxNorm(0.2, 0.9, 0.5), activity_regularizer="l2")(inp)
    out = Scaled(extra=0.1)(L.Dense(4, bias_constraint="non_neg")(h))
    m = pg.Model(inp, out)
    m.compile(optimizer="adam", loss="mse")
    m.fit(x, y, verbose=0)
    path = str(tmp_path / "m.gguf")
    m.save(path)
    back = pg.load_model(path)
    for a, b in zip(m.layers, back.layers):
        assert a.get_config() == b.get_config()
    assert back.layers[1].kernel_regularizer == R.OrthogonalRegularizer(0.1)
    assert back.layers[1].activity_regularizer == R.L2(0.01)
    _close(back.evaluate(x, y, verbose=0), m.evaluate(x, y, verbose=0))
    # and they keep working: a step of each gives the same weights
    m.fit(x, y, verbose=0, shuffle=False)
    back.fit(x, y, verbose=0, shuffle=False)
    for k, v in m.get_weights().items():
        _close(back.get_weights()[k], v, what=k)
    m.free()
    back.free()


def test_a_function_regularizer_loads_through_custom_objects(tmp_path):
    def small_sum(w):
        return pg.ops.reduce_sum(pg.ops.square(w)) * 0.125

    m = pg.Sequential([L.Dense(2, kernel_regularizer=small_sum)], input_shape=3)
    m.compile(loss="mse")
    x, y = np.ones((2, 3), np.float32), np.zeros((2, 2), np.float32)
    path = str(tmp_path / "f.gguf")
    m.save(path)
    with pytest.raises(pg.GGUFError, match="small_sum"):
        pg.load_model(path)
    back = pg.load_model(path, custom_objects={"small_sum": small_sum})
    assert back.layers[0].kernel_regularizer is small_sum
    _close(back.evaluate(x, y, verbose=0), m.evaluate(x, y, verbose=0))
    with pg.saving.custom_object_scope({"small_sum": small_sum}):
        assert R.get({"class_name": "function", "config": "small_sum"}) is small_sum
    m.free()
    back.free()
