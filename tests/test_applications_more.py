"""pyggml.applications' later families (ConvNeXt, MobileNet, MobileNetV3, EfficientNetV2,
InceptionResNetV2, NASNet, RegNet): parameter counts against Keras's, Keras's layer names, a
forward pass, a training step and a .keras round trip of the smallest member of each family,
and Keras's argument checks."""

import subprocess
import sys

import numpy as np
import pytest

import pyggml as pg
from pyggml import applications as apps
from pyggml.applications import (convnext, efficientnet_v2, inception_resnet_v2, mobilenet, mobilenet_v3, nasnet,
                                 regnet)

# Keras 3's model.count_params() of the default configurations (weights=None), with the top and
# without it.  Derivable from the architectures; the keras.io table rounds them (28.6M, 4.3M, ...).
KERAS_PARAMS = {
    "convnext.ConvNeXtTiny": (28_589_128, 27_820_128),
    "convnext.ConvNeXtSmall": (50_223_688, 49_454_688),
    "convnext.ConvNeXtBase": (88_591_464, 87_566_464),
    "convnext.ConvNeXtLarge": (197_767_336, 196_230_336),
    "convnext.ConvNeXtXLarge": (350_196_968, 348_147_968),
    "mobilenet.MobileNet": (4_253_864, 3_228_864),
    "mobilenet_v3.MobileNetV3Small": (2_554_968, 939_120),
    "mobilenet_v3.MobileNetV3Large": (5_507_432, 2_996_352),
    "efficientnet_v2.EfficientNetV2B0": (7_200_312, 5_919_312),
    "efficientnet_v2.EfficientNetV2B1": (8_212_124, 6_931_124),
    "efficientnet_v2.EfficientNetV2B2": (10_178_374, 8_769_374),
    "efficientnet_v2.EfficientNetV2B3": (14_467_622, 12_930_622),
    "efficientnet_v2.EfficientNetV2S": (21_612_360, 20_331_360),
    "efficientnet_v2.EfficientNetV2M": (54_431_388, 53_150_388),
    "efficientnet_v2.EfficientNetV2L": (119_027_848, 117_746_848),
    "inception_resnet_v2.InceptionResNetV2": (55_873_736, 54_336_736),
    "nasnet.NASNetMobile": (5_326_716, 4_269_716),
    # without the top Keras's NASNetLarge takes (None, None, 3) inputs: its cells' adjustments of the previous
    # output cannot see the size change then and project instead (at 331x331: 84,916,818, see below)
    "nasnet.NASNetLarge": (88_949_818, 84_887_922),
}

# RegNet (tf.keras 2.9+, not in Keras 3), with the top; the keras.io table rounds them (2.7M ... 145.0M)
REGNET_PARAMS = {
    "RegNetX002": 2_705_640, "RegNetX004": 5_194_184, "RegNetX006": 6_229_320, "RegNetX008": 7_296_968,
    "RegNetX016": 9_233_640, "RegNetX032": 15_359_112, "RegNetX040": 22_194_312, "RegNetX064": 26_283_464,
    "RegNetX080": 39_663_112, "RegNetX120": 46_202_440, "RegNetX160": 54_389_704, "RegNetX320": 107_973_576,
    "RegNetY002": 3_183_844, "RegNetY004": 4_371_296, "RegNetY006": 6_084_920, "RegNetY008": 6_293_056,
    "RegNetY016": 11_255_102, "RegNetY032": 19_502_498, "RegNetY040": 20_708_928, "RegNetY064": 30_665_684,
    "RegNetY080": 39_265_812, "RegNetY120": 51_918_928, "RegNetY160": 83_712_956, "RegNetY320": 145_205_058,
}


def _ctor(path):
    module, name = path.split(".")
    return getattr(getattr(apps, module), name)


@pytest.mark.parametrize("path", sorted(KERAS_PARAMS))
def test_param_counts_match_keras(path):
    with_top, without_top = KERAS_PARAMS[path]
    assert _ctor(path)(weights=None).count_params() == with_top
    assert _ctor(path)(weights=None, include_top=False).count_params() == without_top


