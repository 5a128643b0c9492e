"""pyggml.applications, Keras's keras.applications: the architectures (parameter counts
against Keras's, layer names and output shapes), a forward pass and a training step of
small configurations, loading a weights file, the preprocessing modes against numpy,
decode_predictions on a local class index, and the argument checks."""

import json
import subprocess
import sys

import numpy as np
import pytest

import pyggml as pg
from pyggml import applications as apps
from pyggml.applications import imagenet_utils

# Keras 3's model.count_params() of the default configurations (224x224 inputs, 299 for Xception,
# EfficientNet's own sizes), with the top and without it.
KERAS_PARAMS = {
    "ResNet50": (25_636_712, 23_587_712),
    "ResNet101": (44_707_176, 42_658_176),
    "ResNet152": (60_419_944, 58_370_944),
    "ResNet50V2": (25_613_800, 23_564_800),
    "ResNet101V2": (44_675_560, 42_626_560),
    "ResNet152V2": (60_380_648, 58_331_648),
    "MobileNetV2": (3_538_984, 2_257_984),
    "VGG16": (138_357_544, 14_714_688),
    "VGG19": (143_667_240, 20_024_384),
    "EfficientNetB0": (5_330_571, 4_049_571),
    "EfficientNetB1": (7_856_239, 6_575_239),
    "EfficientNetB2": (9_177_569, 7_768_569),
    "EfficientNetB3": (12_320_535, 10_783_535),
    "EfficientNetB4": (19_466_823, 17_673_823),
    "EfficientNetB5": (30_562_527, 28_513_527),
    "EfficientNetB6": (43_265_143, 40_960_143),
    "EfficientNetB7": (66_658_687, 64_097_687),
    "DenseNet121": (8_062_504, 7_037_504),
    "DenseNet169": (14_307_880, 12_642_880),
    "DenseNet201": (20_242_984, 18_321_984),
    "Xception": (22_910_480, 20_861_480),
}


@pytest.mark.parametrize("name", sorted(KERAS_PARAMS))
def test_param_counts_match_keras(name):
    with_top, without_top = KERAS_PARAMS[name]
    ctor = getattr(apps, name)
    assert ctor(weights=None).count_params() == with_top
    assert ctor(weights=None, include_top=False).count_params() == without_top


def test_other_widths_and_classes_change_the_counts():
    # Keras's mobilenet_v2_0.35_96 without the top: 410,208 parameters
    assert apps.MobileNetV2(alpha=0.35, input_shape=(96, 96, 3), include_top=False, weights=None).count_params() \
        == 410_208
    # ResNet50's classifier: 2048 * classes + classes
    assert apps.ResNet50(weights=None, classes=10).count_params() == 23_587_712 + 2048 * 10 + 10
    # alpha above 1 widens the last convolution too
    wide = apps.MobileNetV2(alpha=1.4, weights=None, include_top=False)
    assert wide.get_layer("Conv_1").output.shape == (None, None, None, 1792)


