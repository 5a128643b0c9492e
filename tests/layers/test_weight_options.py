"""Keras's regularizer and constraint arguments of each layer that has them, in
both graph forms (fused CPU ops and composed): one SGD step of mse plus the
penalties equals PyTorch's step (autograd, float64) followed by the
constraints' numpy formulas, taken on each weight in Keras's layout; the
reported loss holds the penalties; the arguments survive get_config."""

import numpy as np
import pytest

import pyggml as pg

torch = pytest.importorskip("torch")
R, C, L = pg.regularizers, pg.constraints, pg.layers
EPS = 1e-7
T = torch.float64


def t_l1(w):
    return w.abs().sum()


def t_l2(w):
    return (w ** 2).sum()


def np_norms(w, axis):
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    return np.sqrt((w ** 2).sum(axis=axis, keepdims=True))


def np_max_norm(w, m, axis=0):
    n = np_norms(w, axis)
    return w * np.clip(n, 0, m) / (EPS + n)


def np_unit_norm(w, axis=0):
    return w / (EPS + np_norms(w, axis))


def np_min_max(w, lo, hi, rate, axis=0):
    n = np_norms(w, axis)
    return w * (rate * np.clip(n, lo, hi) + (1 - rate) * n) / (EPS + n)


def conv2d_keras(w):            # (F, C, kh, kw) -> Keras's (kh, kw, C, F)
    return np.transpose(w, (2, 3, 1, 0))


def check_step(layer, in_shape, forward, penalty, project, x=None, lr=0.1, seed=0, weight_init=None, tol=1e-5,
               inference_same=True):
    """One SGD step of ``layer`` (alone in a Sequential) on mse: the loss (evaluate, fit)
    includes ``penalty(w, out)`` and the weights after it are PyTorch's step, then
    ``project(dict of numpy weights)``."""
    rng = np.random.default_rng(seed)
    m = pg.Sequential([layer], input_shape=in_shape)
    m.compile(optimizer=pg.optimizers.SGD(lr), loss="mse")
    name = layer.name
    w0 = {}
    for k, v in m.get_weights().items():
        a = weight_init(k.split(".", 1)[1], v.shape, rng) if weight_init else None
        w0[k] = (rng.normal(scale=0.5, size=v.shape) if a is None else a).astype(np.float32)
    m.set_weights(w0)
    if x is None:
        x = rng.normal(size=(4,) + tuple(in_shape)).astype(np.float32)
    out_shape = m.predict(x).shape
    y = rng.normal(size=out_shape).astype(np.float32)
    wt = {k.split(".", 1)[1]: torch.tensor(v, dtype=T, requires_grad=True) for k, v in w0.items()}
    xt = torch.tensor(x, dtype=T) if x.dtype != np.int32 else torch.tensor(x.astype(np.int64))
    out = forward(wt, xt)
    data_loss = ((out - torch.tensor(y, dtype=T)) ** 2).mean()
    loss = data_loss + penalty(wt, out)
    loss.backward()
    assert loss.item() > data_loss.item() * 1.001, "the penalty is negligible: the check would prove nothing"
    with torch.no_grad():
        stepped = {k: (v - lr * v.grad).numpy() if v.grad is not None else v.numpy() for k, v in wt.items()}
    want = project(dict(stepped))
    if inference_same:                       # (BatchNormalization infers from its running statistics)
        np.testing.assert_allclose(m.evaluate(x, y, verbose=0), loss.item(), rtol=tol)
    h = m.fit(x, y, batch_size=len(x), verbose=0)
    np.testing.assert_allclose(h.history["loss"][0], loss.item(), rtol=tol)
    got = m.get_weights()
    for k, v in want.items():
        scale = max(float(np.abs(v).max()), 1e-3)
        np.testing.assert_allclose(got[f"{name}.{k}"], v, rtol=tol, atol=tol * scale, err_msg=k)
    cfg = layer.get_config()
    again = type(layer).from_config(cfg)
    assert again.get_config() == cfg
    m.free()
    return stepped, want


# --- the layers -------------------------------------------------------------------------------

def test_dense_kernel_and_bias():
    layer = L.Dense(3, kernel_regularizer=R.L1L2(0.01, 0.05), bias_regularizer="l2",
                    kernel_constraint=C.MinMaxNorm(0.5, 0.8, rate=0.7), bias_constraint="non_neg")
    stepped, want = check_step(
        layer, (5,),
        lambda w, x: x @ w["weight"].T + w["bias"],
        lambda w, o: 0.01 * t_l1(w["weight"]) + 0.05 * t_l2(w["weight"]) + 0.01 * t_l2(w["bias"]),
        lambda w: {"weight": np_min_max(w["weight"].T, 0.5, 0.8, 0.7).T, "bias": np.maximum(w["bias"], 0)})
    assert not np.allclose(stepped["weight"], want["weight"])       # the constraint moved it


