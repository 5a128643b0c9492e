"""Maximum and Minimum (and layers.maximum / layers.minimum) through the layer harness."""

import numpy as np

import pyggml as pg
from harness import LayerCase, harness_tests

L = pg.layers


CASES = [
    LayerCase("maximum", lambda: L.Maximum(), [(3,), (3,)], lambda hs, w, t: np.maximum(hs[0], hs[1])),
    LayerCase("minimum", lambda: L.Minimum(), [(3,), (3,)], lambda hs, w, t: np.minimum(hs[0], hs[1])),
    LayerCase("maximum_three_sequences", lambda: L.Maximum(), [(2, 3)] * 3,
              lambda hs, w, t: np.maximum(np.maximum(hs[0], hs[1]), hs[2])),
    LayerCase("minimum_broadcast", lambda: L.Minimum(), [(2, 3), (1, 3)], lambda hs, w, t: np.minimum(hs[0], hs[1])),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_functional_helpers():
    a, b = pg.Input((4,)), pg.Input((4,))
    hi, lo = L.maximum([a, b]), L.minimum([a, b])
    assert isinstance(hi.layer, L.Maximum) and isinstance(lo.layer, L.Minimum)
    m = pg.Model([a, b], [hi, lo]).compile(loss="mse")
    x1 = np.array([[1, -2, 3, 0]], dtype=np.float32)
    x2 = np.array([[0, -1, 5, 0]], dtype=np.float32)
    y_hi, y_lo = m.predict([x1, x2])
    np.testing.assert_array_equal(y_hi, np.maximum(x1, x2))
    np.testing.assert_array_equal(y_lo, np.minimum(x1, x2))
    m.free()
