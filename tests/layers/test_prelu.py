"""PReLU through the layer harness: alpha per value, or shared along axes."""

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests

L = pg.layers


def prelu_ref(hs, w, training):
    x = hs[0]
    return np.where(x > 0, x, w["alpha"] * x)


CASES = [
    LayerCase("prelu", lambda: L.PReLU(), [(4,)], prelu_ref),
    LayerCase("prelu_shared_steps", lambda: L.PReLU(shared_axes=[1]), [(3, 2)], prelu_ref),
    LayerCase("prelu_per_channel_images", lambda: L.PReLU(shared_axes=[1, 2]), [(2, 3, 2)], prelu_ref),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_alpha_shape_and_keras_default():
    p = L.PReLU(shared_axes=[1, 2])
    m = pg.Sequential([p], input_shape=(5, 4, 3)).compile(loss="mse")
    w = m.get_weights()
    assert list(w) == [f"{p.name}.alpha"] and w[f"{p.name}.alpha"].shape == (1, 1, 3)
    assert not np.any(w[f"{p.name}.alpha"])                       # zeros: a ReLU at first
    m.free()


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    p = L.PReLU(alpha_initializer="ones")
    m = pg.Sequential([p], input_shape=(6,)).compile(loss="mse")
    a = np.linspace(-0.5, 0.5, 6).astype(np.float32)
    m.set_weights({f"{p.name}.alpha": a})
    want = torch.nn.functional.prelu(torch.from_numpy(x), torch.from_numpy(a))
    np.testing.assert_allclose(m.predict(x), want.numpy(), rtol=1e-6)
    m.free()


@pytest.mark.parametrize("kwargs", [{"shared_axes": [0]}, {"shared_axes": [1, 1]}, {"alpha_initializer": "nope"},
                                    {"alpha_regularizer": "nope"}, {"alpha_constraint": "nope"}])
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError):
        L.PReLU(**kwargs)


def test_variable_length_axes_must_be_shared():
    with pytest.raises(ValueError, match="shared_axes"):
        L.PReLU()(pg.Input((None, 3)))
    assert L.PReLU(shared_axes=1)(pg.Input((None, 3))).shape == (None, None, 3)
    with pytest.raises(ValueError, match="out of range"):
        pg.Sequential([L.PReLU(shared_axes=3)], input_shape=(4, 3)).compile(loss="mse")