def test_convnext_count_follows_its_architecture():
    # a block of C channels: 7x7 depthwise (49C + C), layer norm (2C), Dense C->4C->C, layer scale (C)
    def block(c):
        return 50 * c + 2 * c + (4 * c * c + 4 * c) + (4 * c * c + c) + c
    depths, dims = (3, 3, 9, 3), (96, 192, 384, 768)
    total = 48 * dims[0] + dims[0] + 2 * dims[0]                                       # stem
    total += sum(2 * dims[i] + 4 * dims[i] * dims[i + 1] + dims[i + 1] for i in range(3))  # downsampling
    total += sum(d * block(c) for d, c in zip(depths, dims))
    total += 2 * dims[3] + dims[3] * 1000 + 1000                                       # head
    assert total == KERAS_PARAMS["convnext.ConvNeXtTiny"][0]


def _regnet_count(depths, widths, group_width, y_blocks):
    """RegNet's parameters from its configuration (batch normalization: 4 values per channel)."""
    total, f_in = 27 * 32 + 4 * 32, 32
    for depth, w in zip(depths, widths):
        for j in range(depth):
            c_in = f_in if j == 0 else w
            groups = w // group_width or 1
            total += (c_in * w + 4 * w) * (2 if j == 0 else 1) + 9 * w * (w // groups) + 4 * w + w * w + 4 * w
            if y_blocks:
                se = int(c_in * 0.25)
                total += w * se + se + se * w + w
        f_in = w
    return total + widths[-1] * 1000 + 1000


@pytest.mark.parametrize("name", sorted(REGNET_PARAMS))
def test_regnet_param_counts(name):
    depths, widths, group_width = regnet._CONFIGS[name[-4:].lower()]
    assert REGNET_PARAMS[name] == _regnet_count(depths, widths, group_width, name[6] == "Y")
    model = getattr(regnet, name)(weights=None)
    assert model.count_params() == REGNET_PARAMS[name]
    assert model.name == name.lower()


def test_nasnet_large_at_its_own_size():
    assert nasnet.NASNetLarge(weights=None, include_top=False, input_shape=(331, 331, 3)).count_params() \
        == 88_949_818 - (4032 * 1000 + 1000)


def test_other_widths_change_the_counts():
    # Keras's mobilenet_0.25_224 .. 0.75: 475,544 / 1,342,536 / 2,601,976 parameters with the top
    assert [apps.mobilenet.MobileNet(weights=None, alpha=a).count_params() for a in (0.25, 0.5, 0.75)] \
        == [475_544, 1_342_536, 2_601_976]
    assert mobilenet_v3.MobileNetV3Small(weights=None, minimalistic=True).count_params() == 2_056_848
    assert mobilenet_v3.MobileNetV3Large(weights=None, alpha=0.75).count_params() == 4_012_616
    assert mobilenet.MobileNet(weights=None, include_top=False, depth_multiplier=2).count_params() \
        == 3_228_864 + sum(9 * c + 2 * 2 * c for c in (32, 64, 128, 128, 256, 256) + (512,) * 6 + (1024,)) \
        + sum(c * p for c, p in zip((32, 64, 128, 128, 256, 256) + (512,) * 6 + (1024,),
                                    (64, 128, 128, 256, 256) + (512,) * 6 + (1024, 1024)))


# (constructor, kwargs, {layer name: output shape}) at the default input size
LAYERS = [
    ("convnext.ConvNeXtTiny", {}, {
        "convnext_tiny_prestem_normalization": (None, 224, 224, 3), "convnext_tiny_stem": (None, 56, 56, 96),
        "convnext_tiny_stage_0_block_2_layer_scale": (None, 56, 56, 96),
        "convnext_tiny_downsampling_block_0": (None, 28, 28, 192),
        "convnext_tiny_stage_2_block_8_depthwise_conv": (None, 14, 14, 384),
        "convnext_tiny_stage_3_block_2_pointwise_conv_1": (None, 7, 7, 3072),
        "convnext_tiny_stage_3_block_2_identity": (None, 7, 7, 768),
        "convnext_tiny_head_gap": (None, 768), "convnext_tiny_head_layernorm": (None, 768),
        "convnext_tiny_head_dense": (None, 1000)}),
    ("mobilenet.MobileNet", {}, {
        "conv1": (None, 112, 112, 32), "conv1_relu": (None, 112, 112, 32), "conv_dw_1": (None, 112, 112, 32),
        "conv_pad_2": (None, 113, 113, 64), "conv_pw_2_relu": (None, 56, 56, 128),
        "conv_pw_13_relu": (None, 7, 7, 1024), "dropout": (None, 1, 1, 1024), "conv_preds": (None, 1, 1, 1000),
        "reshape_2": (None, 1000), "predictions": (None, 1000)}),
    ("mobilenet_v3.MobileNetV3Small", {"input_shape": (224, 224, 3)}, {
        "conv": (None, 112, 112, 16), "expanded_conv_depthwise_pad": (None, 113, 113, 16),
        "expanded_conv_squeeze_excite_mul": (None, 56, 56, 16), "expanded_conv_project_bn": (None, 56, 56, 16),
        "expanded_conv_1_expand": (None, 56, 56, 72), "expanded_conv_2_add": (None, 28, 28, 24),
        "expanded_conv_3_squeeze_excite_conv": (None, 1, 1, 24), "expanded_conv_10_add": (None, 7, 7, 96),
        "conv_1": (None, 7, 7, 576), "conv_2": (None, 1, 1, 1024), "logits": (None, 1, 1, 1000),
        "predictions": (None, 1000)}),
    ("mobilenet_v3.MobileNetV3Large", {"input_shape": (224, 224, 3)}, {
        "expanded_conv_add": (None, 112, 112, 16), "expanded_conv_6_depthwise": (None, 14, 14, 240),
        "expanded_conv_14_add": (None, 7, 7, 160), "conv_1_bn": (None, 7, 7, 960), "conv_2": (None, 1, 1, 1280)}),
    ("efficientnet_v2.EfficientNetV2B0", {}, {
        "rescaling": (None, 224, 224, 3), "normalization": (None, 224, 224, 3), "stem_conv": (None, 112, 112, 32),
        "block1a_project_activation": (None, 112, 112, 16), "block2a_expand_conv": (None, 56, 56, 64),
        "block2b_drop": (None, 56, 56, 32), "block2b_add": (None, 56, 56, 32), "block4a_dwconv2": (None, 14, 14, 192),
        "block4a_se_excite": (None, 14, 14, 192), "block6h_add": (None, 7, 7, 192),
        "top_activation": (None, 7, 7, 1280), "avg_pool": (None, 1280), "top_dropout": (None, 1280)}),
    ("efficientnet_v2.EfficientNetV2S", {}, {
        "rescaling": (None, 384, 384, 3), "block1b_add": (None, 192, 192, 24), "block6o_add": (None, 12, 12, 256),
        "top_conv": (None, 12, 12, 1280)}),
    ("inception_resnet_v2.InceptionResNetV2", {}, {
        "mixed_5b": (None, 35, 35, 320), "block35_1_mixed": (None, 35, 35, 128), "block35_10_ac": (None, 35, 35, 320),
        "mixed_6a": (None, 17, 17, 1088), "block17_20_conv": (None, 17, 17, 1088), "mixed_7a": (None, 8, 8, 2080),
        "block8_9_ac": (None, 8, 8, 2080), "block8_10_conv": (None, 8, 8, 2080), "conv_7b_bn": (None, 8, 8, 1536),
        "conv_7b_ac": (None, 8, 8, 1536), "avg_pool": (None, 1536), "predictions": (None, 1000)}),
    ("nasnet.NASNetMobile", {}, {
        "stem_conv1": (None, 111, 111, 32), "stem_bn1": (None, 111, 111, 32),
        "reduction_concat_stem_1": (None, 56, 56, 44), "adjust_bn_stem_2": (None, 56, 56, 22),
        "reduction_concat_stem_2": (None, 28, 28, 88), "normal_concat_0": (None, 28, 28, 264),
        "normal_add_5_3": (None, 28, 28, 44), "reduction_add3_reduce_4": (None, 14, 14, 88),
        "reduction_concat_reduce_4": (None, 14, 14, 352), "normal_concat_5": (None, 14, 14, 528),
        "reduction_concat_reduce_8": (None, 7, 7, 704), "normal_concat_12": (None, 7, 7, 1056),
        "separable_conv_2_bn_normal_left1_12": (None, 7, 7, 176), "predictions": (None, 1000)}),
    ("nasnet.NASNetLarge", {}, {
        "stem_conv1": (None, 165, 165, 96), "normal_concat_5": (None, 42, 42, 1008),
        "reduction_concat_reduce_6": (None, 21, 21, 1344), "normal_concat_18": (None, 11, 11, 4032)}),
    ("regnet.RegNetY002", {}, {
        "regnety002_prestem_rescaling": (None, 224, 224, 3), "regnety002_stem_relu": (None, 112, 112, 32),
        "regnety002_Stage_0_YBlock_0_skip_bn": (None, 56, 56, 24),
        "regnety002_Stage_0_YBlock_0_squeeze_and_excite_squeeze": (None, 1, 1, 8),
        "regnety002_Stage_2_YBlock_3_exit_relu": (None, 14, 14, 152),
        "regnety002_Stage_3_YBlock_6_conv_3x3": (None, 7, 7, 368),
        "regnety002_head_gap": (None, 368), "regnety002head_dense": (None, 1000)}),
    ("regnet.RegNetX080", {}, {
        "regnetx080_Stage_0_XBlock_0_conv_3x3": (None, 56, 56, 80),
        "regnetx080_Stage_3_XBlock_0_exit_relu": (None, 7, 7, 1920)}),
]


@pytest.mark.parametrize("path,kwargs,expected", LAYERS, ids=[c[0] for c in LAYERS])
def test_keras_layer_names_and_shapes(path, kwargs, expected):
    model = _ctor(path)(weights=None, **kwargs)
    got = {n: tuple(model.get_layer(n).output.shape) for n in expected}
    assert got == expected


def test_keras_model_and_pooling_names():
    assert convnext.ConvNeXtTiny(weights=None).name == "convnext_tiny"
    assert type(convnext.ConvNeXtTiny(weights=None).get_layer("convnext_tiny_stem")).__name__ == "Sequential"
    assert mobilenet.MobileNet(weights=None, alpha=0.5, input_shape=(128, 128, 3)).name == "mobilenet_0_50_128"
    assert mobilenet.MobileNet(weights=None, input_shape=(100, 100, 3), include_top=False).name \
        == "mobilenet_1_00_100"
    v3 = mobilenet_v3.MobileNetV3Large(weights=None, include_top=False, pooling="max")
    assert v3.name == "MobileNetV3Large" and v3.layers[-1].name == "max_pool"
    # ConvNeXt ends with a layer normalization without the top, pooled or not
    assert convnext.ConvNeXtTiny(weights=None, include_top=False).output.shape == (None, None, None, 768)
    last = convnext.ConvNeXtTiny(weights=None, include_top=False, pooling="avg").layers[-1]
    assert type(last).__name__ == "LayerNormalization"
    # MobileNetV3 takes any input size, even with the top; ConvNeXt without preprocessing starts at its stem
    assert mobilenet_v3.MobileNetV3Small(weights=None).input.shape == (None, None, None, 3)
    plain = convnext.ConvNeXtTiny(weights=None, include_preprocessing=False, include_top=False)
    assert plain.layers[1].name == "convnext_tiny_stem"


def _images(n, size, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (n, size, size, 3)).astype("float32")


# the smallest member of each family: (constructor, its own kwargs, input size, a weight that a step must change);
# InceptionResNetV2 and NASNetMobile (5-7 s each, CI time) are built and counted above and their own layer
# round-trips below
SMALLEST = [
    ("convnext.ConvNeXtTiny", {}, 32, "convnext_tiny_stage_0_block_0_pointwise_conv_1"),
    ("mobilenet.MobileNet", {"alpha": 0.25}, 32, "conv1"),
    ("mobilenet_v3.MobileNetV3Small", {"alpha": 0.75}, 32, "conv"),
    ("efficientnet_v2.EfficientNetV2B0", {}, 32, "stem_conv"),
    ("regnet.RegNetX002", {}, 32, "regnetx002_stem_conv"),
]


@pytest.mark.parametrize("path,kwargs,size,layer", SMALLEST, ids=[c[0] for c in SMALLEST])
def test_forward_training_step_and_round_trip(path, kwargs, size, layer, tmp_path):
    pg.set_seed(3)
    ctor = _ctor(path)
    x = _images(2, size)
    # one model (each build of the large families costs seconds): the forward pass twice, a step, a round trip
    model = ctor(weights=None, include_top=True, classes=3, input_shape=(size, size, 3), **kwargs)
    out = model.predict(x, verbose=0)
    assert out.shape == (2, 3) and np.all(np.isfinite(out))
    np.testing.assert_array_equal(model.predict(x, verbose=0), out)
    y = np.eye(3, dtype="float32")[[0, 2]]
    before = [np.array(w) for w in model.get_layer(layer).get_weights()]
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    history = model.fit(x, y, epochs=1, batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = model.get_layer(layer).get_weights()
    assert not np.allclose(np.array(after[0]), before[0])
    preds = model.predict(x, verbose=0)
    assert preds.shape == (2, 3)
    np.testing.assert_allclose(preds.sum(axis=1), 1.0, rtol=1e-5)
    path_ = str(tmp_path / "model.keras")
    model.save(path_)
    loaded = pg.models.load_model(path_)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), preds)
    assert [w.name for w in loaded.layers] == [w.name for w in model.layers]


