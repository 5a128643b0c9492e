"""The layer-test harness every layer of ``pyggml.layers`` goes through.

A ``LayerCase`` names a layer (a factory, so every model gets a fresh one),
its input shapes and a float64 numpy reference of its forward pass.  The
harness puts the layer in a tiny model, ``Input -> Dense "pre<i>" -> layer``
(the Dense, one per input, makes the gradient through the layer's input
observable), in both model kinds where the layer allows it, and checks:

- forward: ``predict`` against the reference (inference mode);
- gradient: one plain SGD step of the mse loss (``fit``, one batch) moves
  every trainable weight by ``-lr * grad``; ``grad`` must match the central
  differences of the reference's mse loss in float64 (training mode);
- the loss ``fit`` reports is the reference's training-mode loss;
- config: ``from_config(get_config())`` (also through JSON) gives an equal
  config and the same predictions with the same weights, and a saved model
  loads and predicts the same;
- training: a second small SGD step has a lower loss than the first.

Weights are drawn at random (not the layer's initialisers: zero biases would
hide a wrong bias) unless a case says otherwise.
"""

import json
import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pytest

import pyggml as pg

__all__ = ["LayerCase", "params", "check_forward", "check_gradient", "check_config", "check_training",
           "ACTIVATIONS", "build_model", "random_weights", "numeric_grads"]


# --- float64 references of the activations --------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


ACTIVATIONS = {
    None: lambda z: z,
    "linear": lambda z: z,
    "relu": lambda z: np.maximum(z, 0.0),
    "sigmoid": lambda z: 1.0 / (1.0 + np.exp(-z)),
    "tanh": np.tanh,
    "softmax": _softmax,
    "gelu": lambda z: 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0))),
    "silu": lambda z: z / (1.0 + np.exp(-z)),
    "leaky_relu": lambda z: np.where(z > 0, z, 0.2 * z),
    "elu": lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0.0))),
}


# --- cases ---------------------------------------------------------------------------------

@dataclass
class LayerCase:
    """One layer configuration under test.

    ref(hs, w, training) -> float64 output, where ``hs`` are the layer's
    float64 inputs (after the pre-Dense) and ``w`` its weights by short name.
    """
    id: str
    make: Callable[[], "pg.layers.Layer"]
    shapes: list                                  # input shapes without the batch, one per input
    ref: Callable
    pre: bool = True                              # a Dense before each input
    int_input: Optional[int] = None               # integer indices in [0, int_input) (Embedding)
    sequential: bool = True                       # also as a Sequential (single input only)
    call: Optional[Callable] = None               # call(layer, nodes) -> node; default layer(nodes or node)
    batch: int = 3
    stochastic: bool = False                      # training differs at random (Dropout)
    weight_init: Optional[Callable] = None        # (name, shape, rng) -> array or None (default draw)
    grad_check: Optional[Callable] = None         # (case, kind): replaces the finite differences (stochastic layers)
    fwd_tol: float = 1e-4
    grad_tol: float = 2e-3
    lr: float = 0.01                              # the small step of check_training
    extra: dict = field(default_factory=dict)

    @property
    def cls_name(self):
        return type(self.make()).__name__

    def kinds(self):
        ks = ["functional"]
        if self.sequential and len(self.shapes) == 1:
            ks.append("sequential")
        return ks


def params(cases):
    """pytest parameters (case, model kind) for every case and the kinds it supports."""
    return [pytest.param(c, k, id=f"{c.id}-{k}") for c in cases for k in c.kinds()]


# --- models -------------------------------------------------------------------------------

def build_model(case, kind, lr=1.0, layer=None):
    """Input(s) -> pre-Dense(s) -> layer, compiled with mse and SGD(lr)."""
    layer = layer if layer is not None else case.make()
    pres = [pg.layers.Dense(s[-1], name=f"pre{i}") for i, s in enumerate(case.shapes)] if case.pre else []
    if kind == "sequential":
        assert len(case.shapes) == 1
        m = pg.Sequential(pres + [layer], input_shape=case.shapes[0])
    else:
        dtype = "int32" if case.int_input else "float32"
        inputs = [pg.Input(s, dtype=dtype) for s in case.shapes]
        hs = [p(i) for p, i in zip(pres, inputs)] if case.pre else inputs
        if case.call is not None:
            out = case.call(layer, hs)
        else:
            out = layer(hs if len(hs) > 1 else hs[0])
        m = pg.Model(inputs if len(inputs) > 1 else inputs[0], out)
    m.compile(optimizer=pg.optimizers.SGD(learning_rate=lr), loss="mse", seed=0)
    return m, layer


