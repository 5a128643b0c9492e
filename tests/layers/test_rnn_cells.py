"""RNN(cell) and the cells (SimpleRNNCell, LSTMCell, GRUCell, StackedRNNCells, a cell of
your own): the layer harness, equality with the matching layers on the same weights
(masks, initial states, return_state, go_backwards, Bidirectional), PyTorch parity,
saving, and bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests
from test_recurrent import gru_ref, lstm_ref, simple_rnn_ref

L = pg.layers
B, T, F, U = 3, 5, 4, 3


# --- cells of a user's own (Keras's guide "Working with RNNs") --------------------------------

@pg.saving.register_serializable(package="test_rnn_cells")
class MinimalRNNCell(L.Layer):
    """The guide's MinimalRNNCell: output = x K + h R (one state)."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="uniform", name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), initializer="uniform",
                                                name="recurrent_kernel")

    def call(self, inputs, states):
        output = pg.ops.matmul(inputs, self.kernel) + pg.ops.matmul(states[0], self.recurrent_kernel)
        return output, [output]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@pg.saving.register_serializable(package="test_rnn_cells")
class TwoStateCell(L.Layer):
    """Two states of different sizes: h' = tanh(x K + h R), s' = s + h' V (size 2 units);
    the output is s' (output_size 2 units)."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = [units, 2 * units]
        self.output_size = 2 * units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), name="recurrent_kernel")
        self.v = self.add_weight(shape=(self.units, 2 * self.units), name="v")

    def call(self, inputs, states, training=None):
        h, s = states
        h2 = pg.activations.tanh(pg.ops.matmul(inputs, self.kernel) + pg.ops.matmul(h, self.recurrent_kernel))
        s2 = s + pg.ops.matmul(h2, self.v)
        return s2, [h2, s2]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def minimal_ref(return_sequences=False, go_backwards=False):
    def ref(hs, w, training):
        x = hs[0][:, ::-1] if go_backwards else hs[0]
        h = np.zeros((x.shape[0], w["cell.kernel"].shape[1]))
        seq = []
        for t in range(x.shape[1]):
            h = x[:, t] @ w["cell.kernel"] + h @ w["cell.recurrent_kernel"]
            seq.append(h)
        return np.stack(seq, 1) if return_sequences else h
    return ref


def two_state_ref(return_sequences=False, masks=None, h0=None, s0=None):
    def ref(hs, w, training):
        x = hs[0]
        n, u = x.shape[0], w["cell.kernel"].shape[1]
        h = np.zeros((n, u)) if h0 is None else h0
        s = np.zeros((n, 2 * u)) if s0 is None else s0
        prev = np.zeros((n, 2 * u))
        seq = []
        for t in range(x.shape[1]):
            h2 = np.tanh(x[:, t] @ w["cell.kernel"] + h @ w["cell.recurrent_kernel"])
            s2 = s + h2 @ w["cell.v"]
            if masks is not None:
                m = masks[:, t:t + 1]
                h2, s2 = h + (h2 - h) * m, s + (s2 - s) * m
                out = prev + (s2 - prev) * m
            else:
                out = s2
            h, s, prev = h2, s2, out
            seq.append(out)
        return (np.stack(seq, 1) if return_sequences else prev), h, s
    return ref


def _strip(ref, prefix="cell."):
    """A layer reference (weights named weight_ih, ...) for RNN(cell)'s cell.<weight> names."""
    return lambda hs, w, training: ref(hs, {k[len(prefix):]: v for k, v in w.items() if k.startswith(prefix)},
                                       training)


def _backwards(ref):
    return lambda hs, w, training: ref([hs[0][:, ::-1]], w, training)


def stacked_ref(hs, w, training):
    """RNN([LSTMCell(2), SimpleRNNCell(3, activation="relu")], return_sequences=True)."""
    seq = _strip(lstm_ref(True), "cell.cells.0.")(hs, w, training)
    return _strip(simple_rnn_ref(True, "relu"), "cell.cells.1.")([seq], w, training)