def test_convnext_stochastic_depth_and_layer_scale(tmp_path):
    pg.set_seed(0)
    model = convnext.build_convnext((1, 1, 1, 1), (8, 16, 16, 16), "tiny_cnx", True, True, None, None, (32, 32, 3),
                                    None, 3, "softmax", drop_path_rate=0.5)
    # the rate grows linearly from 0 (the first block: no layer) to drop_path_rate
    drops = [layer for layer in model.layers if isinstance(layer, convnext.StochasticDepth)]
    assert [round(d.drop_path_rate, 4) for d in drops] == [0.1667, 0.3333, 0.5]
    assert model.get_layer("tiny_cnx_stage_0_block_0_identity") is not None
    scale = model.get_layer("tiny_cnx_stage_1_block_0_layer_scale")
    np.testing.assert_array_equal(scale.get_weights()[0], np.full(16, 1e-6, np.float32))
    # training: each sample's branch is kept (scaled by 2) or dropped whole; inference: the identity
    inp = pg.Input((4, 4, 2))
    sd = pg.Model(inp, convnext.StochasticDepth(0.5)(inp))
    ones = np.ones((16, 4, 4, 2), np.float32)
    got = np.asarray(sd(ones, training=True)).reshape(16, -1)
    assert set(np.unique(got)) <= {0.0, 2.0} and np.all(got.min(axis=1) == got.max(axis=1))
    np.testing.assert_array_equal(sd.predict(ones, verbose=0), ones)
    path = str(tmp_path / "cnx.keras")
    model.save(path)
    loaded = pg.models.load_model(path)
    assert loaded.get_layer(drops[-1].name).get_config()["drop_path_rate"] == 0.5
    assert isinstance(loaded.get_layer(scale.name), convnext.LayerScale)
    x = _images(2, 32)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