def random_weights(case, model, rng):
    w = model.get_weights()
    out = {}
    for k, v in w.items():
        a = case.weight_init(k, v.shape, rng) if case.weight_init else None
        if a is None:
            a = rng.normal(scale=0.5, size=v.shape)
        out[k] = np.asarray(a, dtype=np.float32)
    model.set_weights(out)
    return out


def make_data(case, rng, n=None):
    n = n or case.batch
    if case.int_input:
        xs = [rng.integers(0, case.int_input, size=(n,) + tuple(s)).astype(np.int32) for s in case.shapes]
    else:
        xs = [rng.normal(size=(n,) + tuple(s)).astype(np.float32) for s in case.shapes]
    return xs


def _x_arg(xs):
    return xs if len(xs) > 1 else xs[0]


def model_ref(case, layer_name, xs, weights, training):
    """The float64 reference of the whole test model."""
    w64 = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    if case.pre:
        hs = [x.astype(np.float64) @ w64[f"pre{i}.weight"].T + w64[f"pre{i}.bias"] for i, x in enumerate(xs)]
    else:
        hs = list(xs) if case.int_input else [x.astype(np.float64) for x in xs]
    lw = {k.split(".", 1)[1]: v for k, v in w64.items() if k.split(".", 1)[0] == layer_name}
    return case.ref(hs, lw, training)


def mse(out, y):
    return float(np.mean((out - y) ** 2))


def numeric_grads(loss_fn, weights, names, eps=1e-6):
    """Central differences of loss_fn(weights) in float64 for the named weights."""
    w = {k: np.asarray(v, dtype=np.float64).copy() for k, v in weights.items()}
    grads = {}
    for n in names:
        a = w[n]
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            old = a[idx]
            a[idx] = old + eps
            lp = loss_fn(w)
            a[idx] = old - eps
            lm = loss_fn(w)
            a[idx] = old
            g[idx] = (lp - lm) / (2 * eps)
        grads[n] = g
    return grads


def _close(actual, expected, tol, what):
    scale = max(float(np.max(np.abs(expected))) if expected.size else 0.0, 1e-3)
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale, err_msg=what)


# --- the checks ----------------------------------------------------------------------------

def check_forward(case, kind, seed=0):
    rng = np.random.default_rng(seed)
    m, layer = build_model(case, kind)
    try:
        w = random_weights(case, m, rng)
        xs = make_data(case, rng, n=case.batch + 2)
        got = m.predict(_x_arg(xs), batch_size=case.batch)        # a short last batch too
        ref = model_ref(case, layer.name, xs, w, training=False)
        assert got.dtype == np.float32
        assert got.shape == ref.shape == (len(xs[0]),) + tuple(layer.output_shape[1:])
        _close(got, ref, case.fwd_tol, f"{case.id} ({kind}) forward")
    finally:
        m.free()


def check_gradient(case, kind, seed=1, lr=1.0):
    """One SGD step moves the weights by -lr * the float64 finite-difference gradient."""
    if case.grad_check is not None:
        return case.grad_check(case, kind)
    rng = np.random.default_rng(seed)
    m, layer = build_model(case, kind, lr=lr)
    try:
        w0 = random_weights(case, m, rng)
        xs = make_data(case, rng)
        y = rng.normal(size=(case.batch,) + tuple(layer.output_shape[1:]))
        trainable = m.trainable_weights
        assert trainable, "the test model has no trainable weight"
        h = m.fit(_x_arg(xs), y, epochs=1, batch_size=case.batch, shuffle=False, verbose=0)
        w1 = m.get_weights()

        def loss(w):
            return mse(model_ref(case, layer.name, xs, w, training=True), y)
        # the loss fit reports is the training-mode loss before the step
        np.testing.assert_allclose(h.history["loss"][0], loss(w0), rtol=case.fwd_tol * 10,
                                   err_msg=f"{case.id} ({kind}) training loss")
        num = numeric_grads(loss, w0, trainable)
        for k in trainable:
            got = (w0[k].astype(np.float64) - w1[k].astype(np.float64)) / lr
            _close(got, num[k], case.grad_tol, f"{case.id} ({kind}) gradient of {k}")
        mine = [k for k in trainable if k.split(".")[0] == layer.name] or trainable
        assert max(np.max(np.abs(num[k])) for k in mine) > 1e-6, "the gradient is all zero: nothing was checked"
        return m.get_weights(), w0, xs
    finally:
        m.free()