def test_conv2d_kernel_per_filter():
    layer = L.Conv2D(3, 2, padding="same", kernel_regularizer=R.L2(0.02), bias_regularizer=R.L1(0.1),
                     kernel_constraint=C.MaxNorm(0.6, axis=[0, 1, 2]), activity_regularizer=R.L1(0.01))

    def fwd(w, x):
        y = torch.nn.functional.conv2d(torch.nn.functional.pad(x.permute(0, 3, 1, 2), (0, 1, 0, 1)), w["weight"],
                                       w["bias"])
        return y.permute(0, 2, 3, 1)

    def project(w):
        k = conv2d_keras(w["weight"])
        w["weight"] = np.transpose(np_max_norm(k, 0.6, [0, 1, 2]), (3, 2, 0, 1))
        return w
    stepped, want = check_step(layer, (4, 4, 2), fwd,
                               lambda w, o: 0.02 * t_l2(w["weight"]) + 0.1 * t_l1(w["bias"]) + 0.01 * t_l1(o) / 4,
                               project)
    # each filter's norm is at most 0.6
    assert np.sqrt((want["weight"] ** 2).sum(axis=(1, 2, 3))).max() <= 0.6 + 1e-6


def test_conv1d_kernel_unit_norm():
    layer = L.Conv1D(2, 3, kernel_regularizer=R.L2(0.1), kernel_constraint=C.UnitNorm(axis=[0, 1]))

    def fwd(w, x):
        return torch.nn.functional.conv1d(x.permute(0, 2, 1), w["weight"], w["bias"]).permute(0, 2, 1)

    def project(w):
        k = np.transpose(w["weight"], (2, 1, 0))                     # Keras's (k, C, F)
        w["weight"] = np.transpose(np_unit_norm(k, [0, 1]), (2, 1, 0))
        return w
    check_step(layer, (6, 2), fwd, lambda w, o: 0.1 * t_l2(w["weight"]), project)


def test_conv2d_transpose_kernel():
    layer = L.Conv2DTranspose(2, 2, strides=2, kernel_regularizer=R.L1(0.05), kernel_constraint=C.MaxNorm(0.7))

    def fwd(w, x):
        y = torch.nn.functional.conv_transpose2d(x.permute(0, 3, 1, 2), w["weight"], w["bias"], stride=2)
        return y.permute(0, 2, 3, 1)

    def project(w):
        k = np.transpose(w["weight"], (2, 3, 1, 0))                  # Keras's (kh, kw, filters, in)
        w["weight"] = np.transpose(np_max_norm(k, 0.7, 0), (3, 2, 0, 1))
        return w
    check_step(layer, (3, 3, 2), fwd, lambda w, o: 0.05 * t_l1(w["weight"]), project)


def test_orthogonal_regularizer_on_a_dense_kernel_in_keras_layout():
    def ortho(w, factor):
        u = w / torch.clamp(torch.sqrt((w ** 2).sum(dim=1, keepdim=True)), min=EPS)
        p = u @ u.T
        n = w.shape[0]
        return factor * 0.5 * (p * (1 - torch.eye(n, dtype=T))).abs().sum() / (n * (n - 1) / 2)
    # rows of Keras's kernel (in, units) are the inputs: the stored weight's columns
    check_step(L.Dense(3, kernel_regularizer=R.OrthogonalRegularizer(2.0)), (4,),
               lambda w, x: x @ w["weight"].T + w["bias"], lambda w, o: ortho(w["weight"].T, 2.0), lambda w: w)


def test_embedding():
    layer = L.Embedding(6, 3, embeddings_regularizer=R.L2(0.1), embeddings_constraint=C.UnitNorm(axis=1))
    x = np.random.default_rng(1).integers(0, 6, size=(4, 5)).astype(np.int32)
    check_step(layer, (5,), lambda w, x: w["weight"][x], lambda w, o: 0.1 * t_l2(w["weight"]),
               lambda w: {"weight": np_unit_norm(w["weight"], 1)}, x=x)


def test_prelu_alpha():
    layer = L.PReLU(alpha_regularizer=R.L1(0.2), alpha_constraint=C.NonNeg(), activity_regularizer=R.L2(0.05))
    check_step(layer, (6,), lambda w, x: torch.relu(x) - w["alpha"] * torch.relu(-x),
               lambda w, o: 0.2 * t_l1(w["alpha"]) + 0.05 * t_l2(o) / 4,
               lambda w: {"alpha": np.maximum(w["alpha"], 0)}, lr=0.5)