CASES = [
    LayerCase("rnn_lstm_cell", lambda: L.RNN(L.LSTMCell(3)), [(4, 2)], _strip(lstm_ref(False)),
              extra={"covers": ("LSTMCell",)}),
    LayerCase("rnn_gru_cell_seq", lambda: L.RNN(L.GRUCell(2), return_sequences=True), [(3, 3)],
              _strip(gru_ref(True)), extra={"covers": ("GRUCell",)}),
    LayerCase("rnn_gru_cell_reset_before_hard", lambda: L.RNN(L.GRUCell(2, reset_after=False,
                                                                          recurrent_activation="silu")),
              [(3, 2)], _strip(gru_ref(False, recurrent_activation="silu", reset_after=False))),
    LayerCase("rnn_simple_cell_backwards", lambda: L.RNN(L.SimpleRNNCell(3), go_backwards=True), [(4, 2)],
              _backwards(_strip(simple_rnn_ref(False))), extra={"covers": ("SimpleRNNCell",)}),
    LayerCase("rnn_stacked_cells", lambda: L.RNN([L.LSTMCell(2), L.SimpleRNNCell(3, activation="relu")],
                                                 return_sequences=True),
              [(3, 2)], stacked_ref, extra={"covers": ("StackedRNNCells",)}),
    LayerCase("rnn_minimal_cell_seq_backwards", lambda: L.RNN(MinimalRNNCell(3), return_sequences=True,
                                                              go_backwards=True),
              [(3, 2)], minimal_ref(True, True), lr=0.002),
    LayerCase("rnn_two_state_cell", lambda: L.RNN(TwoStateCell(2)), [(3, 2)],
              lambda hs, w, training: two_state_ref()(hs, w, training)[0]),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


# --- RNN(cell) computes what the matching layer computes --------------------------------------

LAYERS = {"lstm": (L.LSTM, L.LSTMCell, 2), "gru": (L.GRU, L.GRUCell, 1),
          "simple_rnn": (L.SimpleRNN, L.SimpleRNNCell, 1)}


def _masked_models(kind, go_backwards, return_sequences):
    """Embedding(mask_zero) -> the layer or RNN(cell) with initial states and return_state."""
    layer_cls, cell_cls, n = LAYERS[kind]
    models = []
    for make in (lambda: layer_cls(U, return_sequences=return_sequences, return_state=True,
                                   go_backwards=go_backwards),
                 lambda: L.RNN(cell_cls(U), return_sequences=return_sequences, return_state=True,
                               go_backwards=go_backwards)):
        tok = pg.Input((T,), dtype="int32")
        states = [pg.Input((U,)) for _ in range(n)]
        e = L.Embedding(20, F, mask_zero=True, name="emb")(tok)
        outs = make()(e, initial_state=states)
        models.append(pg.Model([tok] + states, outs).compile(loss="mse", seed=0))
    return models


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_rnn_of_a_cell_equals_its_layer(kind, return_sequences, go_backwards):
    m_layer, m_rnn = _masked_models(kind, go_backwards, return_sequences)
    rng = np.random.default_rng(0)
    w = {k: rng.normal(scale=0.5, size=v.shape).astype(np.float32) for k, v in m_layer.get_weights().items()}
    m_layer.set_weights(w)
    m_rnn.set_weights({("rnn.cell." + k.split(".", 1)[1]) if not k.startswith("emb.") else k: v
                       for k, v in w.items()})
    tok = rng.integers(1, 20, (B, T)).astype(np.int32)
    tok[0, 3:] = 0                        # padding at the end
    tok[1, :2] = 0                        # and at the start
    n = LAYERS[kind][2]
    states = [rng.normal(size=(B, U)).astype(np.float32) for _ in range(n)]
    a, b = m_layer.predict([tok] + states), m_rnn.predict([tok] + states)
    assert len(a) == len(b) == 1 + n
    for x, y in zip(a, b):
        np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-6)
    # the gradients too: one SGD step from the same weights lands on the same weights
    ys = [rng.normal(size=o.shape).astype(np.float32) for o in a]
    for m in (m_layer, m_rnn):
        m.compile(optimizer=pg.optimizers.SGD(0.5), loss="mse")
        m.fit([tok] + states, ys, batch_size=B, epochs=1, shuffle=False, verbose=0)
    w1, w2 = m_layer.get_weights(), m_rnn.get_weights()
    for k, v in w1.items():
        k2 = k if k.startswith("emb.") else "rnn.cell." + k.split(".", 1)[1]
        assert not np.array_equal(v, w[k])
        np.testing.assert_allclose(w2[k2], v, rtol=1e-5, atol=1e-6, err_msg=k)
    m_layer.free()
    m_rnn.free()