def check_config(case, kind, tmp_path, seed=2):
    layer = case.make()
    cfg = layer.get_config()
    cls = type(layer)
    again = cls.from_config(cfg)
    assert again.get_config() == cfg
    via_json = cls.from_config(json.loads(json.dumps(cfg)))
    assert json.loads(json.dumps(via_json.get_config())) == json.loads(json.dumps(cfg))
    rng = np.random.default_rng(seed)
    m1, l1 = build_model(case, kind, layer=layer)
    m2, l2 = build_model(case, kind, layer=via_json)
    try:
        w = random_weights(case, m1, rng)
        assert sorted(m2.get_weights()) == sorted(w)
        m2.set_weights(w)
        xs = make_data(case, rng)
        p1 = m1.predict(_x_arg(xs))
        np.testing.assert_array_equal(p1, m2.predict(_x_arg(xs)))
        path = str(tmp_path / f"{case.id}-{kind}.gguf")
        m1.save(path)
        m3 = pg.load_model(path)
        try:
            assert type(m3.get_layer(name=l1.name)) is cls
            np.testing.assert_array_equal(p1, m3.predict(_x_arg(xs)))
        finally:
            m3.free()
    finally:
        m1.free()
        m2.free()


def check_training(case, kind, seed=3):
    """A small SGD step lowers the loss (training mode, as fit reports it; at
    inference for stochastic layers)."""
    rng = np.random.default_rng(seed)
    m, layer = build_model(case, kind, lr=case.lr)
    try:
        random_weights(case, m, rng)
        xs = make_data(case, rng, n=2 * case.batch)
        y = rng.normal(size=(2 * case.batch,) + tuple(layer.output_shape[1:]))
        w0 = m.get_weights()
        if case.stochastic:
            before = m.evaluate(_x_arg(xs), y, batch_size=2 * case.batch, return_dict=True)["loss"]
            m.fit(_x_arg(xs), y, epochs=1, batch_size=2 * case.batch, shuffle=False, verbose=0)
            after = m.evaluate(_x_arg(xs), y, batch_size=2 * case.batch, return_dict=True)["loss"]
        else:
            before = m.fit(_x_arg(xs), y, epochs=1, batch_size=2 * case.batch, shuffle=False,
                           verbose=0).history["loss"][0]
            after = m.fit(_x_arg(xs), y, epochs=1, batch_size=2 * case.batch, shuffle=False,
                          verbose=0).history["loss"][0]
        assert np.isfinite(before) and np.isfinite(after)
        assert after < before, f"{case.id} ({kind}): loss {before} -> {after}"
        w1 = m.get_weights()
        # weights with no effect on the loss (an attention key's bias) may stay put
        still = case.extra.get("zero_gradient", ())
        mine = [k for k in m.trainable_weights if k.split(".")[0] == layer.name and k.split(".", 1)[1] not in still]
        assert all(not np.array_equal(w0[k], w1[k]) for k in mine), "a weight of the layer did not train"
    finally:
        m.free()


def harness_tests(cases):
    """The four harness tests over ``cases``, for a layer family's test module:
    ``test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)``."""
    each = pytest.mark.parametrize("case, kind", params(cases))

    @each
    def test_forward(case, kind):
        check_forward(case, kind)

    @each
    def test_gradient(case, kind):
        check_gradient(case, kind)

    @each
    def test_config(case, kind, tmp_path):
        check_config(case, kind, tmp_path)

    @each
    def test_training_step(case, kind):
        check_training(case, kind)

    return test_forward, test_gradient, test_config, test_training_step

