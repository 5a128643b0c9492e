"""Python's operators on symbolic tensors, as Keras 3's KerasTensor has them: on a functional
model's nodes (``keras.Input(...) != 1.0``, ``x // 2``, ``~mask``) they are Keras's ops (float
0/1 for comparisons and logical ops, as in a layer's call); on graph tensors inside a layer's
call; and Keras's GRUCell/SimpleRNNCell taking their one state bare (``cell(x, h)``)."""

import numpy as np
import pytest

import pyggml as pg
from pyggml.core import Tensor

L = pg.layers
X = np.array([[-2.5, 0.5, 1.0, 7.0], [3.7, -0.3, 2.0, -4.0]], np.float32)

# (name, operator on a symbolic tensor, numpy's result): the same lambda does both
OPERATORS = [
    ("ne", lambda a: a != 1.0), ("lt", lambda a: a < 1.0), ("le", lambda a: a <= 1.0),
    ("gt", lambda a: a > 1.0), ("ge", lambda a: a >= 1.0), ("reflected_lt", lambda a: 1.0 < a),
    ("floordiv", lambda a: a // 2), ("rfloordiv", lambda a: 7 // a), ("floordiv_neg", lambda a: a // -3.0),
    ("mod", lambda a: a % 2), ("rmod", lambda a: 7 % a), ("mod_neg", lambda a: a % -3.0),
    ("pow", lambda a: a ** 2), ("rpow", lambda a: 2 ** a), ("abs", lambda a: abs(a)),
    ("neg", lambda a: -a), ("pos", lambda a: +a),
    ("invert", lambda a: ~(a > 0)), ("and", lambda a: (a > 0) & (a < 2)), ("or", lambda a: (a < 0) | (a > 2)),
    ("xor", lambda a: (a > 0) ^ (a < 2)),
]


def _as_float(v):
    return np.asarray(v, np.float32)


@pytest.mark.parametrize("name,op", OPERATORS, ids=[n for n, _ in OPERATORS])
def test_operator_on_a_functional_node_is_keras_op(name, op):
    inp = pg.Input(shape=(4,))
    out = op(inp)
    assert isinstance(out, type(inp)) and out.shape == (None, 4)
    model = pg.Model(inp, out) if out is not inp else pg.Model(inp, L.Identity()(out))
    np.testing.assert_allclose(model.predict(X, verbose=0), _as_float(op(X)), rtol=1e-5, atol=1e-5)


def test_round_and_matmul_and_arrays_on_a_functional_node():
    inp = pg.Input(shape=(4,))
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    outs = [round(inp), round(inp, 1), inp @ w, np.ones(4, np.float32) - inp, np.full(4, 0.5, np.float32) < inp]
    got = pg.Model(inp, outs).predict(X, verbose=0)
    want = [np.round(X), np.round(X, 1), X @ w, 1.0 - X, 0.5 < X]
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, _as_float(e), rtol=1e-5, atol=1e-5)