def test_stacked_cells_equal_stacked_layers():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    stacked = pg.Sequential([L.RNN(L.StackedRNNCells([L.LSTMCell(4), L.GRUCell(3), L.SimpleRNNCell(2)]),
                                   return_sequences=True)], input_shape=(T, F)).compile(loss="mse", seed=0)
    layers = pg.Sequential([L.LSTM(4, return_sequences=True), L.GRU(3, return_sequences=True),
                            L.SimpleRNN(2, return_sequences=True)], input_shape=(T, F)).compile(loss="mse", seed=0)
    w = layers.get_weights()
    names = {"lstm": "rnn.cell.cells.0", "gru": "rnn.cell.cells.1", "simple_rnn": "rnn.cell.cells.2"}
    mapped = {names[k.split(".")[0]] + "." + k.split(".", 1)[1]: v for k, v in w.items()}
    assert sorted(mapped) == sorted(stacked.get_weights())
    stacked.set_weights(mapped)
    np.testing.assert_allclose(stacked.predict(x), layers.predict(x), rtol=1e-6, atol=1e-6)
    # a list of cells is a stack; return_state gives every cell's states, flat
    inp = pg.Input((T, F))
    outs = L.RNN([L.LSTMCell(4), L.GRUCell(3)], return_state=True)(inp)
    assert [tuple(o.shape) for o in outs] == [(None, 3), (None, 4), (None, 4), (None, 3)]
    stacked.free()
    layers.free()


def test_bidirectional_of_rnn_equals_bidirectional_layer():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    a = pg.Sequential([L.Bidirectional(L.LSTM(U, return_sequences=True))], input_shape=(T, F))
    b = pg.Sequential([L.Bidirectional(L.RNN(L.LSTMCell(U), return_sequences=True))], input_shape=(T, F))
    a.compile(loss="mse", seed=0)
    b.compile(loss="mse", seed=0)
    w = a.get_weights()
    b.set_weights({k.replace("_layer.", "_layer.cell."): v for k, v in w.items()})
    np.testing.assert_allclose(b.predict(x), a.predict(x), rtol=1e-6, atol=1e-6)
    assert b.layers[0].backward_layer.go_backwards and not b.layers[0].forward_layer.go_backwards
    a.free()
    b.free()


# --- a cell of one's own ------------------------------------------------------------------------

def test_custom_cell_with_two_states_masks_and_initial_state_against_numpy():
    rng = np.random.default_rng(4)
    inp, h0, s0 = pg.Input((T, F)), pg.Input((U,)), pg.Input((2 * U,))
    layer = L.RNN(TwoStateCell(U), return_sequences=True, return_state=True)
    outs = layer(inp, initial_state=[h0, s0])
    m = pg.Model([inp, h0, s0], outs).compile(loss="mse", seed=0)
    w = {k: rng.normal(scale=0.5, size=v.shape).astype(np.float32) for k, v in m.get_weights().items()}
    m.set_weights(w)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    h, s = rng.normal(size=(B, U)).astype(np.float32), rng.normal(size=(B, 2 * U)).astype(np.float32)
    got = m.predict([x, h, s])
    w64 = {k.split(".", 1)[1]: v.astype(np.float64) for k, v in w.items()}
    want = two_state_ref(True, h0=h.astype(np.float64), s0=s.astype(np.float64))([x.astype(np.float64)], w64, False)
    assert got[0].shape == (B, T, 2 * U) and got[1].shape == (B, U) and got[2].shape == (B, 2 * U)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    m.free()


def test_custom_cell_masked_eager_call_against_numpy():
    rng = np.random.default_rng(5)
    layer = L.RNN(TwoStateCell(U), return_sequences=True)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    mask = np.ones((B, T), np.float32)
    mask[0, 3:] = 0
    mask[2, :2] = 0
    got = layer(x, mask=mask)                              # eager: builds with its initialisers
    w64 = {k: v.astype(np.float64) for k, v in layer.get_weights().items()}
    want = two_state_ref(True, masks=mask.astype(np.float64))([x.astype(np.float64)], w64, False)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # zero_output_for_mask: the padded steps' outputs are zeros
    z = L.RNN(TwoStateCell(U), return_sequences=True, zero_output_for_mask=True)
    z(x[:1])
    z.set_weights(layer.get_weights())
    np.testing.assert_allclose(z(x, mask=mask), want * mask[:, :, None], rtol=1e-5, atol=1e-5)