# (constructor, kwargs, {layer name: output shape}) at the default input size
LAYERS = [
    ("ResNet50", {}, {"conv1_conv": (None, 112, 112, 64), "pool1_pool": (None, 56, 56, 64),
                      "conv2_block1_out": (None, 56, 56, 256), "conv3_block4_out": (None, 28, 28, 512),
                      "conv4_block6_out": (None, 14, 14, 1024), "conv5_block3_out": (None, 7, 7, 2048),
                      "avg_pool": (None, 2048), "predictions": (None, 1000)}),
    ("ResNet101", {}, {"conv4_block23_out": (None, 14, 14, 1024), "conv5_block3_add": (None, 7, 7, 2048)}),
    ("ResNet50V2", {}, {"conv2_block3_out": (None, 28, 28, 256), "conv4_block6_out": (None, 7, 7, 1024),
                        "conv5_block3_out": (None, 7, 7, 2048), "post_relu": (None, 7, 7, 2048),
                        "conv3_block1_preact_relu": (None, 28, 28, 256)}),
    ("MobileNetV2", {}, {"Conv1": (None, 112, 112, 32), "bn_Conv1": (None, 112, 112, 32),
                         "expanded_conv_project_BN": (None, 112, 112, 16), "block_1_pad": (None, 113, 113, 96),
                         "block_6_expand_relu": (None, 28, 28, 192), "block_13_expand_relu": (None, 14, 14, 576),
                         "block_16_project_BN": (None, 7, 7, 320), "out_relu": (None, 7, 7, 1280),
                         "predictions": (None, 1000)}),
    ("VGG16", {}, {"block1_conv2": (None, 224, 224, 64), "block3_conv3": (None, 56, 56, 256),
                   "block5_pool": (None, 7, 7, 512), "flatten": (None, 25088), "fc2": (None, 4096)}),
    ("VGG19", {}, {"block5_conv4": (None, 14, 14, 512), "fc1": (None, 4096)}),
    ("EfficientNetB0", {}, {"rescaling": (None, 224, 224, 3), "normalization": (None, 224, 224, 3),
                            "stem_conv": (None, 112, 112, 32), "block1a_se_excite": (None, 112, 112, 32),
                            "block2b_add": (None, 56, 56, 24), "block6d_add": (None, 7, 7, 192),
                            "top_activation": (None, 7, 7, 1280), "top_dropout": (None, 1280)}),
    ("DenseNet121", {}, {"conv1_relu": (None, 112, 112, 64), "pool1": (None, 56, 56, 64),
                         "conv2_block6_concat": (None, 56, 56, 256), "pool4_pool": (None, 7, 7, 512),
                         "conv5_block16_concat": (None, 7, 7, 1024), "relu": (None, 7, 7, 1024)}),
    ("Xception", {}, {"block1_conv1_act": (None, 149, 149, 32), "block4_pool": (None, 19, 19, 728),
                      "block13_sepconv2_bn": (None, 19, 19, 1024), "block14_sepconv2_act": (None, 10, 10, 2048),
                      "avg_pool": (None, 2048)}),
]


@pytest.mark.parametrize("name,kwargs,expected", LAYERS, ids=[c[0] for c in LAYERS])
def test_keras_layer_names_and_shapes(name, kwargs, expected):
    model = getattr(apps, name)(weights=None, **kwargs)
    got = {n: tuple(model.get_layer(n).output.shape) for n in expected}
    assert got == expected


def test_keras_names_of_unnamed_layers_and_models():
    dense = apps.DenseNet121(weights=None, include_top=False)
    assert [layer.name for layer in dense.layers[:3]] == ["input_layer", "zero_padding2d", "conv1_conv"]
    assert dense.name == "densenet121"
    # ResNet's pooling layers are named, MobileNetV2's are not (as in Keras)
    assert apps.ResNet50(weights=None, include_top=False, pooling="max").layers[-1].name == "max_pool"
    mobile = apps.MobileNetV2(weights=None, include_top=False, pooling="avg", input_shape=(96, 96, 3))
    assert mobile.layers[-1].name == "global_average_pooling2d"
    # Keras's "mobilenetv2_1.00_96": pyggml's names hold no '.'
    assert mobile.name == "mobilenetv2_1_00_96"
    assert apps.EfficientNetB3(weights=None, include_top=False).name == "efficientnetb3"
    assert type(apps.EfficientNetB0(weights=None, include_top=False).get_layer("block2b_drop")).__name__ \
        == "Dropout"


def test_pooling_options_and_no_pooling():
    assert apps.ResNet50V2(weights=None, include_top=False).output.shape == (None, None, None, 2048)
    assert apps.VGG19(weights=None, include_top=False, pooling="max").output.shape == (None, 512)
    assert apps.Xception(weights=None, include_top=False, pooling="avg").output.shape == (None, 2048)
    sized = apps.DenseNet169(weights=None, include_top=False, input_shape=(64, 96, 3))
    assert sized.output.shape == (None, 2, 3, 1664)


def _images(n, size, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (n, size, size, 3)).astype("float32")


@pytest.mark.parametrize("name,size,kwargs", [("ResNet50", 32, {}), ("ResNet50V2", 32, {}),
                                              ("MobileNetV2", 32, {"alpha": 0.35}), ("VGG16", 32, {}),
                                              ("EfficientNetB0", 32, {}), ("DenseNet121", 32, {}),
                                              ("Xception", 71, {})])
