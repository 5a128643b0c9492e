"""Checking an op through a model: a layer ``fn(x * w)`` with a weight w of the input's
shape, forward against a float64 numpy reference and the gradient of the mse loss with
respect to w against central differences of that reference (and ``per_sample`` for ops whose
results have no batch axis).  Used by test_ops_keras.py and
test_ops_image_signal.py."""

import numpy as np

import pyggml as pg

__all__ = ["OpLayer", "check_op_in_model", "per_sample", "ref_per_sample"]


class OpLayer(pg.layers.Layer):
    def __init__(self, fn, **kw):
        super().__init__(**kw)
        self.fn = fn

    def build(self, input_shape):
        self.w = self.add_weight("w", tuple(input_shape[1:]), "ones")

    def call(self, x):
        return self.fn(x * self.w)


def check_op_in_model(fn, ref, x, w, rng, atol=2e-5):
    """fn's forward and gradient through a model, on inputs x (batch first) and weights w."""
    m = pg.Sequential([pg.Input(x.shape[1:]), OpLayer(fn)])
    m.compile(loss="mse", optimizer="sgd")
    m.set_weights({k: w.astype(np.float32) for k in m.get_weights()})
    got = m.predict(x.astype(np.float32), verbose=0)
    want = ref(x * w)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=atol)
    y = rng.normal(size=want.shape)
    (g,) = m.gradients(x.astype(np.float32), y.astype(np.float32)).values()

    def loss(wv):
        return np.mean((ref(x * wv) - y) ** 2)
    num = np.zeros_like(w)
    h = 1e-6
    for i in np.ndindex(*w.shape):
        d = np.zeros_like(w)
        d[i] = h
        num[i] = (loss(w + d) - loss(w - d)) / (2 * h)
    np.testing.assert_allclose(g, num, rtol=2e-3, atol=2e-4)


def per_sample(fn):
    """fn on each sample of the batch, stacked: ops whose results have no batch axis."""
    return lambda t: pg.ops.stack([fn(t[i]) for i in range(pg.ops.shape(t)[0])])


def ref_per_sample(fn):
    """The numpy reference of ``per_sample(fn)``."""
    return lambda a: np.stack([fn(a[i]) for i in range(a.shape[0])])
