"""A fourth round of keras-io ports and Keras 3 guides: what they found, each as Keras 3 does it."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops


@keras.saving.register_keras_serializable(package="gaps4", name="squared")
def _squared(x):
    return x * x


def test_a_registered_activation_function_saves_loads_and_clones(tmp_path):
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(3, activation=_squared)(inp))
    assert model.layers[-1].get_config()["activation"] == "gaps4>squared"
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    want = model.predict(x, verbose=0)
    assert np.all(want >= 0)
    clone = keras.models.clone_model(model)
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone.predict(x, verbose=0), want, rtol=1e-6)
    path = str(tmp_path / "act.keras")
    model.save(path)
    np.testing.assert_allclose(keras.models.load_model(path).predict(x, verbose=0), want, rtol=1e-6)


def test_an_unregistered_activation_is_found_in_custom_objects(tmp_path):
    def cube(x):
        return x * x * x
    inp = keras.Input((2,))
    model = keras.Model(inp, layers.Dense(2, activation=cube)(inp))
    path = str(tmp_path / "cube.keras")
    model.save(path)
    with pytest.raises(ValueError, match="unknown activation 'cube'"):
        keras.models.load_model(path)
    x = np.ones((1, 2), np.float32)
    loaded = keras.models.load_model(path, custom_objects={"cube": cube})
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)
    with keras.saving.custom_object_scope({"cube": cube}):
        np.testing.assert_allclose(keras.models.load_model(path).predict(x, verbose=0),
                                   model.predict(x, verbose=0), rtol=1e-6)


def test_layers_have_keras_dtypes():
    class Scale(layers.Layer):
        def call(self, x):
            return ops.cast(x, self.compute_dtype) * 2.0
    model = keras.Sequential([keras.Input((3,), dtype="int32"), Scale()])
    np.testing.assert_array_equal(model.predict(np.ones((2, 3), "int32"), verbose=0), np.full((2, 3), 2.0))
    dense = layers.Dense(2)
    assert (dense.dtype, dense.compute_dtype, dense.variable_dtype) == ("float32",) * 3
    assert dense.dtype_policy.name == "float32"
    assert layers.Dense(2, dtype="mixed_float16").dtype_policy.name == "mixed_float16"
    assert layers.Dense(2, dtype=dense.dtype_policy).dtype_policy == "float32"


def test_a_model_takes_torch_tensors_outside_a_tape():
    torch = pytest.importorskip("torch")
    inp = keras.Input((4,))
    model = keras.Model(inp, layers.Dense(2)(inp))
    x = torch.rand(8, 4, requires_grad=True)
    want = model.predict(x.detach().numpy(), verbose=0)
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(model(x)), want, rtol=1e-6)


def test_accuracy_without_a_loss_reads_class_indices():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(5)])
    rng = np.random.default_rng(1)
    x, y = rng.random((32, 4)).astype(np.float32), rng.integers(0, 5, 32)
    model.compile(metrics=["accuracy"])
    _, acc = model.evaluate(x, y, verbose=0)
    assert acc == pytest.approx(np.mean(np.argmax(model.predict(x, verbose=0), axis=1) == y))


def test_set_weights_from_a_model_whose_layers_are_named_otherwise():
    inp = keras.Input((4,))
    functional = keras.Model(inp, layers.Dense(2, name="d")(inp))

    class Twin(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(2, name="d")

        def call(self, x):
            return self.d(x)
    twin = Twin()
    x = np.ones((1, 4), np.float32)
    twin(x)
    twin.set_weights(functional.get_weights())
    np.testing.assert_allclose(twin.predict(x, verbose=0), functional.predict(x, verbose=0), rtol=1e-6)
    with pytest.raises(ValueError, match="unknown weight"):
        twin.set_weights({"nope.weight": np.zeros((2, 4)), "nope.bias": np.zeros(2)})


def test_keras_odds_and_ends():
    model = keras.Sequential([keras.Input((3,)), layers.Dense(2, name="dense")])
    assert {str(v.path) for v in model.trainable_variables} == {"dense/weight", "dense/bias"}
    ds = keras.data.Dataset.from_tensor_slices(np.arange(6).reshape(1, 6)).map(lambda v: v * 2)
    np.testing.assert_array_equal(ds.get_single_element(), np.arange(6) * 2)
    with pytest.raises(ValueError, match="2 elements"):
        keras.data.Dataset.from_tensor_slices(np.arange(2)).get_single_element()
    assert keras.version() == keras.__version__
    out = ops.where(np.array([True, False]), 1, 0)
    assert out.dtype == np.int32 and list(out) == [1, 0]


def test_early_stopping_says_when_it_stops(capsys):
    model = keras.Sequential([keras.Input((1,)), layers.Dense(1, kernel_initializer="zeros")])
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=1, verbose=1, restore_best_weights=True)
    model.fit(np.ones((4, 1)), np.ones((4, 1)), epochs=10, verbose=0, callbacks=[stop])
    said = capsys.readouterr().out
    assert f"Epoch {stop.stopped_epoch + 1}: early stopping" in said
    assert "Restoring model weights from the end of the best epoch: 1." in said


def test_a_subclass_of_model_is_named_after_its_class():
    class MnistModel(keras.Model):
        pass
    inp = keras.Input((2,))
    assert MnistModel(inp, layers.Dense(1)(inp)).name == "mnist_model"
    assert keras.Model(inp, layers.Dense(1)(inp)).name.startswith("functional")