def test_forward_pass_of_small_configurations(name, size, kwargs):
    model = getattr(apps, name)(weights=None, include_top=True, input_shape=(size, size, 3), classes=5, **kwargs)
    out = model.predict(_images(2, size), verbose=0)
    assert out.shape == (2, 5)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)        # softmax


@pytest.mark.parametrize("name,kwargs", [("ResNet50", {}), ("MobileNetV2", {"alpha": 0.35})])
def test_training_step_with_a_new_head(name, kwargs):
    pg.set_seed(1)
    base = getattr(apps, name)(weights=None, include_top=False, input_shape=(32, 32, 3), pooling="avg", **kwargs)
    out = pg.layers.Dense(3, activation="softmax", name="head")(base.output)
    model = pg.Model(base.input, out)
    x = _images(6, 32)
    y = np.eye(3, dtype="float32")[[0, 1, 2, 0, 1, 2]]
    first_conv = "conv1_conv" if name == "ResNet50" else "Conv1"
    kernel = np.array(model.get_layer(first_conv).get_weights()[0])
    head = np.array(model.get_layer("head").get_weights()[0])
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    history = model.fit(x, y, epochs=1, batch_size=6, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # the step reached the backbone's first convolution and the head
    assert not np.allclose(np.array(model.get_layer(first_conv).get_weights()[0]), kernel)
    assert not np.allclose(np.array(model.get_layer("head").get_weights()[0]), head)


def test_input_tensor_with_symbolic_preprocessing():
    inp = pg.Input((32, 32, 3))
    base = apps.ResNet50(weights=None, include_top=False, input_tensor=apps.resnet.preprocess_input(inp))
    assert base.input is inp                                   # the model starts at the Input it came from
    plain = apps.ResNet50(weights=None, include_top=False, input_shape=(32, 32, 3))
    plain.set_weights(base.get_weights())
    raw = _images(2, 32)
    np.testing.assert_allclose(base.predict(raw, verbose=0),
                               plain.predict(apps.resnet.preprocess_input(raw), verbose=0), rtol=1e-4, atol=1e-4)


def test_weights_file_is_loaded(tmp_path):
    model = apps.MobileNetV2(weights=None, alpha=0.35, input_shape=(32, 32, 3), classes=4)
    path = str(tmp_path / "mobile.weights.h5")
    model.save_weights(path)
    loaded = apps.MobileNetV2(weights=path, alpha=0.35, input_shape=(32, 32, 3), classes=4)
    x = _images(2, 32)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    fresh = apps.MobileNetV2(weights=None, alpha=0.35, input_shape=(32, 32, 3), classes=4)
    assert not np.allclose(fresh.get_layer("Conv1").get_weights()[0], loaded.get_layer("Conv1").get_weights()[0])


# --- preprocessing ------------------------------------------------------------------------------------------

_MEAN_BGR = np.array([103.939, 116.779, 123.68])
_TORCH_MEAN = np.array([0.485, 0.456, 0.406])
_TORCH_STD = np.array([0.229, 0.224, 0.225])


def _reference(x, mode, data_format="channels_last"):
    x = np.asarray(x, dtype=np.float64)
    if data_format == "channels_first":          # to channels last and back
        axes = (1, 2, 0) if x.ndim == 3 else (0, 2, 3, 1)
        back = (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)
        return np.transpose(_reference(np.transpose(x, axes), mode), back)
    if mode == "tf":
        return x / 127.5 - 1.0
    if mode == "torch":
        return (x / 255.0 - _TORCH_MEAN) / _TORCH_STD
    return x[..., ::-1] - _MEAN_BGR


@pytest.mark.parametrize("mode", ["caffe", "tf", "torch"])
def test_preprocess_input_modes_against_numpy(mode):
    x = _images(2, 5, seed=3)
    before = x.copy()
    got = imagenet_utils.preprocess_input(x, mode=mode)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, _reference(x, mode), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(x, before)                   # the input is not written over
    chw = np.ascontiguousarray(np.transpose(x[0], (2, 0, 1)))
    np.testing.assert_allclose(imagenet_utils.preprocess_input(chw, data_format="channels_first", mode=mode),
                               _reference(chw, mode, "channels_first"), rtol=1e-5, atol=1e-4)
    nchw = np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))
    np.testing.assert_allclose(imagenet_utils.preprocess_input(nchw, data_format="channels_first", mode=mode),
                               _reference(nchw, mode, "channels_first"), rtol=1e-5, atol=1e-4)


