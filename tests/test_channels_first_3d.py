"""data_format="channels_first" for the 3-D (volume) layers, ZeroPadding1D's data_format and
Conv3D's groups, against real Keras 3.15.1 and against pyggml's channels-last layers."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers as L

CF = "channels_first"
RNG = np.random.default_rng(11)


def _data(shape, k=0.0):
    n = int(np.prod(shape))
    return np.sin(np.arange(n) * 0.37 + 0.1 + k).reshape(shape).astype("float32")


def _weights(layer):
    """Deterministic weights in Keras's layout (the same formula made KERAS below)."""
    return [np.cos(np.arange(w.size) * 0.53 + i).reshape(w.shape).astype("float32") * 0.3
            for i, w in enumerate(layer.get_weights())]


def _to_last(a):
    return np.moveaxis(a, 1, -1)


def _to_first(a):
    return np.moveaxis(a, -1, 1)


CASES = {
    "conv3d": (lambda: L.Conv3D(2, 2, data_format=CF), (1, 2, 3, 3, 3)),
    "conv3d_same_strided": (lambda: L.Conv3D(2, (2, 3, 2), strides=(1, 2, 1), padding="same", activation="relu",
                                             data_format=CF), (1, 2, 3, 3, 2)),
    "conv3d_groups": (lambda: L.Conv3D(4, 2, groups=2, data_format=CF), (1, 4, 2, 3, 3)),
    "conv3d_groups_last": (lambda: L.Conv3D(4, (1, 2, 2), groups=2, padding="same"), (1, 2, 2, 2, 4)),
    "conv3dt": (lambda: L.Conv3DTranspose(2, 2, strides=(1, 2, 1), data_format=CF), (1, 2, 1, 2, 2)),
    "maxpool3d": (lambda: L.MaxPooling3D(2, strides=(1, 2, 2), padding="same", data_format=CF), (1, 2, 3, 3, 4)),
    "avgpool3d": (lambda: L.AveragePooling3D(2, strides=(1, 2, 2), padding="same", data_format=CF),
                  (1, 2, 3, 3, 4)),
    "gap3d_keep": (lambda: L.GlobalAveragePooling3D(data_format=CF, keepdims=True), (2, 3, 2, 2, 2)),
    "gmp3d": (lambda: L.GlobalMaxPooling3D(data_format=CF), (2, 3, 2, 2, 2)),
    "upsampling3d": (lambda: L.UpSampling3D((1, 2, 1), data_format=CF), (1, 2, 2, 1, 2)),
    "zeropad3d": (lambda: L.ZeroPadding3D(((1, 0), (0, 1), (1, 1)), data_format=CF), (1, 2, 1, 1, 2)),
    "crop3d": (lambda: L.Cropping3D(((1, 0), (0, 1), (1, 1)), data_format=CF), (1, 2, 3, 3, 4)),
    "zeropad1d": (lambda: L.ZeroPadding1D((1, 2), data_format=CF), (1, 2, 3)),
    "adaptive_avg3d": (lambda: L.AdaptiveAveragePooling3D((2, 1, 2), data_format=CF), (1, 2, 3, 2, 5)),
    "adaptive_max3d": (lambda: L.AdaptiveMaxPooling3D((2, 1, 2), data_format=CF), (1, 2, 3, 2, 5)),
}