def _torch_lstm(w, x, use_bias=True):
    n, steps, _ = x.shape
    u = w["weight_hh"].shape[1]
    h = torch.zeros(n, u, dtype=T)
    c = torch.zeros(n, u, dtype=T)
    for t in range(steps):
        z = x[:, t] @ w["weight_ih"].T + h @ w["weight_hh"].T
        if use_bias:
            z = z + w["bias_ih"] + w["bias_hh"]
        i, f, g, o = (z[:, k * u:(k + 1) * u] for k in range(4))
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return h


def _torch_gru(w, x):
    n, steps, _ = x.shape
    u = w["weight_hh"].shape[1]
    h = torch.zeros(n, u, dtype=T)
    for t in range(steps):
        a = x[:, t] @ w["weight_ih"].T + w["bias_ih"]
        b = h @ w["weight_hh"].T + w["bias_hh"]
        r = torch.sigmoid(a[:, :u] + b[:, :u])
        z = torch.sigmoid(a[:, u:2 * u] + b[:, u:2 * u])
        cand = torch.tanh(a[:, 2 * u:] + r * b[:, 2 * u:])
        h = (1 - z) * cand + z * h
    return h


def test_lstm_options_act_on_keras_kernels_and_its_one_bias():
    layer = L.LSTM(3, kernel_regularizer=R.L2(0.05), recurrent_regularizer=R.L1(0.02), bias_regularizer=R.L2(0.3),
                   kernel_constraint=C.MaxNorm(0.9), recurrent_constraint=C.UnitNorm(axis=1),
                   bias_constraint=C.MaxNorm(0.5))

    def project(w):
        w["weight_ih"] = np_max_norm(w["weight_ih"].T, 0.9).T              # Keras's (features, 4 units)
        w["weight_hh"] = np_unit_norm(w["weight_hh"].T, 1).T
        # Keras's bias is the sum; bias_ih takes the difference, bias_hh is left as it is
        w["bias_ih"] = np_max_norm(w["bias_ih"] + w["bias_hh"], 0.5) - w["bias_hh"]
        return w
    stepped, want = check_step(
        layer, (4, 2), _torch_lstm,
        lambda w, o: 0.05 * t_l2(w["weight_ih"]) + 0.02 * t_l1(w["weight_hh"]) + 0.3 * t_l2(w["bias_ih"] +
                                                                                              w["bias_hh"]),
        project, tol=2e-5)
    assert np.linalg.norm(want["bias_ih"] + want["bias_hh"]) <= 0.5 + 1e-6
    np.testing.assert_array_equal(want["bias_hh"], stepped["bias_hh"])


def test_gru_bias_options_take_its_two_biases_as_rows():
    layer = L.GRU(2, bias_regularizer=R.L1(0.2), bias_constraint=C.MaxNorm(0.3, axis=0))

    def project(w):
        both = np_max_norm(np.stack([w["bias_ih"], w["bias_hh"]]), 0.3, 0)           # Keras's (2, 3 units)
        w["bias_ih"], w["bias_hh"] = both[0], both[1]
        return w
    check_step(layer, (3, 2), _torch_gru, lambda w, o: 0.2 * (t_l1(w["bias_ih"]) + t_l1(w["bias_hh"])), project,
               tol=2e-5)


@pytest.mark.parametrize("cls", ["LayerNormalization", "BatchNormalization"])
def test_normalization_gamma_and_beta(cls):
    layer = getattr(L, cls)(gamma_regularizer=R.L2(0.3), beta_regularizer=R.L1(0.2), gamma_constraint=C.NonNeg(),
                            beta_constraint=C.MaxNorm(0.1))

    def fwd(w, x):
        if cls == "LayerNormalization":
            mean, var = x.mean(dim=-1, keepdim=True), x.var(dim=-1, unbiased=False, keepdim=True)
        else:
            mean, var = x.mean(dim=0, keepdim=True), x.var(dim=0, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-3) * w["weight"] + w["bias"]

    def project(w):
        w["weight"] = np.maximum(w["weight"], 0)
        w["bias"] = np_max_norm(w["bias"], 0.1)
        w.pop("running_mean", None)
        w.pop("running_var", None)
        return w

    def init(name, shape, rng):
        return rng.uniform(0.5, 2.0, size=shape) if name == "running_var" else None
    check_step(layer, (5,), fwd, lambda w, o: 0.3 * t_l2(w["weight"]) + 0.2 * t_l1(w["bias"]), project,
               lr=2.0, weight_init=init, tol=2e-5, inference_same=cls == "LayerNormalization")