# --- arguments ------------------------------------------------------------------------------------------------

ALL = sorted(KERAS_PARAMS) + ["regnet.RegNetX002", "regnet.RegNetY320"]


@pytest.mark.filterwarnings("ignore:MobileNetV3")
@pytest.mark.parametrize("path", ALL)
def test_imagenet_weights_are_refused(path):
    with pytest.raises(ValueError, match="pretrained ImageNet weights are not available in pyggml"):
        _ctor(path)()


# one constructor of each family, with its smallest input side
REPRESENTATIVES = {"convnext.ConvNeXtTiny": 32, "mobilenet.MobileNet": 32, "mobilenet_v3.MobileNetV3Small": 32,
                   "efficientnet_v2.EfficientNetV2B0": 32, "inception_resnet_v2.InceptionResNetV2": 75,
                   "nasnet.NASNetMobile": 32, "regnet.RegNetX002": 32}


@pytest.mark.parametrize("kwargs,match", [
    ({"weights": "imagenet", "classes": 10}, "classes must be 1000"),
    ({"weights": None, "include_top": False, "input_shape": (64, 64)}, "tuple of three integers"),
    ({"weights": None, "include_top": False, "pooling": "mean"}, "pooling must be None, 'avg' or 'max'"),
    ({"weights": "imagenet", "classifier_activation": "relu"}, "'softmax' or None"),
    ({"weights": None, "classifier_activation": "no_such_activation"}, "unknown activation"),
    ({"weights": "no/such/file.weights.h5"}, "no file at"),
])
@pytest.mark.parametrize("path", sorted(REPRESENTATIVES))
def test_bad_arguments_raise_as_in_keras(path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _ctor(path)(**kwargs)


@pytest.mark.parametrize("path", sorted(REPRESENTATIVES))
def test_smallest_input_side(path):
    side = REPRESENTATIVES[path]
    with pytest.raises(ValueError, match=f"at least {side}x{side}"):
        _ctor(path)(weights=None, include_top=False, input_shape=(side - 1, 2 * side, 3))
    assert _ctor(path)(weights=None, include_top=False, input_shape=(side, side, 3)).output.shape[1:3] == (1, 1)


def test_family_specific_argument_checks():
    with pytest.raises(ValueError, match=r"input_shape must be \(224, 224, 3\)"):
        convnext.ConvNeXtTiny(input_shape=(200, 200, 3))
    with pytest.raises(ValueError, match="input shape must be fixed"):
        convnext.ConvNeXtTiny(weights=None, input_shape=(None, None, 3))
    with pytest.raises(TypeError, match="include_preprocessing must be True or False"):
        convnext.ConvNeXtTiny(weights=None, include_preprocessing="yes")
    with pytest.raises(ValueError, match="depth_multiplier must be 1"):
        mobilenet.MobileNet(depth_multiplier=2)
    with pytest.raises(ValueError, match=r"alpha must be one of \(0.25"):
        mobilenet.MobileNet(alpha=0.35)
    with pytest.raises(ValueError, match="alpha .* must be a positive number"):
        mobilenet.MobileNet(weights=None, alpha=0)
    with pytest.raises(ValueError, match="dropout must be a rate"):
        mobilenet.MobileNet(weights=None, dropout=1.5)
    with pytest.raises(ValueError, match="alpha must be 0.75 or 1.0"):
        mobilenet_v3.MobileNetV3Large(alpha=0.5)
    with pytest.raises(ValueError, match="alpha must be 0.75 or 1.0"):
        mobilenet_v3.MobileNetV3Small(alpha=0.75, minimalistic=True)
    with pytest.raises(ValueError, match="at least 32x32"):
        mobilenet_v3.MobileNetV3Small(weights=None, input_shape=(16, 16, 3))
    with pytest.warns(UserWarning, match="224x224"):
        with pytest.raises(ValueError, match="pretrained ImageNet weights"):
            mobilenet_v3.MobileNetV3Small(input_shape=(96, 96, 3))
    with pytest.warns(UserWarning, match="weights for 224x224"):
        with pytest.raises(ValueError, match="pretrained ImageNet weights"):
            mobilenet.MobileNet(include_top=False, input_shape=(100, 100, 3))
    with pytest.raises(TypeError, match="include_preprocessing must be True or False"):
        efficientnet_v2.EfficientNetV2S(weights=None, include_preprocessing=1)
    with pytest.raises(ValueError, match=r"input_shape must be \(299, 299, 3\)"):
        inception_resnet_v2.InceptionResNetV2(input_shape=(224, 224, 3))
    with pytest.raises(ValueError, match="input shape must be static"):
        nasnet.NASNetLarge(include_top=False, input_shape=(None, None, 3))
    with pytest.raises(ValueError, match="penultimate_filters must be a multiple"):
        nasnet.build_nasnet((32, 32, 3), 1000, 1, 8, False, 2, False, None, None, None, 10, 224, None)
    with pytest.raises(ValueError, match=r"input_shape must be \(224, 224, 3\)"):
        regnet.RegNetY040(input_shape=(256, 256, 3))
    with pytest.raises(ValueError, match="block_type must be 'X' or 'Y'"):
        regnet.build_regnet((1,) * 4, (8,) * 4, 8, "Z", 224, "r", True, False, None, None, None, None, 10, None)


def test_preprocess_input():
    x = _images(1, 4)
    for module in (convnext, mobilenet_v3, efficientnet_v2, regnet):         # the models preprocess themselves
        assert module.preprocess_input(x) is x
    for module in (mobilenet, inception_resnet_v2, nasnet):                  # "tf": pixels to [-1, 1]
        np.testing.assert_allclose(module.preprocess_input(x), x / 127.5 - 1.0, rtol=1e-5, atol=1e-5)
    for module in (convnext, mobilenet, mobilenet_v3, efficientnet_v2, inception_resnet_v2, nasnet, regnet):
        assert module.decode_predictions is apps.imagenet_utils.decode_predictions


def test_built_in_preprocessing_layers():
    b0 = efficientnet_v2.EfficientNetV2B0(weights=None, include_top=False)
    s = efficientnet_v2.EfficientNetV2S(weights=None, include_top=False)
    assert [type(layer).__name__ for layer in b0.layers[1:3]] == ["Rescaling", "Normalization"]
    assert type(s.layers[1]).__name__ == "Rescaling" and s.layers[2].name == "stem_conv"
    assert s.name == "efficientnetv2-s"
    assert efficientnet_v2.EfficientNetV2B0(weights=None, include_preprocessing=False).layers[1].name == "stem_conv"
    assert regnet.RegNetX002(weights=None, include_preprocessing=False).layers[1].name == "regnetx002_stem_conv"
    # RegNet's first argument is the model's name, as in tf.keras
    assert regnet.RegNetX002("my_regnet", weights=None).layers[1].name == "my_regnet_prestem_rescaling"
    assert mobilenet_v3.MobileNetV3Small(weights=None, include_preprocessing=False).layers[1].name == "conv"
    assert inception_resnet_v2.InceptionResNetV2(weights=None).name == "inception_resnet_v2"
    assert nasnet.NASNetMobile(weights=None, include_top=False).input.shape == (None, 224, 224, 3)
    assert nasnet.NASNetLarge(weights=None).name == "NASNet"


def test_a_saved_convnext_loads_in_a_new_process_without_importing_the_applications(tmp_path):
    # its LayerScale is registered when pyggml.applications is imported, which loading does itself
    path = tmp_path / "cnx.keras"
    model = convnext.ConvNeXtTiny(weights=None, include_top=False, input_shape=(32, 32, 3), pooling="avg")
    model.save(path)
    x = _images(2, 32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", model.predict(x, verbose=0))
    code = (f"import numpy as np, sys, pyggml as pg; assert 'pyggml.applications' not in sys.modules; "
            f"m = pg.models.load_model({str(path)!r}); "
            f"np.testing.assert_array_equal(m.predict(np.load({str(tmp_path / 'x.npy')!r}), verbose=0), "
            f"np.load({str(tmp_path / 'y.npy')!r})); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_inception_resnet_v2_s_scale_layer_computes_and_round_trips(tmp_path):
    scale = inception_resnet_v2.CustomScaleLayer(0.17)
    a, b = _images(2, 4), _images(2, 4, seed=1)
    np.testing.assert_allclose(np.asarray(scale([a, b])), a + 0.17 * b, rtol=1e-6)
    again = inception_resnet_v2.CustomScaleLayer.from_config(scale.get_config())
    assert again.scale == pytest.approx(0.17)
    inp = pg.Input((8, 8, 3))
    out = inception_resnet_v2.CustomScaleLayer(0.5)([inp, pg.layers.Conv2D(3, 1)(inp)])
    model = pg.Model(inp, out)
    x = _images(2, 8) / 255.0
    model.save(tmp_path / "s.keras")
    np.testing.assert_array_equal(pg.models.load_model(tmp_path / "s.keras").predict(x, verbose=0),
                                  model.predict(x, verbose=0))