def test_preprocess_input_dtypes_and_lists():
    pixels = np.array([[[[0, 128, 255]]]], dtype=np.uint8)
    got = imagenet_utils.preprocess_input(pixels, mode="caffe")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [[[[255 - 103.939, 128 - 116.779, 0 - 123.68]]]], rtol=1e-6)
    assert imagenet_utils.preprocess_input(pixels.astype(np.float64), mode="tf").dtype == np.float64
    np.testing.assert_allclose(imagenet_utils.preprocess_input([[0.0, 127.5, 255.0]], mode="tf"), [[-1, 0, 1]])
    # channels last: any array of RGB triples, as in Keras
    np.testing.assert_allclose(imagenet_utils.preprocess_input([[255.0, 0.0, 255.0]], mode="torch"),
                               [(np.array([1.0, 0.0, 1.0]) - _TORCH_MEAN) / _TORCH_STD], rtol=1e-6)


@pytest.mark.parametrize("module,mode", [("resnet", "caffe"), ("resnet50", "caffe"), ("vgg16", "caffe"),
                                         ("vgg19", "caffe"), ("resnet_v2", "tf"), ("mobilenet_v2", "tf"),
                                         ("xception", "tf"), ("densenet", "torch")])
def test_family_preprocess_input_modes(module, mode):
    x = _images(1, 4, seed=5)
    np.testing.assert_allclose(getattr(apps, module).preprocess_input(x), _reference(x, mode), rtol=1e-5,
                               atol=1e-4)


def test_efficientnet_preprocess_input_is_the_identity():
    x = _images(1, 4)
    assert apps.efficientnet.preprocess_input(x) is x


@pytest.mark.parametrize("mode", ["caffe", "tf", "torch"])
def test_preprocess_input_in_a_model_matches_numpy(mode):
    inp = pg.Input((4, 4, 3))
    model = pg.Model(inp, imagenet_utils.preprocess_input(inp, mode=mode))
    x = _images(2, 4, seed=7)
    np.testing.assert_allclose(model.predict(x, verbose=0), _reference(x, mode), rtol=1e-5, atol=1e-4)


def test_preprocess_input_refuses_bad_arguments():
    x = _images(1, 4)
    with pytest.raises(ValueError, match="mode must be one of 'caffe', 'tf' or 'torch'"):
        imagenet_utils.preprocess_input(x, mode="keras")
    with pytest.raises(ValueError, match="data_format must be"):
        imagenet_utils.preprocess_input(x, data_format="NHWC")
    with pytest.raises(ValueError, match="3 color channels"):
        imagenet_utils.preprocess_input(np.zeros((1, 4, 4, 4)), mode="caffe")
    with pytest.raises(ValueError, match="3 color channels"):
        imagenet_utils.preprocess_input(np.zeros((3, 4)), mode="torch")
    with pytest.raises(ValueError, match="channels_first takes an image"):
        imagenet_utils.preprocess_input(np.zeros((3, 4)), mode="caffe", data_format="channels_first")
    with pytest.raises(TypeError, match="expected numbers"):
        imagenet_utils.preprocess_input(np.array([["a", "b", "c"]]), mode="tf")
    with pytest.raises(TypeError, match="numpy array"):
        imagenet_utils.preprocess_input("image.png")


# --- decode_predictions ----------------------------------------------------------------------------------------

@pytest.fixture
def class_index(tmp_path, monkeypatch):
    """A local class index in place of the download: class i is ("n<i>", "class_<i>")."""
    path = tmp_path / "imagenet_class_index.json"
    path.write_text(json.dumps({str(i): [f"n{i:08d}", f"class_{i}"] for i in range(1000)}))
    calls = []

    def fake_get_file(fname, origin, **kwargs):
        calls.append((fname, origin, kwargs))
        return str(path)

    monkeypatch.setattr(imagenet_utils, "CLASS_INDEX", None)
    monkeypatch.setattr(imagenet_utils, "get_file", fake_get_file)
    return calls


