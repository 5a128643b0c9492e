"""pyggml.applications.InceptionV3, Keras's keras.applications.InceptionV3: the parameter
counts against Keras's, the layer names and output shapes, a forward pass and a training
step at the smallest input size (75x75), loading a weights file, the preprocessing, the
argument checks and the module layout."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import applications as apps

# Keras 3's InceptionV3(weights=None).count_params() (299x299 inputs), with the top and without it;
# with the top, 23,817,352 of them are trainable (the rest: batch normalization's moving statistics)
KERAS_PARAMS = (23_851_784, 21_802_784)
KERAS_TRAINABLE = 23_817_352


def _images(n, size, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (n, size, size, 3)).astype("float32")


def _size(weights):
    return sum(int(np.prod(w.shape)) for w in weights)


def test_param_counts_match_keras():
    with_top, without_top = KERAS_PARAMS
    model = apps.InceptionV3(weights=None)
    assert model.count_params() == with_top
    assert _size(model.trainable_weights) == KERAS_TRAINABLE
    assert apps.InceptionV3(weights=None, include_top=False).count_params() == without_top
    # the classifier: 2048 * classes + classes
    assert apps.InceptionV3(weights=None, classes=10).count_params() == without_top + 2048 * 10 + 10


def test_keras_layer_names_and_shapes():
    model = apps.InceptionV3(weights=None)
    assert model.name == "inception_v3"
    assert len(model.layers) == 313                            # as Keras's
    expected = {"conv2d": (None, 149, 149, 32), "activation_2": (None, 147, 147, 64),
                "max_pooling2d": (None, 73, 73, 64), "activation_4": (None, 71, 71, 192),
                "max_pooling2d_1": (None, 35, 35, 192), "mixed0": (None, 35, 35, 256),
                "mixed1": (None, 35, 35, 288), "mixed2": (None, 35, 35, 288), "mixed3": (None, 17, 17, 768),
                "mixed4": (None, 17, 17, 768), "mixed7": (None, 17, 17, 768), "mixed8": (None, 8, 8, 1280),
                "mixed9_0": (None, 8, 8, 768), "concatenate": (None, 8, 8, 768), "mixed9": (None, 8, 8, 2048),
                "mixed9_1": (None, 8, 8, 768), "concatenate_1": (None, 8, 8, 768), "mixed10": (None, 8, 8, 2048),
                "conv2d_93": (None, 8, 8, 192), "batch_normalization_93": (None, 8, 8, 192),
                "activation_93": (None, 8, 8, 192), "avg_pool": (None, 2048), "predictions": (None, 1000)}
    got = {n: tuple(model.get_layer(n).output.shape) for n in expected}
    assert got == expected
    assert [layer.name for layer in model.layers[-4:]] == ["activation_93", "mixed10", "avg_pool", "predictions"]
    # batch normalization without a scale, epsilon 1e-3: beta and the two moving statistics
    bn = model.get_layer("batch_normalization")
    assert bn.scale is False and bn.epsilon == pytest.approx(1e-3)
    assert len(bn.weights) == 3
    conv = model.get_layer("conv2d_5")                         # mixed0's 1x1 branch comes first
    assert conv.kernel_size == (1, 1) and conv.filters == 64 and not conv.use_bias
    assert tuple(model.get_layer("conv2d_12").get_weights()[0].shape) == (1, 1, 256, 64)   # mixed1's first


def test_pooling_options_and_no_pooling():
    assert apps.InceptionV3(weights=None, include_top=False).output.shape == (None, None, None, 2048)
    pooled = apps.InceptionV3(weights=None, include_top=False, pooling="max")
    assert pooled.output.shape == (None, 2048)
    assert pooled.layers[-1].name == "global_max_pooling2d"     # unnamed, as in Keras
    sized = apps.InceptionV3(weights=None, include_top=False, input_shape=(75, 75, 3))
    assert sized.output.shape == (None, 1, 1, 2048)
    assert sized.get_layer("mixed7").output.shape == (None, 3, 3, 768)


def test_concatenations_keep_keras_channel_order():
    # mixed0: 1x1 | 5x5 | double 3x3 | pooling; mixed9: 1x1 | mixed9_0 (1x3, 3x1) | concatenate (1x3, 3x1) | pooling
    model = apps.InceptionV3(weights=None, include_top=False, input_shape=(75, 75, 3))
    parts = {"mixed0": ["activation_5", "activation_7", "activation_10", "activation_11"],
             "mixed9": ["activation_76", "activation_78", "activation_79", "activation_82", "activation_83",
                        "activation_84"]}
    names = [n for whole, pieces in parts.items() for n in [whole] + pieces]
    probe = pg.Model(model.input, [model.get_layer(n).output for n in names])
    x = np.random.default_rng(2).uniform(-1, 1, (2, 75, 75, 3)).astype("float32")
    outs = dict(zip(names, probe.predict(x, verbose=0)))
    for whole, pieces in parts.items():
        np.testing.assert_array_equal(outs[whole], np.concatenate([outs[n] for n in pieces], axis=-1))


def test_forward_pass_at_the_default_size():
    model = apps.InceptionV3(weights=None)
    out = model.predict(apps.inception_v3.preprocess_input(_images(2, 299)), verbose=0)
    assert out.shape == (2, 1000)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)        # softmax


def test_forward_pass_at_the_smallest_size():
    model = apps.InceptionV3(weights=None, include_top=False, input_shape=(75, 75, 3), pooling="avg")
    out = model.predict(apps.inception_v3.preprocess_input(_images(2, 75)), verbose=0)
    assert out.shape == (2, 2048)
    assert np.all(np.isfinite(out)) and np.all(out >= 0)        # averages of ReLU outputs


def test_training_step_with_a_new_head():
    pg.set_seed(1)
    base = apps.InceptionV3(weights=None, include_top=False, input_shape=(75, 75, 3), pooling="avg")
    out = pg.layers.Dense(3, activation="softmax", name="head")(base.output)
    model = pg.Model(base.input, out)
    x = apps.inception_v3.preprocess_input(_images(3, 75))
    y = np.eye(3, dtype="float32")
    kernel = np.array(model.get_layer("conv2d").get_weights()[0])
    head = np.array(model.get_layer("head").get_weights()[0])
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    history = model.fit(x, y, epochs=1, batch_size=3, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # the step reached the first convolution and the head
    assert not np.allclose(np.array(model.get_layer("conv2d").get_weights()[0]), kernel)
    assert not np.allclose(np.array(model.get_layer("head").get_weights()[0]), head)


def test_weights_file_is_loaded(tmp_path):
    model = apps.InceptionV3(weights=None, include_top=False, input_shape=(75, 75, 3))
    path = str(tmp_path / "inception.weights.h5")
    model.save_weights(path)
    loaded = apps.InceptionV3(weights=path, include_top=False, input_shape=(75, 75, 3))
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    fresh = apps.InceptionV3(weights=None, include_top=False, input_shape=(75, 75, 3))
    assert not np.allclose(fresh.get_layer("conv2d").get_weights()[0], loaded.get_layer("conv2d").get_weights()[0])


def test_preprocess_input_is_the_tf_mode():
    x = np.array([[[0.0, 127.5, 255.0]]], dtype="float32")
    out = apps.inception_v3.preprocess_input(x)
    np.testing.assert_allclose(out, [[[-1.0, 0.0, 1.0]]])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(x, [[[0.0, 127.5, 255.0]]])  # the input is left as it was
    images = _images(2, 8)
    np.testing.assert_allclose(apps.inception_v3.preprocess_input(images), images / 127.5 - 1.0, rtol=1e-6, atol=1e-6)
    ints = apps.inception_v3.preprocess_input(np.array([0, 51, 255], dtype="uint8"))
    assert ints.dtype == np.float32
    np.testing.assert_allclose(ints, [-1.0, -0.6, 1.0], rtol=1e-6)


def test_imagenet_weights_are_refused_clearly():
    with pytest.raises(ValueError, match="pretrained ImageNet weights are not available in pyggml.*weights=None"):
        apps.InceptionV3()
    with pytest.raises(ValueError, match="pretrained ImageNet weights are not available in pyggml"):
        apps.InceptionV3(include_top=False, input_shape=(150, 150, 3))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"weights": None, "include_top": False, "input_shape": (74, 100, 3)}, ValueError, "at least 75x75"),
    ({"weights": None, "include_top": False, "input_tensor": pg.Input((64, 64, 3))}, ValueError, "at least 75x75"),
    ({"weights": "imagenet", "input_shape": (224, 224, 3)}, ValueError, r"input_shape must be \(299, 299, 3\)"),
    ({"weights": "imagenet", "classes": 10}, ValueError, "classes must be 1000"),
    ({"weights": "no/such/file.weights.h5"}, ValueError, "no file at 'no/such/file.weights.h5'"),
    ({"weights": None, "input_shape": (None, None, 3)}, ValueError, "input shape must be fixed"),
    ({"weights": None, "include_top": False, "pooling": "mean"}, ValueError, "pooling must be None, 'avg' or 'max'"),
    ({"weights": None, "include_top": 1}, TypeError, "include_top must be True or False"),
])
def test_bad_arguments_raise_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        apps.InceptionV3(**kwargs)


def test_keras_module_layout():
    from pyggml.applications.inception_v3 import InceptionV3, decode_predictions, preprocess_input
    assert InceptionV3 is apps.InceptionV3 is pg.applications.InceptionV3
    assert apps.inception_v3.InceptionV3 is apps.InceptionV3
    assert decode_predictions is apps.imagenet_utils.decode_predictions
    assert preprocess_input.__name__ == "preprocess_input" and callable(preprocess_input)
    assert "InceptionV3" in apps.__all__ and "inception_v3" in apps.__all__
