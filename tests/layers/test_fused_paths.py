"""The layers' two graph forms: pyggml's fused CPU ops (what a model on the CPU
builds) and the composed forms other backends build.  Like every test here it
runs once per form (conftest's ``graph_path``): harness cases for what the
fused ops changed (activations fused into Dense and convolutions, dilated and
causal convolutions, padding masks in LSTM, GRU and attention, BatchNormalization
in inference mode inside a training graph), which ops each form's graphs hold,
models saved under one form loading under the other, BatchNormalization's
running statistics over several steps, and the graph of a long bidirectional
LSTM stack."""

import math

import numpy as np
import pytest

import pyggml as pg
from pyggml import _scope
from pyggml.models import executors
from harness import ACTIVATIONS, LayerCase, harness_tests
from test_core_layers import activation_ref, dense_ref
from test_recurrent import gru_ref, lstm_ref

L = pg.layers


# --- references -------------------------------------------------------------------------

def conv_ref(strides=(1, 1), dilation=(1, 1), padding="valid", activation=None, rank=2):
    """Keras's Conv2D / Conv1D (rank 1: an image of height 1) with PyTorch's weight layout."""
    def ref(hs, w, training):
        x = hs[0] if rank == 2 else hs[0][:, None]
        kern = w["weight"] if rank == 2 else w["weight"][:, :, None, :]          # (f, c, kh, kw)
        _, _, kh, kw = kern.shape
        (sh, sw), (dh, dw) = strides, dilation
        ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        if padding == "causal":
            x = np.pad(x, ((0, 0), (0, 0), (ekw - 1, 0), (0, 0)))
        elif padding == "same":
            pads = []
            for size, k, s in ((x.shape[1], ekh, sh), (x.shape[2], ekw, sw)):
                out = -(-size // s)
                total = max((out - 1) * s + k - size, 0)
                pads.append((total // 2, total - total // 2))
            x = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
        oh, ow = (x.shape[1] - ekh) // sh + 1, (x.shape[2] - ekw) // sw + 1
        out = np.zeros((x.shape[0], oh, ow, kern.shape[0]))
        for i in range(oh):
            for j in range(ow):
                patch = x[:, i * sh:i * sh + ekh:dh, j * sw:j * sw + ekw:dw, :]
                out[:, i, j, :] = np.einsum("nhwc,fchw->nf", patch, kern)
        y = ACTIVATIONS[activation](out + w.get("bias", 0.0))
        return y if rank == 2 else y[:, 0]
    return ref


# one mask row per position in the batch (the harness's batches hold 3 or 6 rows): a padded
# step anywhere keeps the recurrent state; the last row is all padding
STEP_MASK = np.array([[1, 1, 1, 0],
                      [1, 0, 1, 1],
                      [0, 0, 0, 0]], dtype=np.float32)
# attention: every row keeps at least one key (a row without any attends uniformly)
KEY_MASK = np.array([[1, 1, 0, 0, 1],
                     [0, 1, 1, 1, 1],
                     [1, 0, 0, 0, 0]], dtype=np.float32)


def _rows(mask, n):
    return mask[np.arange(n) % len(mask)]


def _sub(w, prefix):
    return {k[len(prefix) + 1:]: v for k, v in w.items() if k.startswith(prefix + ".")}


def masked_rnn_ref(kind, return_sequences, go_backwards=False):
    """LSTM or GRU where a padded step (mask 0) leaves the state as it was (Keras)."""
    one_step = {"lstm": lstm_ref, "gru": gru_ref}[kind](True)

    def ref(hs, w, training):
        x = hs[0]
        n, steps, _ = x.shape
        m = _rows(STEP_MASK, n)
        w = _sub(w, "rnn")
        units = w["weight_hh"].shape[1]
        h, c = np.zeros((n, units)), np.zeros((n, units))
        seq = []
        for t in (range(steps - 1, -1, -1) if go_backwards else range(steps)):
            xt = x[:, t]
            z = xt @ w["weight_ih"].T + h @ w["weight_hh"].T
            if kind == "lstm":
                z = z + w["bias_ih"] + w["bias_hh"]
                i, f, g, o = (z[:, k * units:(k + 1) * units] for k in range(4))
                sig = ACTIVATIONS["sigmoid"]
                c_new = sig(f) * c + sig(i) * np.tanh(g)
                h_new = sig(o) * np.tanh(c_new)
            else:
                # the GRU's step from the unmasked reference, state h, one step long
                h_new = _gru_step(one_step, xt, h, w)
                c_new = c
            keep = m[:, t][:, None]
            h = keep * h_new + (1 - keep) * h
            c = keep * c_new + (1 - keep) * c
            seq.append(h)
        return np.stack(seq, axis=1) if return_sequences else h
    return ref


def _gru_step(_, xt, h, w):
    units = w["weight_hh"].shape[1]
    a = xt @ w["weight_ih"].T + w.get("bias_ih", 0.0)
    b = h @ w["weight_hh"].T + w.get("bias_hh", 0.0)
    sig = ACTIVATIONS["sigmoid"]
    r = sig(a[:, :units] + b[:, :units])
    z = sig(a[:, units:2 * units] + b[:, units:2 * units])
    cand = np.tanh(a[:, 2 * units:] + r * b[:, 2 * units:])
    return (1 - z) * cand + z * h


def masked_mha_ref(num_heads, key_dim, cross):
    def ref(hs, w, training):
        q = hs[0]
        v = hs[1] if cross else q
        w = _sub(w, "att")

        def linear(x, name):
            return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]
        n, tq, tv = q.shape[0], q.shape[1], v.shape[1]
        qh = linear(q, "q_proj").reshape(n, tq, num_heads, key_dim)
        kh = linear(v, "k_proj").reshape(n, tv, num_heads, key_dim)
        vh = linear(v, "v_proj").reshape(n, tv, num_heads, key_dim)
        scores = np.einsum("nihd,njhd->nhij", qh, kh) / math.sqrt(key_dim)
        real = _rows(KEY_MASK, n)[:, None, None, :tv] > 0
        scores = np.where(real, scores, -np.inf)
        probs = ACTIVATIONS["softmax"](scores)
        att = np.einsum("nhij,njhd->nihd", probs, vh).reshape(n, tq, num_heads * key_dim)
        return linear(att, "out_proj")
    return ref


def frozen_bn_ref(eps=1e-3):
    def ref(hs, w, training):
        w = _sub(w, "bn")
        return (hs[0] - w["running_mean"]) / np.sqrt(w["running_var"] + eps) * w["weight"] + w["bias"]
    return ref


def _bn_weights(name, shape, rng):
    if name.endswith("running_var"):
        return rng.uniform(0.5, 2.0, size=shape)
    return None


# --- wrappers that hand the layers a mask or a mode ------------------------------------------

@pg.saving.register_serializable(package="tests")
class MaskedRNN(L.Layer):
    """An LSTM or GRU called with a constant padding mask (STEP_MASK)."""

    def __init__(self, cell="lstm", units=2, return_sequences=False, go_backwards=False, **kwargs):
        super().__init__(**kwargs)
        self.cell, self.units = cell, units
        self.return_sequences, self.go_backwards = return_sequences, go_backwards
        cls = L.LSTM if cell == "lstm" else L.GRU
        self.rnn = cls(units, return_sequences=return_sequences, go_backwards=go_backwards)

    def call(self, inputs, training=None):
        n, steps, _ = inputs.shape
        return self.rnn(inputs, mask=pg.ops.constant(_rows(STEP_MASK, n)[:, :steps]))

    def get_config(self):
        c = super().get_config()
        c.update(cell=self.cell, units=self.units, return_sequences=self.return_sequences,
                 go_backwards=self.go_backwards)
        return c


@pg.saving.register_serializable(package="tests")
class MaskedAttention(L.Layer):
    """MultiHeadAttention whose keys carry a constant padding mask (KEY_MASK)."""

    def __init__(self, num_heads=2, key_dim=2, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.key_dim = num_heads, key_dim
        self.att = L.MultiHeadAttention(num_heads, key_dim)

    def call(self, inputs, training=None):
        xs = inputs if isinstance(inputs, list) else [inputs]
        n, tv = xs[-1].shape[0], xs[-1].shape[1]
        mask = pg.ops.constant(_rows(KEY_MASK, n)[:, :tv])
        if len(xs) == 1:
            # the keys' mask only (``self.att(x, mask=m)`` masks the queries too, as Keras's)
            return self.att(xs[0], xs[0], value_mask=mask)
        return self.att(xs, mask=[None, mask])

    def get_config(self):
        c = super().get_config()
        c.update(num_heads=self.num_heads, key_dim=self.key_dim)
        return c


@pg.saving.register_serializable(package="tests")
class FrozenBatchNorm(L.Layer):
    """BatchNormalization called in inference mode, also inside a training graph."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.bn = L.BatchNormalization()

    def call(self, inputs, training=None):
        return self.bn(inputs, training=False)


CASES = [
    # activations the fused ops apply themselves, and one they do not
    LayerCase("fp_dense_sigmoid", lambda: L.Dense(3, activation="sigmoid"), [(4,)], dense_ref("sigmoid")),
    LayerCase("fp_dense_elu", lambda: L.Dense(3, activation="elu"), [(2, 4)], dense_ref("elu")),
    LayerCase("fp_dense_leaky_relu", lambda: L.Dense(3, activation="leaky_relu"), [(4,)], dense_ref("leaky_relu")),
    LayerCase("fp_dense_gelu", lambda: L.Dense(3, activation="gelu"), [(4,)], dense_ref("gelu")),
    LayerCase("fp_dense_silu_nobias", lambda: L.Dense(3, activation="silu", use_bias=False), [(4,)],
              dense_ref("silu", use_bias=False)),
    LayerCase("fp_elu_layer_alpha1", lambda: L.ELU(), [(5,)], activation_ref("elu")),
    LayerCase("fp_leaky_relu_layer_default", lambda: L.LeakyReLU(), [(5,)],
              lambda hs, w, t: np.where(hs[0] > 0, hs[0], 0.3 * hs[0])),
    LayerCase("fp_activation_tanh_images", lambda: L.Activation("tanh"), [(2, 3, 2)], activation_ref("tanh")),
    # convolutions: dilation, causal padding, activations fused or not
    LayerCase("fp_conv2d_dilated_same_elu", lambda: L.Conv2D(2, 2, padding="same", dilation_rate=2,
                                                             activation="elu"),
              [(4, 5, 2)], conv_ref(dilation=(2, 2), padding="same", activation="elu")),
    LayerCase("fp_conv2d_gelu_stride", lambda: L.Conv2D(3, (2, 3), strides=(2, 1), activation="gelu"),
              [(5, 4, 1)], conv_ref(strides=(2, 1), activation="gelu")),
    LayerCase("fp_conv2d_sigmoid_nobias", lambda: L.Conv2D(2, 2, activation="sigmoid", use_bias=False),
              [(3, 3, 2)], conv_ref(activation="sigmoid")),
    LayerCase("fp_conv1d_causal", lambda: L.Conv1D(2, 3, padding="causal"), [(5, 2)],
              conv_ref(padding="causal", rank=1)),
    LayerCase("fp_conv1d_causal_dilated_relu", lambda: L.Conv1D(2, 2, padding="causal", dilation_rate=2,
                                                                activation="relu"),
              [(6, 1)], conv_ref(dilation=(1, 2), padding="causal", activation="relu", rank=1)),
    LayerCase("fp_conv1d_causal_stride2", lambda: L.Conv1D(2, 3, strides=2, padding="causal"), [(7, 2)],
              conv_ref(strides=(1, 2), padding="causal", rank=1)),
    LayerCase("fp_conv1d_same_dilated_leaky", lambda: L.Conv1D(3, 3, padding="same", dilation_rate=2,
                                                               activation="leaky_relu"),
              [(6, 2)], conv_ref(dilation=(1, 2), padding="same", activation="leaky_relu", rank=1)),
    # padding masks in the recurrent cells (padded steps anywhere, a row of padding only)
    LayerCase("fp_lstm_masked", lambda: MaskedRNN("lstm", 2), [(4, 2)], masked_rnn_ref("lstm", False)),
    LayerCase("fp_lstm_masked_seq", lambda: MaskedRNN("lstm", 3, return_sequences=True), [(4, 2)],
              masked_rnn_ref("lstm", True)),
    LayerCase("fp_lstm_masked_backwards", lambda: MaskedRNN("lstm", 2, go_backwards=True), [(4, 1)],
              masked_rnn_ref("lstm", False, go_backwards=True)),
    LayerCase("fp_gru_masked", lambda: MaskedRNN("gru", 2), [(4, 2)], masked_rnn_ref("gru", False)),
    LayerCase("fp_gru_masked_seq_backwards", lambda: MaskedRNN("gru", 2, return_sequences=True,
                                                               go_backwards=True),
              [(3, 2)], masked_rnn_ref("gru", True, go_backwards=True)),
    # attention with a key padding mask
    LayerCase("fp_attention_masked", lambda: MaskedAttention(2, 2), [(5, 3)], masked_mha_ref(2, 2, False),
              extra={"zero_gradient": ("att.k_proj.bias",)}),
    LayerCase("fp_attention_masked_cross", lambda: MaskedAttention(1, 3), [(2, 3), (4, 2)],
              masked_mha_ref(1, 3, True), extra={"zero_gradient": ("att.k_proj.bias",)}),
    # BatchNormalization in inference mode inside the training graph: gamma and beta train
    LayerCase("fp_batchnorm_inference_mode", lambda: FrozenBatchNorm(), [(2, 3)], frozen_bn_ref(),
              weight_init=_bn_weights),
    LayerCase("fp_layernorm_images", lambda: L.LayerNormalization(), [(2, 2, 3)],
              lambda hs, w, t: (hs[0] - hs[0].mean(-1, keepdims=True)) /
              np.sqrt(hs[0].var(-1, keepdims=True) + 1e-3) * w["weight"] + w["bias"]),
    LayerCase("fp_concatenate_images_axis2", lambda: L.Concatenate(axis=2), [(2, 1, 2), (2, 3, 2), (2, 2, 2)],
              lambda hs, w, t: np.concatenate(hs, axis=2)),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


# --- which ops the graphs hold ------------------------------------------------------------

FUSED_OPS = {"CONV_CL", "POOL_CL", "BATCH_NORM", "BIAS_ACT", "LSTM_CELL", "GRU_CELL", "NORM", "CONCAT",
             "UPSCALE", "UNARY_BACK"}


def _mixed_model():
    inp = pg.Input((6, 6, 2))
    h = L.Conv2D(4, 3, padding="same", activation="relu")(inp)
    h = L.MaxPooling2D()(h)                                          # (3, 3, 4)
    h = L.BatchNormalization()(h)
    h = L.UpSampling2D()(h)                                          # (6, 6, 4)
    h = L.Conv2D(3, 2, strides=2, activation="tanh")(h)              # (3, 3, 3)
    s = L.Reshape((9, 3))(h)
    a = L.LSTM(4, return_sequences=True)(s)
    b = L.GRU(2, return_sequences=True)(s)
    h = L.LayerNormalization()(L.Concatenate()([a, b]))
    h = L.GlobalAveragePooling1D()(h)
    out = L.Dense(2, activation="sigmoid")(h)
    return pg.Model(inp, out).compile(optimizer="adam", loss="mse", seed=0)


def _data(n=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6, 6, 2)).astype(np.float32), rng.uniform(size=(n, 2)).astype(np.float32)


def test_cpu_graphs_hold_the_fused_ops_and_the_composed_forms_none(graph_path):
    m = _mixed_model()
    try:
        x, y = _data()
        m.fit(x, y, epochs=1, batch_size=4, verbose=0)
        m.predict(x)
        kinds = {k[0]: e for k, e in m._rt.graphs.items()}
        assert {"train", "predict"} <= set(kinds)
        for kind in ("train", "predict"):
            assert kinds[kind].g.fused_ok                           # the model is on the CPU
            ops = {n.op for n in kinds[kind].graph.nodes()}
            if graph_path == "fused":
                want = FUSED_OPS - ({"UNARY_BACK"} if kind == "predict" else set()) - \
                    ({"BATCH_NORM"} if kind == "predict" else set())
                assert want <= ops, f"{kind}: missing {sorted(want - ops)}"
                assert not ops & {"IM2COL", "POOL_2D", "SOFTPLUS", "SUM_ROWS"}, sorted(ops)
            else:
                assert not ops & FUSED_OPS, sorted(ops & FUSED_OPS)
                assert "IM2COL" in ops
    finally:
        m.free()


def test_the_builder_says_where_its_graph_computes():
    assert executors.GraphBuilder(None, training=False).fused_ok is False      # unless told
    assert executors.GraphBuilder(None, training=False, fused_ok=True).fused_ok is True
    assert not _scope.fused()                                                  # no graph being built
    seen = []

    class Probe(L.Layer):
        def call(self, inputs, training=None):
            seen.append(_scope.fused())
            return inputs

    m = pg.Sequential([Probe()], input_shape=(2,)).compile(loss="mse")
    try:
        m.predict(np.zeros((1, 2), np.float32))
    finally:
        m.free()
    assert seen and seen[-1] is (not _scope.FORCE_COMPOSED)


def test_a_model_saved_from_one_form_loads_and_predicts_alike_in_the_other(graph_path, tmp_path):
    # the public weight layouts are the same in both forms
    x, y = _data(6, seed=1)
    m = _mixed_model()
    try:
        m.fit(x, y, epochs=2, batch_size=3, verbose=0, shuffle=False)
        p = m.predict(x)
        ev = m.evaluate(x, y, return_dict=True)["loss"]
        m.save(tmp_path / "m.gguf")
    finally:
        m.free()
    old = _scope.FORCE_COMPOSED
    _scope.FORCE_COMPOSED = not old
    try:
        again = pg.load_model(tmp_path / "m.gguf")
        try:
            np.testing.assert_allclose(again.predict(x), p, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(again.evaluate(x, y, return_dict=True)["loss"], ev, rtol=1e-4)
            again.fit(x, y, epochs=1, batch_size=3, verbose=0)          # and it trains on
        finally:
            again.free()
    finally:
        _scope.FORCE_COMPOSED = old


def test_batchnorm_running_statistics_move_after_each_step():
    # BatchNormalization first: its batch statistics are those of the data, whatever the
    # optimizer does; every step's update must read that step's statistics (the fused op
    # writes them when it runs: an update computed before it would read the last step's)
    rng = np.random.default_rng(5)
    batches = [rng.normal(loc=i, scale=1 + i, size=(5, 3, 2)).astype(np.float32) for i in range(3)]
    m = pg.Sequential([L.BatchNormalization(momentum=0.8, name="bn"), L.Flatten(), L.Dense(1)],
                      input_shape=(3, 2)).compile(optimizer="sgd", loss="mse", seed=0)
    try:
        x = np.concatenate(batches)
        m.fit(x, np.zeros((len(x), 1), np.float32), epochs=1, batch_size=5, shuffle=False, verbose=0)
        mean, var = np.zeros(2), np.ones(2)
        for bt in batches:
            flat = bt.astype(np.float64).reshape(-1, 2)
            mean = 0.8 * mean + 0.2 * flat.mean(axis=0)
            var = 0.8 * var + 0.2 * flat.var(axis=0)
        w = m.get_weights()
        np.testing.assert_allclose(w["bn.running_mean"], mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w["bn.running_var"], var, rtol=1e-5, atol=1e-6)
    finally:
        m.free()


def test_a_long_bidirectional_lstm_stack_builds_and_trains(graph_path):
    # keras-io's IMDB shape, small: 200 steps, two bidirectional LSTMs (800 unrolled cells)
    inp = pg.Input((200,), dtype="int32")
    h = L.Embedding(50, 4)(inp)
    h = L.Bidirectional(L.LSTM(3, return_sequences=True))(h)
    h = L.Bidirectional(L.LSTM(3))(h)
    m = pg.Model(inp, L.Dense(1, activation="sigmoid")(h)).compile(optimizer="adam", loss="binary_crossentropy",
                                                                    seed=0)
    try:
        rng = np.random.default_rng(0)
        x = rng.integers(1, 50, size=(4, 200)).astype(np.int32)
        y = (x[:, :5].mean(axis=1) > 25).astype(np.float32)[:, None]
        hist = m.fit(x, y, epochs=3, batch_size=4, verbose=0)
        assert all(np.isfinite(hist.history["loss"]))
        (step,) = [e for k, e in m._rt.graphs.items() if k[0] == "train"]
        n = step.graph.n_nodes
        # the fused cells: a few nodes per cell and direction, forward and backward
        assert n < (25000 if graph_path == "fused" else 60000), n
    finally:
        m.free()


@pytest.mark.parametrize("make", [
    lambda: L.Conv2D(3, 2, activation="softmax"),
    lambda: L.Conv2DTranspose(3, 2, strides=2, activation="softmax"),
    lambda: L.Conv1D(3, 2, padding="causal", activation="softmax"),
], ids=["conv2d", "conv2d_transpose", "conv1d_causal"])
def test_convolutions_give_a_cross_entropy_their_logits(make):
    # the loss trains on the layer's pre-activation: the loss fit reports is the
    # cross-entropy of the softmax predict gives, on every cell
    rng = np.random.default_rng(6)
    layer = make()
    shape = (4, 3) if isinstance(layer, L.Conv1D) else (3, 3, 2)
    m = pg.Sequential([layer], input_shape=shape).compile(optimizer="sgd", loss="categorical_crossentropy", seed=0)
    try:
        assert m._compile_spec.logits[0]                  # the loss takes the layer's pre_activation
        x = rng.normal(size=(4,) + shape).astype(np.float32)
        p = m.predict(x).astype(np.float64)
        y = np.eye(3)[rng.integers(0, 3, p.shape[:-1])].astype(np.float32)
        np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-5)
        want = float(np.mean(-(y * np.log(p)).sum(-1)))
        got = m.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"][0]
        np.testing.assert_allclose(got, want, rtol=1e-4)
    finally:
        m.free()