def test_builtin_cell_zero_output_for_mask():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    mask = np.ones((B, T), np.float32)
    mask[1, 2:] = 0
    a = L.RNN(L.LSTMCell(U), return_sequences=True)
    b = L.RNN(L.LSTMCell(U), return_sequences=True, zero_output_for_mask=True)
    ya = a(x, mask=mask)
    b(x)
    b.set_weights(a.get_weights())
    np.testing.assert_allclose(b(x, mask=mask), ya * mask[:, :, None], rtol=1e-6, atol=1e-6)
    assert np.abs(ya[1, 2:]).min() > 0                  # the carried output, not zeros


def test_a_cell_called_on_tensors_inside_a_layer():
    """Keras's cell(x_t, states) -> (output, states), inside a layer of one's own."""

    class OneStep(L.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.step = L.LSTMCell(U)

        def call(self, x):
            n = x.shape[0]
            zeros = pg.ops.constant(np.zeros((n, U), np.float32))
            out, (h, c) = self.step(x, [zeros, zeros])
            return out + c

    rng = np.random.default_rng(7)
    x = rng.normal(size=(B, F)).astype(np.float32)
    layer = OneStep()
    got = layer(x)
    w = {k.split(".", 1)[1]: v.astype(np.float64) for k, v in layer.get_weights().items()}
    z = x @ w["weight_ih"].T + w["bias_ih"] + w["bias_hh"]
    sig = ACTIVATIONS["sigmoid"]
    i, f, g, o = (z[:, k * U:(k + 1) * U] for k in range(4))
    c = sig(i) * np.tanh(g)
    np.testing.assert_allclose(got, sig(o) * np.tanh(c) + c, rtol=1e-5, atol=1e-6)


def test_a_cell_called_on_arrays_is_one_step():
    rng = np.random.default_rng(11)
    cell = L.GRUCell(U)
    x, h = rng.normal(size=(B, F)).astype(np.float32), rng.normal(size=(B, U)).astype(np.float32)
    out, states = cell(x, [h])
    assert isinstance(states, list) and len(states) == 1
    w = {k: v.astype(np.float64) for k, v in cell.get_weights().items()}
    a = x @ w["weight_ih"].T + w["bias_ih"]
    b = h @ w["weight_hh"].T + w["bias_hh"]
    sig = ACTIVATIONS["sigmoid"]
    r, z = sig(a[:, :U] + b[:, :U]), sig(a[:, U:2 * U] + b[:, U:2 * U])
    n = np.tanh(a[:, 2 * U:] + r * b[:, 2 * U:])
    np.testing.assert_allclose(out, (1 - z) * n + z * h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(states[0], out)
    with pytest.raises(ValueError, match="takes 2 states"):
        L.LSTMCell(U)(x, [h])
    with pytest.raises(ValueError, match=r"shape \(batch, units\)"):
        L.LSTMCell(U)(x, [h, np.zeros((B, U + 1), np.float32)])


def test_cell_regularizers_equal_the_layers():
    x = np.random.default_rng(12).normal(size=(4, T, 2))
    kw = dict(bias_regularizer="l2", kernel_regularizer="l1", recurrent_regularizer="l2")
    a = pg.Sequential([L.LSTM(3, **kw)], input_shape=(T, 2)).compile(loss="mse", seed=0)
    b = pg.Sequential([L.RNN(L.LSTMCell(3, **kw))], input_shape=(T, 2)).compile(loss="mse", seed=0)
    b.set_weights({k.replace("lstm.", "rnn.cell."): v for k, v in a.get_weights().items()})
    assert len(b.losses) == 3
    np.testing.assert_allclose(b.losses, a.losses, rtol=1e-6)
    np.testing.assert_allclose(b.evaluate(x, np.zeros((4, 3))), a.evaluate(x, np.zeros((4, 3))), rtol=1e-6)
    a.free()
    b.free()


# --- PyTorch parity --------------------------------------------------------------------------

def test_rnn_lstm_cell_matches_torch_forward_and_gradient():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tl = torch.nn.LSTM(F, U, batch_first=True)
    rng = np.random.default_rng(8)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    y = rng.normal(size=(B, T, U)).astype(np.float32)
    m = pg.Sequential([L.RNN(L.LSTMCell(U), return_sequences=True)], input_shape=(T, F))
    m.compile(optimizer=pg.optimizers.SGD(1.0), loss="mse", seed=0)
    tw = {"weight_ih": tl.weight_ih_l0, "weight_hh": tl.weight_hh_l0, "bias_ih": tl.bias_ih_l0,
          "bias_hh": tl.bias_hh_l0}
    w0 = {f"rnn.cell.{k}": v.detach().numpy().copy() for k, v in tw.items()}
    m.set_weights(w0)
    out, _ = tl(torch.from_numpy(x))
    np.testing.assert_allclose(m.predict(x), out.detach().numpy(), rtol=1e-5, atol=1e-6)
    loss = ((out - torch.from_numpy(y)) ** 2).mean()
    loss.backward()
    h = m.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(h.history["loss"][0], loss.item(), rtol=1e-5)
    w1 = m.get_weights()
    for k, v in tw.items():
        grad = w0[f"rnn.cell.{k}"] - w1[f"rnn.cell.{k}"]
        np.testing.assert_allclose(grad, v.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
    m.free()


# --- configs and saving ---------------------------------------------------------------------

def test_cell_configs_have_keras_keys_and_round_trip():
    c = L.LSTMCell(4, dropout=0.1, recurrent_dropout=0.2, unit_forget_bias=False, seed=3)
    cfg = c.get_config()
    for k in ("units", "activation", "recurrent_activation", "use_bias", "unit_forget_bias", "kernel_initializer",
              "recurrent_initializer", "bias_initializer", "kernel_regularizer", "recurrent_constraint",
              "dropout", "recurrent_dropout", "seed"):
        assert k in cfg, k
    assert L.LSTMCell.from_config(cfg).get_config() == cfg
    assert L.GRUCell(2, reset_after=False).get_config()["reset_after"] is False
    assert "recurrent_activation" not in L.SimpleRNNCell(2).get_config()
    assert L.LSTMCell(3).state_size == [3, 3] and L.GRUCell(3).state_size == 3 and L.LSTMCell(3).output_size == 3
    r = L.RNN([L.LSTMCell(2), MinimalRNNCell(3)], go_backwards=True, unroll=True)
    cfg = r.get_config()
    for k in ("return_sequences", "return_state", "go_backwards", "stateful", "unroll", "zero_output_for_mask",
              "cell"):
        assert k in cfg
    assert cfg["cell"]["class_name"] == "StackedRNNCells"
    assert cfg["cell"]["config"]["cells"][1]["class_name"] == "test_rnn_cells>MinimalRNNCell"
    again = L.RNN.from_config(cfg)
    assert again.get_config() == cfg and isinstance(again.cell.cells[1], MinimalRNNCell)


@pytest.mark.parametrize("suffix", ["gguf", "keras"])
def test_saved_model_with_custom_and_builtin_cells_loads_and_predicts_the_same(tmp_path, suffix):
    rng = np.random.default_rng(9)
    inp = pg.Input((T, F))
    h = L.RNN([L.GRUCell(3, dropout=0.2), TwoStateCell(2)], return_sequences=True)(inp)
    out = L.Bidirectional(L.RNN(MinimalRNNCell(2)))(h)
    m = pg.Model(inp, out).compile(loss="mse", seed=0)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    m.fit(x, rng.normal(size=(B, 4)).astype(np.float32), batch_size=B, epochs=1, verbose=0)
    path = str(tmp_path / f"m.{suffix}")
    m.save(path)
    back = pg.load_model(path)
    np.testing.assert_array_equal(back.predict(x), m.predict(x))
    assert sorted(back.get_weights()) == sorted(m.get_weights())
    m.free()
    back.free()


def test_dropout_cells_train_and_predict_deterministically():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(8, T, F)).astype(np.float32)
    m = pg.Sequential([L.RNN(L.LSTMCell(U, dropout=0.3, recurrent_dropout=0.3)), L.Dense(2)], input_shape=(T, F))
    m.compile(loss="mse", seed=0)
    p = m.predict(x)
    np.testing.assert_array_equal(p, m.predict(x))
    s = pg.Sequential([L.RNN([L.GRUCell(2, dropout=0.5, recurrent_dropout=0.5), L.SimpleRNNCell(2, dropout=0.2)])],
                      input_shape=(T, F)).compile(loss="mse", seed=0)
    q = s.predict(x)
    hist = s.fit(x, np.zeros((8, 2), np.float32), batch_size=8, epochs=2, verbose=0)
    assert all(np.isfinite(hist.history["loss"]))
    assert not np.array_equal(q, s.predict(x))
    m.free()
    s.free()


# --- bad arguments ---------------------------------------------------------------------------

class _NoStateSize(L.Layer):
    def call(self, inputs, states):
        return inputs, states


class _WrongStateShape(L.Layer):
    state_size = 3

    def call(self, inputs, states):
        return states[0], [pg.ops.constant(np.zeros((inputs.shape[0], 4), np.float32))]


class _NoneOutput(L.Layer):
    state_size = 3

    def call(self, inputs, states):
        return None, states


class _NotAPair(L.Layer):
    state_size = 3

    def call(self, inputs, states):
        return states[0]


class _WrongStateCount(L.Layer):
    state_size = [3, 3]

    def call(self, inputs, states):
        return states[0], [states[0]]


def _model_of(layer, shape=(T, F)):
    m = pg.Sequential([layer], input_shape=shape).compile(loss="mse")
    m.predict(np.zeros((B,) + shape, np.float32))


def test_bad_cells_and_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match="state_size"):
        L.RNN(_NoStateSize())
    with pytest.raises(TypeError, match="Layer"):
        L.RNN(type("Plain", (), {"state_size": 3, "call": lambda self, x, s: (x, s)})())
    with pytest.raises(ValueError, match="state_size"):
        L.RNN(type("Bad", (L.Layer,), {"state_size": "a", "call": lambda self, x, s: (x, s)})())
    with pytest.raises(ValueError, match="state_size"):
        L.RNN(type("Bad0", (L.Layer,), {"state_size": 0, "call": lambda self, x, s: (x, s)})())
    with pytest.raises(TypeError, match="stateful"):
        L.RNN(L.LSTMCell(2), stateful="yes")         # stateful=True works (test_stateful_rnn.py)
    with pytest.raises(TypeError, match="no_such"):
        L.RNN(L.LSTMCell(2), no_such=1)
    with pytest.raises(ValueError, match="non-empty list"):
        L.StackedRNNCells([])
    with pytest.raises(ValueError, match="state_size"):
        L.StackedRNNCells([L.LSTMCell(2), _NoStateSize()])
    with pytest.raises(ValueError, match="units"):
        L.LSTMCell(0)
    with pytest.raises(ValueError, match="dropout"):
        L.GRUCell(2, dropout=1.5)
    with pytest.raises(ValueError):
        L.SimpleRNNCell(2, activation="no_such_activation")
    with pytest.raises(TypeError, match="recurrent_activation"):
        L.SimpleRNNCell(2, recurrent_activation="sigmoid")


def test_wrong_shapes_are_refused_clearly():
    with pytest.raises(ValueError, match="state 0 of shape"):
        _model_of(L.RNN(_WrongStateShape()))
    with pytest.raises(ValueError, match="returned 1 states"):
        _model_of(L.RNN(_WrongStateCount()))
    with pytest.raises(ValueError, match="returned None"):
        _model_of(L.RNN(_NoneOutput()))
    with pytest.raises(ValueError, match=r"must return \(output, new_states\)"):
        _model_of(L.RNN(_NotAPair()))
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        _model_of(L.RNN(L.LSTMCell(2)), shape=(F,))
    inp = pg.Input((T, F))
    with pytest.raises(ValueError, match=r"initial state 1 must have shape \(batch, 2\)"):
        L.RNN(L.LSTMCell(2))(inp, initial_state=[pg.Input((2,)), pg.Input((3,))])
    with pytest.raises(ValueError, match="takes 2 initial states"):
        L.RNN(L.LSTMCell(2))(inp, initial_state=[pg.Input((2,))])
    x = np.zeros((B, T, F), np.float32)
    with pytest.raises(ValueError, match="mask must have shape"):
        L.RNN(L.LSTMCell(2))(x, mask=np.ones((B, T + 1), np.float32))
    with pytest.raises(ValueError, match="mask must have shape"):
        L.RNN(MinimalRNNCell(2))(x, mask=np.ones((B, 2), np.float32))
    with pytest.raises(ValueError, match="initial state 0"):
        L.RNN(MinimalRNNCell(2))(x, initial_state=[np.zeros((B, 3), np.float32)])
    # a cell built for other features
    cell = L.GRUCell(2)
    L.RNN(cell)(x)
    with pytest.raises(ValueError, match="built for"):
        L.RNN(cell)(np.zeros((B, T, F + 1), np.float32))