def test_bidirectional_copies_the_options_to_both_directions():
    b = L.Bidirectional(L.LSTM(2, kernel_regularizer=R.L2(0.6), kernel_constraint=C.NonNeg()))
    m = pg.Sequential([b], input_shape=(3, 2))
    m.compile(optimizer=pg.optimizers.SGD(1.0), loss="mse")
    w = {k: (np.abs(v) + 0.1) for k, v in m.get_weights().items()}
    m.set_weights(w)
    x = np.random.default_rng(3).normal(size=(4, 3, 2)).astype(np.float32)
    y = np.zeros((4, 4), np.float32)
    penalty = 0.6 * sum(float((v.astype(np.float64) ** 2).sum()) for k, v in w.items() if k.endswith("weight_ih"))
    data = float(np.mean(m.predict(x).astype(np.float64) ** 2))
    np.testing.assert_allclose(m.evaluate(x, y, verbose=0), data + penalty, rtol=1e-5)
    m.fit(x, y, verbose=0, batch_size=4)
    for k, v in m.get_weights().items():
        if k.endswith("weight_ih"):
            assert (v >= 0).all() and (v == 0).any(), k
    m.free()


def test_multi_head_attention_options_see_keras_einsum_layouts():
    heads, kd, dim = 2, 3, 4
    layer = L.MultiHeadAttention(heads, kd, kernel_regularizer=R.L2(0.05), bias_regularizer=R.L1(0.1),
                                 kernel_constraint=C.MaxNorm(0.8, axis=0), bias_constraint=C.UnitNorm(axis=-1))

    def fwd(w, x):
        n, s, _ = x.shape

        def proj(p):
            return (x @ w[f"{p}_proj.weight"].T + w[f"{p}_proj.bias"]).reshape(n, s, heads, kd).transpose(1, 2)
        q, k, v = proj("q"), proj("k"), proj("v")
        a = torch.softmax(q @ k.transpose(-1, -2) / np.sqrt(kd), dim=-1) @ v
        return a.transpose(1, 2).reshape(n, s, heads * kd) @ w["out_proj.weight"].T + w["out_proj.bias"]

    def penalty(w, o):
        return sum(0.05 * t_l2(w[f"{p}_proj.weight"]) + 0.1 * t_l1(w[f"{p}_proj.bias"]) for p in ("q", "k", "v", "out"))

    def project(w):
        for p in ("q", "k", "v"):
            kk = np.transpose(w[f"{p}_proj.weight"].reshape(heads, kd, dim), (2, 0, 1))      # Keras's (in, H, k)
            w[f"{p}_proj.weight"] = np.transpose(np_max_norm(kk, 0.8, 0), (1, 2, 0)).reshape(heads * kd, dim)
            w[f"{p}_proj.bias"] = np_unit_norm(w[f"{p}_proj.bias"].reshape(heads, kd), 1).reshape(-1)
        ko = np.transpose(w["out_proj.weight"].reshape(dim, heads, kd), (1, 2, 0))              # Keras's (H, v, out)
        w["out_proj.weight"] = np.transpose(np_max_norm(ko, 0.8, 0), (2, 0, 1)).reshape(dim, heads * kd)
        w["out_proj.bias"] = np_unit_norm(w["out_proj.bias"], -1)
        return w
    check_step(layer, (3, dim), fwd, penalty, project, tol=2e-5)


def test_gru_reset_before_bias_options_act_on_its_one_bias():
    layer = L.GRU(2, reset_after=False, bias_regularizer=R.L2(0.4), bias_constraint=C.MaxNorm(0.3))

    def fwd(w, x):
        n, steps, _ = x.shape
        u = 2
        h = torch.zeros(n, u, dtype=T)
        for t in range(steps):
            a = x[:, t] @ w["weight_ih"].T + w["bias_ih"]
            r = torch.sigmoid(a[:, :u] + h @ w["weight_hh"][:u].T)
            z = torch.sigmoid(a[:, u:2 * u] + h @ w["weight_hh"][u:2 * u].T)
            cand = torch.tanh(a[:, 2 * u:] + (r * h) @ w["weight_hh"][2 * u:].T)
            h = (1 - z) * cand + z * h
        return h
    check_step(layer, (3, 2), fwd, lambda w, o: 0.4 * t_l2(w["bias_ih"]),
               lambda w: {**w, "bias_ih": np_max_norm(w["bias_ih"], 0.3)}, tol=2e-5)