def test_decode_predictions_on_a_local_class_index(class_index):
    preds = np.zeros((2, 1000), dtype=np.float32)
    preds[0, [7, 42, 999]] = [0.2, 0.5, 0.3]
    preds[1, 3] = 1.0
    out = apps.resnet50.decode_predictions(preds, top=3)
    assert [t[:2] for t in out[0]] == [("n00000042", "class_42"), ("n00000999", "class_999"),
                                       ("n00000007", "class_7")]
    np.testing.assert_allclose([t[2] for t in out[0]], [0.5, 0.3, 0.2])
    assert out[1][0][:2] == ("n00000003", "class_3") and len(out[1]) == 3
    assert len(imagenet_utils.decode_predictions(preds)[0]) == 5
    # downloaded once, from Keras's URL, checked against Keras's hash, cached under "models"
    assert len(class_index) == 1
    fname, origin, kwargs = class_index[0]
    assert fname == "imagenet_class_index.json"
    assert origin == "https://storage.googleapis.com/download.tensorflow.org/data/imagenet_class_index.json"
    assert kwargs == {"cache_subdir": "models", "file_hash": "c2c37ea517e94d9795004a39431a14cb"}


def test_decode_predictions_of_a_model(class_index):
    model = apps.MobileNetV2(weights=None, alpha=0.35, input_shape=(32, 32, 3))
    preds = model.predict(_images(2, 32), verbose=0)
    out = apps.mobilenet_v2.decode_predictions(preds, top=2)
    assert len(out) == 2 and all(len(r) == 2 for r in out)
    assert out[0][0][2] == pytest.approx(float(preds[0].max()))


def test_decode_predictions_refuses_bad_arguments(class_index):
    with pytest.raises(ValueError, match=r"shape \(samples, 1000\); got an array of shape \(2, 10\)"):
        imagenet_utils.decode_predictions(np.zeros((2, 10)))
    with pytest.raises(ValueError, match=r"got an array of shape \(1000,\)"):
        imagenet_utils.decode_predictions(np.zeros(1000))
    with pytest.raises(ValueError, match="top must be a positive integer"):
        imagenet_utils.decode_predictions(np.zeros((1, 1000)), top=0)
    with pytest.raises(TypeError, match="symbolic tensor"):
        imagenet_utils.decode_predictions(pg.Input((1000,)))
    assert class_index == []                 # refused before the class index is needed


def test_decode_predictions_refuses_a_wrong_class_index(tmp_path, monkeypatch):
    path = tmp_path / "index.json"
    path.write_text(json.dumps({"0": ["n0", "zero"]}))
    monkeypatch.setattr(imagenet_utils, "CLASS_INDEX", None)
    monkeypatch.setattr(imagenet_utils, "get_file", lambda *a, **k: str(path))
    with pytest.raises(ValueError, match="does not map each of '0' ... '999'"):
        imagenet_utils.decode_predictions(np.zeros((1, 1000)))


# --- arguments ------------------------------------------------------------------------------------------------

def test_imagenet_weights_are_refused_clearly():
    for ctor in (apps.ResNet50, apps.ResNet50V2, apps.MobileNetV2, apps.VGG16, apps.VGG19, apps.EfficientNetB0,
                 apps.DenseNet121, apps.Xception):
        with pytest.raises(ValueError, match="pretrained ImageNet weights are not available in pyggml.*weights=None"):
            ctor()


