"""LSTM and GRU through the layer harness, plus their PyTorch conventions:
weight names, shapes and gate orders, Keras' initialisation, bad inputs."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

B = 3


def lstm_ref(return_sequences, activation="tanh", recurrent_activation="sigmoid"):
    act, rec = ACTIVATIONS[activation], ACTIVATIONS[recurrent_activation]

    def ref(hs, w, training):
        x = hs[0]
        n, steps, _ = x.shape
        units = w["weight_hh"].shape[1]
        h = np.zeros((n, units))
        c = np.zeros((n, units))
        seq = []
        for t in range(steps):
            z = x[:, t] @ w["weight_ih"].T + h @ w["weight_hh"].T
            if "bias_ih" in w:
                z = z + w["bias_ih"] + w["bias_hh"]
            i, f, g, o = (z[:, k * units:(k + 1) * units] for k in range(4))
            c = rec(f) * c + rec(i) * act(g)
            h = rec(o) * act(c)
            seq.append(h)
        return np.stack(seq, axis=1) if return_sequences else h
    return ref


def gru_ref(return_sequences, activation="tanh", recurrent_activation="sigmoid", reset_after=True):
    act, rec = ACTIVATIONS[activation], ACTIVATIONS[recurrent_activation]

    def ref(hs, w, training):
        x = hs[0]
        n, steps, _ = x.shape
        units = w["weight_hh"].shape[1]
        h = np.zeros((n, units))
        seq = []
        for t in range(steps):
            a = x[:, t] @ w["weight_ih"].T + w.get("bias_ih", 0.0)
            b = h @ w["weight_hh"].T + w.get("bias_hh", 0.0)
            r = rec(a[:, :units] + b[:, :units])
            z = rec(a[:, units:2 * units] + b[:, units:2 * units])
            if not reset_after:             # Keras's reset_after=False: the reset gate before the product
                b = np.concatenate([b[:, :2 * units], (r * h) @ w["weight_hh"][2 * units:].T], axis=1)
                r = np.ones_like(r)
            cand = act(a[:, 2 * units:] + r * b[:, 2 * units:])
            h = (1 - z) * cand + z * h
            seq.append(h)
        return np.stack(seq, axis=1) if return_sequences else h
    return ref


def simple_rnn_ref(return_sequences, activation="tanh"):
    act = ACTIVATIONS[activation]

    def ref(hs, w, training):
        x = hs[0]
        n, steps, _ = x.shape
        h = np.zeros((n, w["weight_hh"].shape[1]))
        seq = []
        for t in range(steps):
            h = act(x[:, t] @ w["weight_ih"].T + h @ w["weight_hh"].T + w.get("bias_ih", 0.0) + w.get("bias_hh", 0.0))
            seq.append(h)
        return np.stack(seq, axis=1) if return_sequences else h
    return ref


CASES = [
    LayerCase("simple_rnn", lambda: pg.layers.SimpleRNN(3), [(4, 2)], simple_rnn_ref(False)),
    LayerCase("simple_rnn_seq_silu", lambda: pg.layers.SimpleRNN(2, activation="silu", return_sequences=True),
              [(3, 3)], simple_rnn_ref(True, "silu")),
    LayerCase("simple_rnn_nobias", lambda: pg.layers.SimpleRNN(2, use_bias=False), [(3, 2)],
              simple_rnn_ref(False)),
    LayerCase("lstm", lambda: pg.layers.LSTM(3), [(4, 2)], lstm_ref(False)),
    LayerCase("lstm_seq", lambda: pg.layers.LSTM(2, return_sequences=True), [(3, 3)], lstm_ref(True)),
    LayerCase("lstm_nobias", lambda: pg.layers.LSTM(2, use_bias=False), [(3, 2)], lstm_ref(False)),
    LayerCase("gru", lambda: pg.layers.GRU(3), [(4, 2)], gru_ref(False)),
    LayerCase("gru_seq", lambda: pg.layers.GRU(2, return_sequences=True), [(3, 3)], gru_ref(True)),
    LayerCase("gru_nobias", lambda: pg.layers.GRU(2, use_bias=False), [(3, 2)], gru_ref(False)),
    LayerCase("gru_reset_before", lambda: pg.layers.GRU(3, reset_after=False), [(4, 2)], gru_ref(False, reset_after=False)),
    LayerCase("gru_reset_before_seq_nobias", lambda: pg.layers.GRU(2, reset_after=False, use_bias=False,
                                                                   return_sequences=True), [(3, 2)],
              gru_ref(True, reset_after=False)),
    # sequence outputs are joined pairwise: one step, and counts that are not powers of two
    LayerCase("lstm_seq_one_step", lambda: pg.layers.LSTM(3, return_sequences=True), [(1, 2)], lstm_ref(True),
              extra={"zero_gradient": ("weight_hh",)}),          # the state starts at zero
    LayerCase("gru_seq_seven_steps", lambda: pg.layers.GRU(2, return_sequences=True), [(7, 2)], gru_ref(True)),
    # other activations take the per-gate path (the defaults share one sigmoid pass)
    LayerCase("lstm_relu_hard", lambda: pg.layers.LSTM(3, activation="relu", recurrent_activation="silu"),
              [(3, 2)], lstm_ref(False, "relu", "silu")),
    LayerCase("gru_seq_elu", lambda: pg.layers.GRU(2, activation="elu", return_sequences=True), [(3, 2)],
              gru_ref(True, "elu")),
    LayerCase("lstm_seq_six_steps", lambda: pg.layers.LSTM(2, return_sequences=True), [(6, 1)], lstm_ref(True)),
]


# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


@pytest.mark.parametrize("cls, gates", [(pg.layers.LSTM, 4), (pg.layers.GRU, 3)])
def test_weights_are_named_and_shaped_as_pytorch(cls, gates):
    m = pg.Sequential([cls(5)], input_shape=(7, 3)).compile(loss="mse", seed=0)
    w = m.get_weights()
    kind = cls.__name__.lower()
    assert list(w) == [f"{kind}.weight_ih", f"{kind}.weight_hh", f"{kind}.bias_ih", f"{kind}.bias_hh"]
    assert w[f"{kind}.weight_ih"].shape == (gates * 5, 3)
    assert w[f"{kind}.weight_hh"].shape == (gates * 5, 5)
    assert w[f"{kind}.bias_ih"].shape == w[f"{kind}.bias_hh"].shape == (gates * 5,)
    assert m.count_params() == gates * 5 * (3 + 5 + 2)
    assert m.predict(np.zeros((2, 7, 3))).shape == (2, 5)
    m.free()


def test_keras_initialisation():
    units, feats = 6, 4
    m = pg.Sequential([pg.layers.LSTM(units)], input_shape=(2, feats)).compile(loss="mse", seed=5)
    w = m.get_weights()
    # orthogonal recurrent kernel: (4u, u) with orthonormal columns
    whh = w["lstm.weight_hh"].astype(np.float64)
    np.testing.assert_allclose(whh.T @ whh, np.eye(units), atol=1e-5)
    # glorot-uniform input kernel: limit sqrt(6 / (fan_in + fan_out))
    limit = np.sqrt(6.0 / (feats + 4 * units))
    assert np.all(np.abs(w["lstm.weight_ih"]) <= limit) and np.abs(w["lstm.weight_ih"]).max() > limit / 2
    # unit_forget_bias: the forget gate (second quarter, PyTorch's order) starts at 1 in bias_ih
    expected = np.zeros(4 * units)
    expected[units:2 * units] = 1.0
    np.testing.assert_array_equal(w["lstm.bias_ih"], expected)
    np.testing.assert_array_equal(w["lstm.bias_hh"], np.zeros(4 * units))
    m.free()
    m = pg.Sequential([pg.layers.LSTM(units, unit_forget_bias=False)], input_shape=(2, feats)).compile(loss="mse")
    assert not np.any(m.get_weights()["lstm.bias_ih"])
    m.free()
    m = pg.Sequential([pg.layers.GRU(units)], input_shape=(2, feats)).compile(loss="mse", seed=5)
    w = m.get_weights()
    assert not np.any(w["gru.bias_ih"]) and not np.any(w["gru.bias_hh"])
    np.testing.assert_allclose(w["gru.weight_hh"].T.astype(np.float64) @ w["gru.weight_hh"], np.eye(units),
                               atol=1e-5)
    m.free()


def test_stacked_recurrent_model_learns_a_sequence_task():
    # the sign of the sum of a sequence: needs the whole sequence
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 5, 1)).astype(np.float32)
    y = (x.sum(axis=(1, 2)) > 0).astype(np.float32)[:, None]
    pg.set_seed(0)
    m = pg.Sequential([pg.layers.GRU(8, return_sequences=True), pg.layers.LSTM(8),
                       pg.layers.Dense(1, activation="sigmoid")], input_shape=(5, 1))
    m.compile(optimizer=pg.optimizers.Adam(learning_rate=0.02), loss="binary_crossentropy", metrics=["accuracy"])
    h = m.fit(x, y, epochs=40, batch_size=32, verbose=0)
    assert h.history["loss"][-1] < 0.5 * h.history["loss"][0]
    assert m.evaluate(x, y, return_dict=True)["accuracy"] > 0.9
    m.free()


@pytest.mark.parametrize("cls", [pg.layers.LSTM, pg.layers.GRU])
def test_bad_arguments_and_shapes_are_refused(cls):
    for bad in (0, -1, 2.5, "3", True):
        with pytest.raises((TypeError, ValueError)):
            cls(bad)
    with pytest.raises(ValueError, match="activation"):
        cls(3, activation="nope")
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        pg.Sequential([cls(3)], input_shape=(4,)).compile(loss="mse")
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        pg.Sequential([cls(3)], input_shape=(2, 3, 4)).compile(loss="mse")
    m = pg.Sequential([cls(3)], input_shape=(4, 2)).compile(loss="mse")
    with pytest.raises(ValueError, match=r"\(n, 4, 2\)"):
        m.predict(np.zeros((2, 4, 5)))                 # other features: refused, naming the shape
    # (another length is taken, as Keras's Sequential takes it: its graph is made for it)
    assert m.predict(np.zeros((2, 3, 2))).shape == (2, 3)
    m.free()
    with pytest.raises(TypeError):
        cls(3, no_such_argument=True)


def test_gru_reset_before_has_keras_weights():
    m = pg.Sequential([pg.layers.GRU(3, reset_after=False)], input_shape=(2, 4)).compile(loss="mse")
    assert [(k, v.shape) for k, v in m.get_weights().items()] == [
        ("gru.weight_ih", (9, 4)), ("gru.weight_hh", (9, 3)), ("gru.bias_ih", (9,))]
    assert m.layers[0].get_config()["reset_after"] is False
    m.free()


def test_simple_rnn_matches_pytorch_rnn():
    torch = pytest.importorskip("torch")
    rnn = torch.nn.RNN(3, 4, batch_first=True).double()
    m = pg.Sequential([pg.layers.SimpleRNN(4, return_sequences=True)], input_shape=(5, 3)).compile(loss="mse")
    assert m.layers[0].name == "simple_rnn"
    m.set_weights({f"simple_rnn.{k}": getattr(rnn, f"{k}_l0").detach().numpy().astype(np.float32)
                   for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")})
    x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype(np.float32)
    want = rnn(torch.tensor(x, dtype=torch.float64))[0].detach().numpy()
    np.testing.assert_allclose(m.predict(x), want, rtol=1e-5, atol=1e-6)
    assert "recurrent_activation" not in m.layers[0].get_config()
    with pytest.raises(TypeError, match="recurrent_activation"):
        pg.layers.SimpleRNN(3, recurrent_activation="sigmoid")
    m.free()


# --- dropout and recurrent_dropout ---------------------------------------------------------

def _masks(seed, shapes, rate_in, rate_rec, n_in, n_rec, batch, feats, units):
    """The masks an eager call draws, in order: the input ones (batch, 1, features), then
    the recurrent ones (batch, units)."""
    rng = np.random.default_rng(seed)
    ins = [(rng.random((batch, 1, feats)) >= rate_in) / (1 - rate_in) for _ in range(n_in)]
    recs = [(rng.random((batch, units)) >= rate_rec) / (1 - rate_rec) for _ in range(n_rec)]
    return ins, recs


def _dropout_ref(kind, w, x, ins, recs, units):
    """The layer's output with each gate g seeing x * ins[g] and h * recs[g] (one mask
    for all gates when there is one)."""
    n, steps, _ = x.shape
    gates = {"lstm": 4, "gru": 3, "gru_reset_before": 3, "simple_rnn": 1}[kind]
    pick = (lambda ms, g: ms[g] if len(ms) > 1 else ms[0])
    h = np.zeros((n, units))
    c = np.zeros((n, units))
    sig = ACTIVATIONS["sigmoid"]
    for t in range(steps):
        xa = [x[:, t] * (pick(ins, g)[:, 0] if ins else 1.0) for g in range(gates)]
        ha = [h * (pick(recs, g) if recs else 1.0) for g in range(gates)]
        rows = [slice(g * units, (g + 1) * units) for g in range(gates)]
        a = [xa[g] @ w["weight_ih"][rows[g]].T + w["bias_ih"][rows[g]] for g in range(gates)]
        b = [ha[g] @ w["weight_hh"][rows[g]].T + (w["bias_hh"][rows[g]] if "bias_hh" in w else 0.0)
             for g in range(gates)]
        if kind == "lstm":
            i, f, gg, o = (a[k] + b[k] for k in range(4))
            c = sig(f) * c + sig(i) * np.tanh(gg)
            h = sig(o) * np.tanh(c)
        elif kind == "gru":
            r, z = sig(a[0] + b[0]), sig(a[1] + b[1])
            cand = np.tanh(a[2] + r * b[2])
            h = (1 - z) * cand + z * h
        elif kind == "gru_reset_before":
            r, z = sig(a[0] + b[0]), sig(a[1] + b[1])
            cand = np.tanh(a[2] + (r * ha[2]) @ w["weight_hh"][rows[2]].T)
            h = (1 - z) * cand + z * h
        else:
            h = np.tanh(a[0] + b[0])
    return h


@pytest.mark.parametrize("kind", ["lstm", "gru", "gru_reset_before", "simple_rnn"])
@pytest.mark.parametrize("rates", [(0.4, 0.0), (0.0, 0.3), (0.25, 0.5)])
def test_dropout_masks_follow_keras(kind, rates):
    """An eager training call: the output equals the reference with the masks the call
    drew (the library generator's draws, in order, replayed here): one input mask
    for every gate with dropout alone, a pair of masks per gate with recurrent_dropout."""
    rate_in, rate_rec = rates
    units, feats, batch, steps = 3, 4, 5, 3
    cls = {"lstm": pg.layers.LSTM, "gru": pg.layers.GRU, "gru_reset_before": pg.layers.GRU,
           "simple_rnn": pg.layers.SimpleRNN}[kind]
    extra = {"reset_after": False} if kind == "gru_reset_before" else {}
    layer = cls(units, dropout=rate_in, recurrent_dropout=rate_rec, **extra)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(batch, steps, feats)).astype(np.float32)
    layer(x)                                                       # builds it (inference: no masks)
    w = {k: rng.normal(scale=0.6, size=v.shape) for k, v in layer.get_weights().items()}
    layer.set_weights(w)
    inference = layer(x)
    np.testing.assert_allclose(inference, _dropout_ref(kind, w, x.astype(np.float64), [], [], units),
                               rtol=1e-5, atol=1e-6)
    gates = {"lstm": 4, "gru": 3, "gru_reset_before": 3, "simple_rnn": 1}[kind]
    n_in = (gates if rate_rec else 1) if rate_in else 0
    n_rec = gates if rate_rec else 0
    pg.set_seed(123)
    got = layer(x, training=True)
    ins, recs = _masks(123, None, rate_in, rate_rec, n_in, n_rec, batch, feats, units)
    want = _dropout_ref(kind, w, x.astype(np.float64), ins, recs, units)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.abs(got - inference).max() > 1e-3
    cfg = layer.get_config()
    assert (cfg["dropout"], cfg["recurrent_dropout"]) == (rate_in, rate_rec)
    assert cls.from_config(cfg).get_config() == cfg


def test_dropout_trains_and_leaves_inference_alone():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 4, 2)).astype(np.float32)
    y = rng.normal(size=(16, 3)).astype(np.float32)
    plain = pg.Sequential([pg.layers.LSTM(3)], input_shape=(4, 2)).compile(optimizer=pg.optimizers.SGD(0.0),
                                                                           loss="mse")
    dropped = pg.Sequential([pg.layers.LSTM(3, dropout=0.5, recurrent_dropout=0.5)], input_shape=(4, 2))
    dropped.compile(optimizer=pg.optimizers.SGD(0.0), loss="mse")
    dropped.set_weights(plain.get_weights())
    np.testing.assert_array_equal(dropped.predict(x), plain.predict(x))
    np.testing.assert_allclose(dropped.evaluate(x, y, verbose=0), plain.evaluate(x, y, verbose=0), rtol=1e-6)
    a = dropped.fit(x, y, batch_size=16, verbose=0).history["loss"][0]
    b = dropped.fit(x, y, batch_size=16, verbose=0).history["loss"][0]
    assert a != b                                      # new masks every step
    assert abs(a - plain.evaluate(x, y, verbose=0)) > 1e-4
    plain.free()
    dropped.free()
    for bad in ({"dropout": 1.0}, {"recurrent_dropout": -0.1}, {"dropout": "0.2"}):
        with pytest.raises(ValueError):
            pg.layers.GRU(2, **bad)