# Computed once with real Keras 3.15.1 (torch backend): the same layer, input _data(shape) and
# weights _weights(layer) (after build), output shape and values (layer(x).ravel()).
KERAS = {
    "conv3d": ((1, 2, 2, 2, 2), [
        0.043191701, 0.21369967, 0.51162827, 0.59872574, 0.19474046, 0.024891317, -0.23862395, -0.29662457,
        0.13509053, 0.28839248, 0.46717677, 0.46846148, -0.19215259, -0.32875618, -0.45126623, -0.4205915
    ]),
    "conv3d_same_strided": ((1, 2, 3, 2, 2), [
        0.22537321, 0, 0.24588378, 0.31528577, 0.13733822, 0.46915576, 0, 0, 0.078934625, 0.33589557,
        0.13675606, 0.010168284, 0.20624557, 0, 0.029867601, 0.090034798, 0, 0.1882055, 0, 0, 0, 0, 0.056951247,
        0
    ]),
    "conv3d_groups": ((1, 4, 1, 2, 2), [
        -0.088397354, 0.057323806, 0.3696633, 0.49400792, -0.35299909, -0.26004338, 0.018854219, 0.16704863,
        -0.4387503, -0.33265853, -0.060515769, 0.068702042, -0.63214666, -0.5984962, -0.40276673, -0.26717895
    ]),
    "conv3d_groups_last": ((1, 2, 2, 2, 4), [
        0.17910716, 0.17907611, -0.025695391, -0.22698548, 0.60312372, 0.25644863, -0.022587627, -0.33304527,
        0.0722702, -0.15010707, -0.18883416, -0.24584478, 0.020092085, 0.016557546, -0.087256461, -0.10104777,
        0.090426303, 0.14332379, 0.064650774, -0.081567392, 0.55209261, 0.18704863, -0.086706161, -0.44431889,
        0.10183433, -0.15407942, -0.26736432, -0.33773309, 0.058558717, 0.050495222, -0.032919116, -0.037616432
    ]),
    "conv3dt": ((1, 2, 2, 4, 3), [
        0.45087188, 0.25831291, -0.15451872, 0.16573599, 0.39260814, 0.52648932, 0.57501602, 0.24546438,
        -0.099845558, 0.073091947, 0.44509888, 0.54949427, -0.13000786, -0.14390928, 0.14708647, 0.42426378,
        0.21004233, -0.18865365, -0.16984311, -0.17882892, 0.071478136, 0.55315912, 0.1893295, -0.14285275,
        0.02111673, -0.20943999, -0.35839707, 0.2985447, 0.32194594, 0.042647243, 0.11722787, -0.2614162,
        -0.37857616, 0.33357415, 0.35841808, 0.11770834, -0.25719565, -0.047934759, 0.35519245, -0.028883308,
        -0.2427182, -0.33027729, -0.38518465, -0.029149313, 0.30706373, 0.052561045, -0.29628566, -0.36153981
    ]),
    "maxpool3d": ((1, 2, 3, 2, 2), [
        0.99995762, 0.93561602, 0.99987173, 0.9264155, 0.43025747, 0.74917436, 0.99987173, 0.9264155,
        0.43025747, -0.2909523, -0.25357145, 0.46499538, 0.9403404, 0.99973935, 0.92119813, 0.41791454,
        0.75813222, 0.99956053, 0.92119813, 0.94489008, -0.30396461, -0.24036439, 0.47701809, 0.94489008
    ]),
    "avgpool3d": ((1, 2, 3, 2, 2), [
        0.045296885, 0.327764, 0.43373704, 0.04641322, -0.43257445, -0.36920574, 0.27452296, 0.5580923,
        -0.33533347, -0.68171704, -0.41988987, 0.2891902, 0.33171028, 0.43867379, 0.038334846, -0.37154263,
        -0.36593893, -0.10692865, 0.56082189, 0.5466184, -0.68505138, -0.6677016, 0.30196682, 0.85372424
    ]),
    "gap3d_keep": ((2, 3, 1, 1, 1), [
        0.66631585, -0.6339848, 0.58080506, -0.50852525, 0.41952246, -0.31672344
    ]),
    "gmp3d": ((2, 3), [
        0.99995762, 0.081502154, 0.99987173, 0.43025747, 0.99973935, 0.72288138
    ]),
    "upsampling3d": ((1, 2, 2, 2, 2), [
        0.099833414, 0.45288628, 0.099833414, 0.45288628, 0.74464309, 0.93561602, 0.74464309, 0.93561602,
        0.99995762, 0.92895973, 0.99995762, 0.92895973, 0.73223144, 0.43639907, 0.73223144, 0.43639907
    ]),
    "zeropad3d": ((1, 2, 2, 2, 4), [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0.099833414, 0.45288628, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0.74464309, 0.93561602, 0, 0, 0, 0, 0
    ]),
    "crop3d": ((1, 2, 2, 2, 2), [
        -0.98053837, -0.84318775, 0.10661169, 0.45895147, 0.07470829, -0.2909523, -0.98632389, -0.97917771,
        -0.58067369, -0.24697366, 0.75813222, 0.94263715, -0.62789953, -0.86685115, -0.83202118, -0.57511216
    ]),
    "zeropad1d": ((1, 2, 6), [
        0, 0.099833414, 0.45288628, 0.74464309, 0, 0, 0, 0.93561602, 0.99995762, 0.92895973, 0, 0
    ]),
    "adaptive_avg3d": ((1, 2, 2, 1, 2), [
        0.016348168, 0.11829382, -0.097330481, -0.15612113, -0.15496875, -0.092404157, 0.1141142, 0.010217061
    ]),
    "adaptive_max3d": ((1, 2, 2, 1, 2), [
        0.92895973, 0.99995762, 0.99987173, 0.9264155, 0.9403404, 0.99973935, 0.99956053, 0.94263715
    ]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_keras_literal_values(name, graph_path):
    make, shape = CASES[name]
    layer = make()
    layer.build(shape)
    if layer.get_weights():
        layer.set_weights(_weights(layer))
    want_shape, want = KERAS[name]
    got = np.asarray(layer(_data(shape)))
    assert got.shape == want_shape
    np.testing.assert_allclose(got.ravel(), np.asarray(want, dtype=np.float32), rtol=1e-5, atol=1e-5)
    # the same through a model (symbolic Input), and its output shape
    inp = pg.Input(shape[1:])
    out = layer(inp)
    assert tuple(out.shape) == (None,) + want_shape[1:]
    assert tuple(layer.compute_output_shape((None,) + shape[1:])) == (None,) + want_shape[1:]
    np.testing.assert_allclose(pg.Model(inp, out).predict(_data(shape), verbose=0).ravel(), want,
                               rtol=1e-5, atol=1e-5)


# each channels_first layer equals its channels_last twin (same weights) on transposed volumes
TWINS = [
    ("conv3d_valid", lambda f: L.Conv3D(3, (2, 2, 3), data_format=f), (2, 2, 4, 5, 6)),
    ("conv3d_same_dilated", lambda f: L.Conv3D(4, 3, padding="same", dilation_rate=(2, 1, 1), activation="tanh",
                                               data_format=f), (2, 3, 5, 4, 3)),
    ("conv3d_strided_groups", lambda f: L.Conv3D(6, 2, strides=(2, 1, 2), groups=3, data_format=f),
     (2, 3, 4, 3, 5)),
    ("conv3dt_same", lambda f: L.Conv3DTranspose(2, 3, strides=2, padding="same", data_format=f), (2, 3, 2, 3, 2)),
    ("conv3dt_output_padding", lambda f: L.Conv3DTranspose(3, 2, strides=(2, 3, 1), output_padding=(1, 2, 0),
                                                           data_format=f), (1, 2, 2, 2, 3)),
    ("maxpool3d", lambda f: L.MaxPooling3D((2, 1, 3), data_format=f), (2, 3, 4, 3, 6)),
    ("avgpool3d_same", lambda f: L.AveragePooling3D(3, strides=2, padding="same", data_format=f), (2, 2, 5, 4, 3)),
    ("gap3d", lambda f: L.GlobalAveragePooling3D(data_format=f), (3, 4, 2, 3, 2)),
    ("gmp3d_keep", lambda f: L.GlobalMaxPooling3D(data_format=f, keepdims=True), (3, 4, 2, 3, 2)),
    ("upsampling3d", lambda f: L.UpSampling3D((2, 3, 1), data_format=f), (2, 3, 2, 2, 3)),
    ("zeropad3d", lambda f: L.ZeroPadding3D((1, 2, 0), data_format=f), (2, 3, 2, 2, 3)),
    ("crop3d", lambda f: L.Cropping3D(((0, 1), (1, 1), (2, 0)), data_format=f), (2, 3, 3, 4, 5)),
    ("adaptive_avg3d", lambda f: L.AdaptiveAveragePooling3D((2, 3, 2), data_format=f), (2, 3, 5, 4, 3)),
    ("adaptive_max3d", lambda f: L.AdaptiveMaxPooling3D(2, data_format=f), (2, 3, 5, 4, 3)),
    ("zeropad1d", lambda f: L.ZeroPadding1D(2, data_format=f), (2, 3, 4)),
]


@pytest.mark.parametrize("name, make, shape", TWINS, ids=[t[0] for t in TWINS])
def test_channels_first_equals_channels_last_transposed(name, make, shape, graph_path):
    x = RNG.normal(size=shape).astype(np.float32)
    first, last = make(CF), make("channels_last")
    first.build(shape)
    last.build(_to_last(x).shape)
    if first.get_weights():
        last.set_weights(first.get_weights())
    want = np.asarray(last(_to_last(x)))
    if want.ndim > 2:
        want = _to_first(want)
    got = np.asarray(first(x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert tuple(first.compute_output_shape((None,) + shape[1:])) == (None,) + want.shape[1:]
    assert first.get_config()["data_format"] == CF


def test_spatial_dropout3d_channels_first_drops_whole_channels():
    x = np.ones((4, 6, 2, 3, 2), np.float32)
    layer = L.SpatialDropout3D(0.5, data_format=CF)
    y = np.asarray(layer(x, training=True))
    per_channel = y.reshape(4, 6, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))           # one value per (sample, channel)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert 0 < np.count_nonzero(per_channel[:, :, 0]) < 24
    np.testing.assert_array_equal(np.asarray(layer(x)), x)                # inference: as it is
    inp = pg.Input((6, 2, 3, 2))
    assert tuple(layer(inp).shape) == (None, 6, 2, 3, 2)
    cfg = layer.get_config()
    assert cfg["data_format"] == CF and "noise_shape" not in cfg
    assert L.SpatialDropout3D.from_config(cfg).data_format == CF


def test_conv3d_channels_first_model_fits_saves_and_loads(tmp_path):
    x = RNG.normal(size=(8, 2, 4, 5, 4)).astype(np.float32)
    y = RNG.normal(size=(8, 1)).astype(np.float32)
    model = pg.Sequential([
        pg.Input((2, 4, 5, 4)),
        L.Conv3D(4, 2, padding="same", activation="relu", data_format=CF),
        L.MaxPooling3D(2, data_format=CF),
        L.Conv3D(4, 2, groups=2, data_format=CF),
        L.GlobalAveragePooling3D(data_format=CF),
        L.Dense(1),
    ])
    assert model.output_shape == (None, 1)
    model.compile(optimizer=pg.optimizers.Adam(0.01), loss="mse")
    hist = model.fit(x, y, epochs=8, batch_size=4, verbose=0, shuffle=False)
    assert hist.history["loss"][-1] < hist.history["loss"][0]
    want = model.predict(x, verbose=0)
    path = str(tmp_path / "cf3d.gguf")
    model.save(path)
    loaded = pg.models.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), want)
    conv = loaded.layers[0]
    assert conv.data_format == CF and loaded.layers[2].groups == 2


def test_a_training_step_channels_first_equals_channels_last():
    """The gradients through the transposes: one SGD step of a channels-first model moves its
    weights as the channels-last twin's (same weights, transposed volumes) moves them."""
    x = RNG.normal(size=(4, 2, 5, 4, 5)).astype(np.float32)
    y = RNG.normal(size=(4, 2, 1, 1, 2)).astype(np.float32)

    def model(fmt, shape):
        m = pg.Sequential([pg.Input(shape), L.Conv3D(4, 2, padding="same", activation="tanh", data_format=fmt),
                           L.Conv3D(2, 3, strides=(2, 1, 2), groups=2, data_format=fmt),
                           L.AveragePooling3D((1, 2, 1), data_format=fmt),
                           L.Conv3DTranspose(2, (1, 2, 1), data_format=fmt),
                           L.MaxPooling3D((2, 2, 1), data_format=fmt)])
        m.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
        return m
    first, last = model(CF, x.shape[1:]), model("channels_last", _to_last(x).shape[1:])
    assert first.output_shape == (None,) + y.shape[1:]
    last.set_weights(first.get_weights())
    start = first.get_weights()                                        # {name: array} (copies)
    first.fit(x, y, epochs=1, batch_size=4, verbose=0)
    last.fit(_to_last(x), _to_last(y), epochs=1, batch_size=4, verbose=0)
    got, want = first.get_weights(), last.get_weights()
    assert sorted(got) == sorted(want) == sorted(start) and len(got) == 6
    for k in got:
        assert not np.allclose(got[k], start[k], rtol=0, atol=1e-6), k    # the step moved every weight
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(first.predict(x, verbose=0), _to_first(last.predict(_to_last(x), verbose=0)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make, shape", [
    (lambda: L.Conv3D(2, 2, data_format=CF), (3, 4, 4)),
    (lambda: L.Conv3DTranspose(2, 2, data_format=CF), (3, 4, 4)),
    (lambda: L.MaxPooling3D(2, data_format=CF), (3, 4, 4)),
    (lambda: L.GlobalAveragePooling3D(data_format=CF), (3, 4, 4)),
    (lambda: L.UpSampling3D(2, data_format=CF), (3, 4, 4)),
    (lambda: L.ZeroPadding3D(1, data_format=CF), (3, 4, 4)),
    (lambda: L.Cropping3D(1, data_format=CF), (3, 4, 4)),
    (lambda: L.SpatialDropout3D(0.5, data_format=CF), (3, 4, 4)),
    (lambda: L.AdaptiveAveragePooling3D(2, data_format=CF), (3, 4, 4)),
    (lambda: L.Conv3D(2, 2, data_format=CF), (3, 4, 4, 4, 4)),
    (lambda: L.ZeroPadding1D(1, data_format=CF), (3, 4, 4)),
    (lambda: L.ZeroPadding1D(1, data_format=CF), (3,)),
])
def test_wrong_rank_inputs_are_refused(make, shape):
    with pytest.raises(ValueError):
        make()(pg.Input(shape))
    with pytest.raises(ValueError):
        make()(np.zeros((2,) + shape, np.float32))


def test_conv3d_groups_arguments_are_checked():
    with pytest.raises(ValueError, match="groups"):
        L.Conv3D(5, 2, groups=2)                              # must divide the filters
    with pytest.raises(ValueError, match="groups"):
        L.Conv3D(4, 2, groups=0)
    with pytest.raises(ValueError, match="groups"):
        L.Conv3D(4, 2, groups=2)(pg.Input((3, 3, 3, 3)))       # and the input channels
    layer = L.Conv3D(4, 2, groups=2)
    layer.build((None, 3, 3, 3, 6))
    assert layer.kernel.shape == (2, 2, 2, 3, 4)               # Keras's (kd, kh, kw, in / groups, filters)
    assert L.Conv3D.from_config(layer.get_config()).groups == 2


def test_configs_keep_data_format_and_round_trip():
    for layer in [L.Conv3D(2, 2, data_format=CF), L.Conv3DTranspose(2, 2, data_format=CF),
                  L.MaxPooling3D(data_format=CF), L.AveragePooling3D(data_format=CF),
                  L.GlobalAveragePooling3D(data_format=CF), L.GlobalMaxPooling3D(data_format=CF),
                  L.UpSampling3D(data_format=CF), L.ZeroPadding3D(data_format=CF), L.Cropping3D(data_format=CF),
                  L.SpatialDropout3D(0.2, data_format=CF), L.AdaptiveMaxPooling3D(2, data_format=CF),
                  L.ZeroPadding1D(data_format=CF)]:
        cfg = layer.get_config()
        assert cfg["data_format"] == CF, type(layer).__name__
        assert type(layer).from_config(cfg).data_format == CF
    assert L.ZeroPadding1D(3).get_config()["data_format"] == "channels_last"
    with pytest.raises(ValueError, match="data_format"):
        L.ZeroPadding1D(1, data_format="channels_middle")


def test_the_global_image_data_format_reaches_the_3d_layers():
    x = _data((1, 2, 3, 3, 3))
    pg.config.set_image_data_format(CF)
    try:
        conv = L.Conv3D(2, 2)
        made = [conv, L.Conv3DTranspose(2, 2), L.MaxPooling3D(), L.AveragePooling3D(), L.GlobalMaxPooling3D(),
                L.GlobalAveragePooling3D(), L.UpSampling3D(), L.ZeroPadding3D(), L.Cropping3D(),
                L.SpatialDropout3D(0.1), L.AdaptiveAveragePooling3D(2), L.ZeroPadding1D()]
        assert all(m.data_format == CF for m in made), [type(m).__name__ for m in made if m.data_format != CF]
        conv.build(x.shape)
        conv.set_weights(_weights(conv))
        want_shape, want = KERAS["conv3d"]
        np.testing.assert_allclose(np.asarray(conv(x)).ravel(), want, rtol=1e-5, atol=1e-5)
        assert L.Conv3D(2, 2, data_format="channels_last").data_format == "channels_last"
    finally:
        pg.config.set_image_data_format("channels_last")
    assert L.Conv3D(2, 2).data_format == "channels_last"
