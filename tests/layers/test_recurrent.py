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


def gru_ref(return_sequences, activation="tanh", recurrent_activation="sigmoid"):
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
            cand = act(a[:, 2 * units:] + r * b[:, 2 * units:])
            h = (1 - z) * cand + z * h
            seq.append(h)
        return np.stack(seq, axis=1) if return_sequences else h
    return ref


CASES = [
    LayerCase("lstm", lambda: pg.layers.LSTM(3), [(4, 2)], lstm_ref(False)),
    LayerCase("lstm_seq", lambda: pg.layers.LSTM(2, return_sequences=True), [(3, 3)], lstm_ref(True)),
    LayerCase("lstm_nobias", lambda: pg.layers.LSTM(2, use_bias=False), [(3, 2)], lstm_ref(False)),
    LayerCase("gru", lambda: pg.layers.GRU(3), [(4, 2)], gru_ref(False)),
    LayerCase("gru_seq", lambda: pg.layers.GRU(2, return_sequences=True), [(3, 3)], gru_ref(True)),
    LayerCase("gru_nobias", lambda: pg.layers.GRU(2, use_bias=False), [(3, 2)], gru_ref(False)),
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
        m.predict(np.zeros((2, 3, 2)))
    m.free()
    with pytest.raises(TypeError):
        cls(3, no_such_argument=True)


def test_gru_refuses_reset_before():
    with pytest.raises(ValueError, match="reset_after"):
        pg.layers.GRU(3, reset_after=False)