def test_operators_between_two_nodes():
    a, b = pg.Input(shape=(4,)), pg.Input(shape=(4,))
    y = X[::-1] + 0.5
    outs = [a != b, a < b, a >= b, a // b, a % b, (a > 0) & (b > 0)]
    got = pg.Model([a, b], outs).predict([X, y], verbose=0)
    want = [X != y, X < y, X >= y, X // y, X % y, (X > 0) & (y > 0)]
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, _as_float(e), rtol=1e-5, atol=1e-5)


def test_nodes_keep_identity_equality_and_hashing():
    inp = pg.Input(shape=(3,))
    other = pg.Input(shape=(3,))
    assert isinstance(inp != 1.0, type(inp))         # symbolic, not Python's True
    assert (inp == inp) is True and (inp == other) is False and (inp == 1.0) is False
    d = {inp: "a", other: "b"}
    assert d[inp] == "a" and inp in {inp} and other not in {inp}
    assert [inp, other].index(other) == 1


def test_an_operator_on_an_unknown_operand_is_a_type_error():
    inp = pg.Input(shape=(3,))
    with pytest.raises(TypeError):
        inp // "2"
    with pytest.raises(TypeError):
        inp < "a"


def test_operators_on_a_node_train():
    """d/dx of sum(y**2 + |y| + 2**y + y % 3) through the model (floor parts have zero gradient)."""
    inp = pg.Input(shape=(4,))
    y = L.Dense(4, use_bias=False, kernel_initializer="identity")(inp)
    model = pg.Model(inp, y ** 2 + abs(y) + 2 ** y + y % 3.0 + (y > 0) * 0.0)
    x = np.array([[0.3, -1.2, 0.7, 2.5], [-0.4, 1.1, -2.2, 0.9]], np.float32)
    w = model.trainable_variables[0]
    with pg.GradientTape() as tape:
        loss = pg.ops.sum(model(x))
    g = np.asarray(tape.gradient(loss, w))
    np.testing.assert_allclose(np.asarray(w), np.eye(4), atol=0)
    dy = 2 * x + np.sign(x) + np.log(2.0) * 2.0 ** x + 1.0          # dloss/dy per element, y == x
    np.testing.assert_allclose(g, dy.T @ x, rtol=1e-4, atol=1e-4)   # y = x W^T (PyTorch's layout, W: (out, in))


# --- graph tensors inside a layer's call ----------------------------------------------------------

IN_CALL = OPERATORS + [("round", lambda a: np.round(a) if isinstance(a, np.ndarray) else round(a))]


def _in_call_model(op):
    class OpLayer(L.Layer):
        def call(self, t):
            return op(t)

    inp = pg.Input(shape=(4,))
    return pg.Model(inp, OpLayer()(inp))


@pytest.mark.parametrize("name,op", IN_CALL, ids=[n for n, _ in IN_CALL])
def test_operator_on_a_graph_tensor_in_call(name, op):
    np.testing.assert_allclose(_in_call_model(op).predict(X, verbose=0), _as_float(op(X)), rtol=1e-5, atol=1e-5)


# --- one-state cells called with their state bare ------------------------------------------------

def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _gru_step(cell, x, h):
    w = {k: v.astype(np.float64) for k, v in cell.get_weights().items()}
    u = h.shape[1]
    a = x @ w["weight_ih"].T + w["bias_ih"]
    b = h @ w["weight_hh"].T + w["bias_hh"]
    r, z = _sigmoid(a[:, :u] + b[:, :u]), _sigmoid(a[:, u:2 * u] + b[:, u:2 * u])
    n = np.tanh(a[:, 2 * u:] + r * b[:, 2 * u:])
    return (1 - z) * n + z * h


def test_gru_cell_on_arrays_takes_a_bare_state_and_returns_it_bare():
    rng = np.random.default_rng(3)
    cell = L.GRUCell(8)
    x, h = rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=(4, 8)).astype(np.float32)
    out, state = cell(x, h)
    assert isinstance(state, np.ndarray)                       # Keras: bare in, bare out
    np.testing.assert_allclose(out, _gru_step(cell, x, h), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, out)
    out2, states = cell(x, [h])
    assert isinstance(states, list) and len(states) == 1       # a list in, a list out
    np.testing.assert_allclose(out2, out, rtol=1e-6)


def test_simple_rnn_cell_on_arrays_takes_a_bare_state():
    rng = np.random.default_rng(4)
    cell = L.SimpleRNNCell(3)
    x, h = rng.normal(size=(2, 5)).astype(np.float32), rng.normal(size=(2, 3)).astype(np.float32)
    out, state = cell(x, h)
    w = {k: v.astype(np.float64) for k, v in cell.get_weights().items()}
    want = np.tanh(x @ w["weight_ih"].T + w["bias_ih"] + h @ w["weight_hh"].T + w["bias_hh"])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert isinstance(state, np.ndarray)
    np.testing.assert_allclose(state, out)


def test_lstm_cell_refuses_one_bare_state():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="as a list"):
        L.LSTMCell(3)(x, np.zeros((2, 3), np.float32))


def test_gru_cell_in_a_layer_call_takes_a_bare_state_and_trains():
    """A gated graph network's ``self.gru(messages, node_states)`` inside call."""

    class GatedUpdate(L.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.gru = L.GRUCell(4)

        def call(self, inputs):
            messages, node_states = inputs
            h, new_state = self.gru(messages, node_states)
            assert isinstance(new_state, Tensor)                # bare, as Keras's GRUCell
            return h + new_state * 0.0

    m_in, s_in = pg.Input(shape=(4,)), pg.Input(shape=(4,))
    layer = GatedUpdate()
    model = pg.Model([m_in, s_in], layer([m_in, s_in]))
    rng = np.random.default_rng(5)
    m, s = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_allclose(model.predict([m, s], verbose=0), _gru_step(layer.gru, m, s), rtol=1e-5, atol=1e-6)
    model.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    target = np.zeros((3, 4), np.float32)
    first = model.evaluate([m, s], target, verbose=0)
    model.fit([m, s], target, epochs=5, verbose=0)
    assert model.evaluate([m, s], target, verbose=0) < first
