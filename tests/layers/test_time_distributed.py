"""TimeDistributed through the layer harness: the wrapped layer's reference on
every step, one set of weights for all steps."""

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests
from test_convolutional import conv1d_ref
from test_core_layers import dense_ref

L = pg.layers


def per_step(inner_ref):
    def ref(hs, w, training):
        x = hs[0]
        n, steps = x.shape[:2]
        y = inner_ref([x.reshape((n * steps,) + x.shape[2:])], {k.split(".", 1)[1]: v for k, v in w.items()},
                      training)
        return y.reshape((n, steps) + y.shape[1:])
    return ref


CASES = [
    LayerCase("time_distributed_dense", lambda: L.TimeDistributed(L.Dense(3)), [(4, 2)], per_step(dense_ref())),
    LayerCase("time_distributed_dense_tanh", lambda: L.TimeDistributed(L.Dense(2, activation="tanh")), [(3, 2, 3)],
              per_step(dense_ref("tanh"))),
    LayerCase("time_distributed_conv1d", lambda: L.TimeDistributed(L.Conv1D(2, 3, padding="same")), [(3, 4, 2)],
              per_step(conv1d_ref(1, "same"))),
    LayerCase("time_distributed_maxpool1d", lambda: L.TimeDistributed(L.MaxPooling1D()), [(2, 4, 2)],
              lambda hs, w, t: np.maximum(hs[0][:, :, 0::2], hs[0][:, :, 1::2])),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_one_set_of_weights_named_after_the_wrapped_layer():
    td = L.TimeDistributed(L.Dense(5))
    m = pg.Sequential([td], input_shape=(7, 3)).compile(loss="mse", seed=0)
    assert list(m.get_weights()) == [f"{td.name}.layer.weight", f"{td.name}.layer.bias"]
    assert m.count_params() == 5 * 3 + 5
    assert td.compute_output_shape((None, 7, 3)) == (None, 7, 5)
    assert td.compute_output_shape((None, None, 3)) == (None, None, 5)
    m.free()


@pg.saving.register_serializable(package="tests")
class Doubler(pg.layers.Layer):
    """A user's layer without compute_output_shape: its shape is found by running it."""

    def call(self, inputs, training=None):
        return pg.ops.scale(inputs, 2.0)


def test_a_layer_without_compute_output_shape():
    td = L.TimeDistributed(Doubler())
    assert td.compute_output_shape((None, 4, 3)) == (None, 4, 3)
    x = np.random.default_rng(0).normal(size=(2, 4, 3)).astype(np.float32)
    m = pg.Sequential([L.Dense(3, name="d"), td], input_shape=(4, 3)).compile(loss="mse")
    w = m.get_weights()
    np.testing.assert_allclose(m.predict(x), 2 * (x @ w["d.weight"].T + w["d.bias"]), rtol=1e-5, atol=1e-6)
    m.free()


def test_bad_arguments_and_shapes_are_refused():
    with pytest.raises(TypeError, match="Layer"):
        L.TimeDistributed("dense")
    with pytest.raises(ValueError, match=r"\(steps, \.\.\.\)"):
        pg.Sequential([L.TimeDistributed(L.Dense(2))], input_shape=(4,)).compile(loss="mse")


def test_the_mask_passes_through():
    # Embedding(mask_zero) -> TimeDistributed(Dense) -> GlobalAveragePooling1D: the average
    # leaves out the padded steps, so the mask went through TimeDistributed
    x = np.array([[3, 1, 0], [2, 0, 0]], dtype=np.int32)
    m = pg.Sequential([L.Embedding(5, 3, mask_zero=True, name="emb"), L.TimeDistributed(L.Dense(2), name="td"),
                       L.GlobalAveragePooling1D()], input_shape=(3,)).compile(loss="mse")
    w = m.get_weights()
    h = w["emb.weight"][x] @ w["td.layer.weight"].T + w["td.layer.bias"]
    want = np.stack([h[0, :2].mean(axis=0), h[1, :1].mean(axis=0)])
    np.testing.assert_allclose(m.predict(x), want, rtol=1e-5, atol=1e-6)
    m.free()