@pytest.mark.parametrize("kwargs,error,match", [
    ({"weights": "no/such/file.weights.h5"}, ValueError, "no file at 'no/such/file.weights.h5'"),
    ({"weights": 3}, ValueError, "weights must be None"),
    ({"weights": "imagenet", "classes": 10}, ValueError, "classes must be 1000"),
    ({"weights": None, "classes": 0}, ValueError, "classes must be a positive integer"),
    ({"weights": None, "include_top": False, "input_shape": (31, 64, 3)}, ValueError, "at least 32x32"),
    ({"weights": None, "include_top": False, "input_shape": (64, 64)}, ValueError, "tuple of three integers"),
    ({"weights": None, "include_top": False, "input_shape": "224x224"}, ValueError, "tuple of three integers"),
    ({"weights": None, "include_top": False, "input_shape": (64, 64, 0)}, ValueError, "positive integers"),
    ({"weights": None, "input_shape": (None, None, 3)}, ValueError, "input shape must be fixed"),
    ({"weights": "imagenet", "input_shape": (200, 200, 3)}, ValueError, r"input_shape must be \(224, 224, 3\)"),
    ({"weights": "imagenet", "include_top": False, "input_shape": (64, 64, 1)}, ValueError, "3 channels"),
    ({"weights": None, "include_top": False, "pooling": "mean"}, ValueError, "pooling must be None, 'avg' or 'max'"),
    ({"weights": "imagenet", "classifier_activation": "relu"}, ValueError, "'softmax' or None"),
    ({"weights": None, "classifier_activation": "no_such_activation"}, ValueError, "unknown activation"),
    ({"weights": None, "include_top": "yes"}, TypeError, "include_top must be True or False"),
    ({"weights": None, "include_top": 1}, TypeError, "include_top must be True or False"),
    ({"weights": None, "input_tensor": np.zeros((1, 64, 64, 3))}, TypeError, "input_tensor must be a symbolic"),
])
def test_bad_arguments_raise_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        apps.ResNet50(**kwargs)


def test_family_specific_argument_checks():
    with pytest.raises(ValueError, match="at least 71x71"):
        apps.Xception(weights=None, include_top=False, input_shape=(70, 70, 3))
    with pytest.raises(ValueError, match=r"alpha must be one of \(0.35"):
        apps.MobileNetV2(alpha=0.6)
    with pytest.raises(ValueError, match="alpha .* must be a positive number"):
        apps.MobileNetV2(alpha=-1.0, weights=None)
    with pytest.raises(ValueError, match="disagrees with the shape of input_tensor"):
        apps.VGG16(weights=None, include_top=False, input_tensor=pg.Input((64, 64, 3)), input_shape=(32, 32, 3))
    with pytest.raises(ValueError, match="batch of images"):
        apps.DenseNet121(weights=None, include_top=False, input_tensor=pg.Input((64, 3)))
    with pytest.raises(ValueError, match="at least 32x32"):
        apps.EfficientNetB0(weights=None, include_top=False, input_tensor=pg.Input((16, 16, 3)))
    with pytest.warns(UserWarning, match="1 or 3 input channels"):
        apps.ResNet50(weights=None, include_top=False, input_shape=(64, 64, 5))


def test_channels_first_is_refused():
    pg.backend.set_image_data_format("channels_first")
    try:
        with pytest.raises(ValueError, match="channels_last"):
            apps.ResNet50(weights=None)
    finally:
        pg.backend.set_image_data_format("channels_last")


# --- layout -------------------------------------------------------------------------------------------------

def test_keras_module_layout():
    from pyggml.applications.densenet import DenseNet121
    from pyggml.applications.efficientnet import EfficientNetB0, EfficientNetB7
    from pyggml.applications.resnet50 import ResNet50
    assert ResNet50 is apps.resnet.ResNet50 is apps.ResNet50
    assert apps.resnet50.preprocess_input is apps.resnet.preprocess_input
    assert EfficientNetB0 is apps.EfficientNetB0 and EfficientNetB7.__name__ == "EfficientNetB7"
    assert DenseNet121 is apps.densenet.DenseNet121
    assert apps.vgg16.VGG16 is apps.VGG16 and apps.vgg19.VGG19 is apps.VGG19
    assert apps.xception.Xception is apps.Xception and apps.mobilenet_v2.MobileNetV2 is apps.MobileNetV2
    assert callable(apps.imagenet_utils.preprocess_input) and callable(apps.imagenet_utils.decode_predictions)
    for name in apps.__all__:
        assert getattr(pg.applications, name) is getattr(apps, name)


def test_import_pyggml_does_not_import_the_applications():
    code = ("import sys, pyggml; assert 'pyggml.applications' not in sys.modules; "
            "m = pyggml.applications.resnet.ResNet50; assert 'pyggml.applications' in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
