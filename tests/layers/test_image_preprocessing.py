"""Keras's image preprocessing and augmentation layers (HostLayers, numpy on the
host): Resizing, CenterCrop, RandomCrop, RandomFlip, RandomRotation, RandomZoom,
RandomTranslation, RandomContrast, RandomBrightness.

References are written apart from the layers: flips, rotations by quarter
turns and whole-pixel shifts as numpy slicing, ``np.rot90``, ``np.roll`` and
``np.pad``; other angles, zooms and fill modes by a per-pixel loop over an image
padded with ``np.pad``'s modes; resizing against PyTorch's ``interpolate``
(and a loop for lanczos).  Then training vs inference in fit / predict /
evaluate / train_on_batch / Trainer, seeds, configs, save and load, bad
arguments, and keras-io's data-augmentation pattern end to end."""

import json
import math

import numpy as np
import pytest

import pyggml as pg

L = pg.layers

RANDOM_LAYERS = [
    lambda **k: L.RandomFlip(**k),
    lambda **k: L.RandomRotation(0.2, **k),
    lambda **k: L.RandomZoom(0.3, 0.2, **k),
    lambda **k: L.RandomTranslation(0.2, 0.3, **k),
    lambda **k: L.RandomContrast(0.4, **k),
    lambda **k: L.RandomBrightness(0.3, **k),
    lambda **k: L.RandomCrop(4, 5, **k),
]


def _images(n=3, h=6, w=7, c=2, seed=0):
    return (np.random.default_rng(seed).random((n, h, w, c)) * 255).astype(np.float32)


# --- references written apart from the layers ----------------------------------------------------------------

_PAD = {"reflect": "symmetric", "wrap": "wrap", "nearest": "edge", "constant": "constant"}


def _reference_sample(img, source, fill_mode, interpolation="bilinear", fill_value=0.0):
    """Per-pixel loop: out[r, c] = the image (extended by np.pad's mode) at source(r, c) = (row, col)."""
    h, w, ch = img.shape
    p = 3 * max(h, w)
    kw = {"constant_values": fill_value} if fill_mode == "constant" else {}
    big = np.pad(img.astype(np.float64), ((p, p), (p, p), (0, 0)), mode=_PAD[fill_mode], **kw)
    out = np.zeros((h, w, ch))
    for r in range(h):
        for c in range(w):
            sr, sc = source(r, c)
            sr, sc = sr + p, sc + p
            if interpolation == "nearest":
                out[r, c] = big[int(math.floor(sr + 0.5)), int(math.floor(sc + 0.5))]
                continue
            r0, c0 = int(math.floor(sr)), int(math.floor(sc))
            a, b = sr - r0, sc - c0
            out[r, c] = ((1 - a) * (1 - b) * big[r0, c0] + (1 - a) * b * big[r0, c0 + 1] +
                         a * (1 - b) * big[r0 + 1, c0] + a * b * big[r0 + 1, c0 + 1])
    return out


def _rotation_source(h, w, degrees):
    """The input point an output pixel shows when the image turns counter-clockwise (as seen)."""
    t = math.radians(degrees)
    cy, cx = (h - 1) / 2, (w - 1) / 2

    def source(r, c):
        dx, dy = c - cx, r - cy           # rows grow downwards: turning the picture by +t turns (dx, dy) by -t
        return cy + math.sin(t) * dx + math.cos(t) * dy, cx + math.cos(t) * dx - math.sin(t) * dy
    return source


def _lanczos_resize_1d(v, n_out, radius):
    n = len(v)
    out = np.zeros(n_out)
    for j in range(n_out):
        centre = (j + 0.5) * n / n_out - 0.5
        ws = []
        for i in range(n):
            d = abs(centre - i)
            ws.append(1.0 if d < 1e-3 else 0.0 if d > radius else
                      radius * math.sin(math.pi * d) * math.sin(math.pi * d / radius) / (math.pi * d) ** 2)
        ws = np.array(ws)
        out[j] = ws @ v / ws.sum()
    return out


# --- RandomFlip ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode, flipped", [
    ("horizontal", lambda a: a[:, ::-1]),
    ("vertical", lambda a: a[::-1, :]),
    ("horizontal_and_vertical", lambda a: a[::-1, ::-1]),
])
def test_random_flip_gives_the_image_or_its_flip_each_half_the_time(mode, flipped):
    img = np.arange(12, dtype=np.float32).reshape(3, 4)
    batch = np.repeat(img[None, :, :, None], 200, axis=0)
    out = L.RandomFlip(mode, seed=3)(batch)[..., 0]
    same = np.all(out == img, axis=(1, 2))
    flip = np.all(out == flipped(img), axis=(1, 2))
    assert np.all(same | flip)
    assert 60 < flip.sum() < 140
    np.testing.assert_array_equal(L.RandomFlip(mode)(batch, training=False), batch)


def test_random_flip_of_a_single_image_and_of_integers():
    img = np.arange(12, dtype=np.uint8).reshape(3, 4, 1)
    outs = {L.RandomFlip("horizontal", seed=s)(img).tobytes() for s in range(12)}
    assert outs == {img.astype(np.float32).tobytes(), img[:, ::-1].astype(np.float32).tobytes()}
    assert L.RandomFlip()(img).dtype == np.float32


# --- RandomRotation ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("factor, k", [((0.25, 0.25), 1), ((-0.25, -0.25), -1), ((0.5, 0.5), 2)])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_rotation_by_quarter_turns_is_rot90(factor, k, interpolation):
    x = _images(2, 5, 5, 3)
    out = L.RandomRotation(factor, interpolation=interpolation, fill_mode="constant")(x)
    np.testing.assert_allclose(out, np.rot90(x, k, axes=(1, 2)), atol=2e-4)


@pytest.mark.parametrize("fill_mode", ["reflect", "wrap", "constant", "nearest"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_rotation_by_a_pinned_angle_against_a_per_pixel_reference(fill_mode, interpolation):
    x = _images(1, 5, 7, 2)
    layer = L.RandomRotation((0.1, 0.1), fill_mode=fill_mode, interpolation=interpolation, fill_value=-7.0)
    ref = _reference_sample(x[0], _rotation_source(5, 7, 36.0), fill_mode, interpolation, -7.0)
    np.testing.assert_allclose(layer(x)[0], ref, atol=2e-3)


def test_rotation_angles_are_drawn_within_the_factor():
    # a thin horizontal bar through the centre: its turned direction gives the angle
    img = np.zeros((1, 41, 41, 1), np.float32)
    img[0, 20, 5:36] = 1.0
    layer = L.RandomRotation((-0.05, 0.1), fill_mode="constant", seed=0)
    angles = []
    for _ in range(30):
        out = layer(img)[0, ..., 0]
        rows, cols = np.nonzero(out > 0.5)
        slope = np.polyfit(cols - 20.0, -(rows - 20.0), 1)[0]          # up is positive
        angles.append(math.degrees(math.atan(slope)))
    assert min(angles) > -18 - 3 and max(angles) < 36 + 3
    assert min(angles) < -5 and max(angles) > 20


# --- RandomZoom and RandomTranslation ------------------------------------------------------------------------

@pytest.mark.parametrize("fill_mode", ["reflect", "wrap", "constant", "nearest"])
def test_zoom_by_a_pinned_amount_against_a_per_pixel_reference(fill_mode):
    x = _images(1, 6, 5, 2)
    zy, zx = 1.5, 0.75
    layer = L.RandomZoom((0.5, 0.5), (-0.25, -0.25), fill_mode=fill_mode, fill_value=3.0)

    def source(r, c):
        return 2.5 + zy * (r - 2.5), 2.0 + zx * (c - 2.0)
    np.testing.assert_allclose(layer(x)[0], _reference_sample(x[0], source, fill_mode, fill_value=3.0), atol=2e-3)


def test_zoom_without_width_factor_keeps_the_aspect_ratio():
    x = _images(1, 7, 7, 1)
    ref = _reference_sample(x[0], lambda r, c: (3 + 0.6 * (r - 3), 3 + 0.6 * (c - 3)), "reflect")
    np.testing.assert_allclose(L.RandomZoom((-0.4, -0.4))(x)[0], ref, atol=2e-3)


@pytest.mark.parametrize("fill_mode", ["reflect", "wrap", "constant", "nearest"])
def test_translation_by_whole_pixels_against_np_pad_and_roll(fill_mode):
    x = _images(2, 4, 8, 3)
    out = L.RandomTranslation((0.25, 0.25), (-0.25, -0.25), fill_mode=fill_mode, fill_value=5.0)(x)
    # down by 1 row, left by 2 columns
    if fill_mode == "wrap":
        ref = np.roll(x, (1, -2), axis=(1, 2))
    else:
        kw = {"constant_values": 5.0} if fill_mode == "constant" else {}
        padded = np.pad(x, ((0, 0), (1, 0), (0, 2), (0, 0)), mode=_PAD[fill_mode], **kw)
        ref = padded[:, :4, 2:10]
    np.testing.assert_allclose(out, ref, atol=1e-4)


@pytest.mark.parametrize("fill_mode, expect", [
    ("reflect", lambda row: row[::-1]),             # d c b a | a b c d
    ("wrap", lambda row: row),                      # a b c d | a b c d
    ("nearest", lambda row: np.full_like(row, row[0])),
    ("constant", lambda row: np.full_like(row, -1.0)),
])
def test_fill_modes_on_a_shift_by_the_whole_width(fill_mode, expect):
    row = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    img = np.tile(row, (2, 1))[None, :, :, None]
    out = L.RandomTranslation(0.0, (1.0, 1.0), fill_mode=fill_mode, fill_value=-1.0)(img)[0, :, :, 0]
    np.testing.assert_allclose(out, np.tile(expect(row), (2, 1)), atol=1e-5)


def test_translation_by_a_fraction_of_a_pixel_interpolates():
    x = _images(1, 5, 6, 1)
    out = L.RandomTranslation((0.1, 0.1), (0.0, 0.0), fill_mode="nearest")(x)[0]     # down by 0.5 row
    ref = _reference_sample(x[0], lambda r, c: (r - 0.5, c), "nearest")
    np.testing.assert_allclose(out, ref, atol=1e-3)


# --- RandomContrast and RandomBrightness ------------------------------------------------------------------------

def test_random_contrast_scales_about_each_channels_mean_within_the_range():
    x = _images(40, 5, 6, 3)
    out = L.RandomContrast(0.5, value_range=(-1e4, 1e4), seed=1)(x)
    mean = x.mean(axis=(1, 2), keepdims=True)
    c = (out - mean) / (x - mean)
    per_image = c.reshape(40, -1)
    np.testing.assert_allclose(per_image, np.broadcast_to(per_image[:, :1], per_image.shape), rtol=1e-3)          # one factor per image
    assert per_image.min() >= 0.5 - 1e-4 and per_image.max() <= 1.5 + 1e-4
    assert per_image[:, 0].min() < 0.8 and per_image[:, 0].max() > 1.2


def test_random_contrast_clips_to_the_value_range_and_pairs_give_asymmetric_ranges():
    x = np.array([0.0, 0.2, 0.8, 1.0], np.float32).reshape(1, 2, 2, 1)
    out = L.RandomContrast((0.0, 1.0), value_range=(0, 1), seed=0)(np.repeat(x, 50, 0))
    assert out.min() >= 0.0 and out.max() <= 1.0
    lo = out[:, 0, 0, 0]                   # 0.5 - 0.5 c, clipped at 0: c in [1, 2]
    assert np.all(lo <= 0.0 + 1e-6)
    np.testing.assert_array_equal(L.RandomContrast(0.3)(x, training=False), x)


def test_random_brightness_adds_a_fraction_of_the_range_and_clips():
    x = _images(30, 4, 4, 3)
    out = L.RandomBrightness((0.5, 0.5))(x)
    np.testing.assert_allclose(out, np.clip(x + 127.5, 0, 255), atol=1e-4)
    out = L.RandomBrightness(0.2, value_range=(-1e5, 1e5), seed=2)(x)
    delta = (out - x).reshape(30, -1)
    np.testing.assert_allclose(delta, np.broadcast_to(delta[:, :1], delta.shape), atol=1e-2)
    assert np.all(np.abs(delta[:, 0]) <= 0.2 * 2e5 + 1e-2) and delta[:, 0].min() < 0 < delta[:, 0].max()
    np.testing.assert_array_equal(L.RandomBrightness(0.2)(x, training=False), x)
    black = L.RandomBrightness((-1.0, -1.0), value_range=(0.0, 1.0))(x / 255)
    assert np.all(black == 0.0)


# --- Resizing, CenterCrop, RandomCrop ----------------------------------------------------------------------------

def _torch_resize(x, h, w, mode, antialias=False):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).permute(0, 3, 1, 2)
    kw = {} if mode == "nearest-exact" else {"align_corners": False}
    out = torch.nn.functional.interpolate(t, size=(h, w), mode=mode, antialias=antialias, **kw)
    return out.permute(0, 2, 3, 1).numpy()


@pytest.mark.parametrize("size", [(5, 7), (20, 31), (13, 9)])
@pytest.mark.parametrize("interpolation, antialias, torch_mode", [
    ("bilinear", False, "bilinear"), ("bilinear", True, "bilinear"), ("nearest", False, "nearest-exact"),
    ("bicubic", True, "bicubic")])
def test_resizing_against_pytorch(size, interpolation, antialias, torch_mode):
    x = _images(2, 13, 17, 3)
    out = L.Resizing(*size, interpolation=interpolation, antialias=antialias)(x)
    # PyTorch's bicubic uses a = -0.75 unless it antialiases (then a = -0.5, as TF and JAX); upscaling
    # with antialias is the plain kernel
    np.testing.assert_allclose(out, _torch_resize(x, *size, torch_mode, antialias), atol=1e-3)


def test_resizing_bicubic_upscale_and_lanczos_against_references():
    x = _images(1, 6, 5, 1)
    up = L.Resizing(11, 9, interpolation="bicubic")(x)
    np.testing.assert_allclose(up, _torch_resize(x, 11, 9, "bicubic", antialias=True), atol=1e-3)
    for radius in (3, 5):
        out = L.Resizing(9, 4, interpolation=f"lanczos{radius}")(x)[0, ..., 0]
        cols = np.stack([_lanczos_resize_1d(x[0, :, j, 0], 9, radius) for j in range(5)], axis=1)
        ref = np.stack([_lanczos_resize_1d(cols[i], 4, radius) for i in range(9)], axis=0)
        np.testing.assert_allclose(out, ref, atol=1e-3)


def test_resizing_known_values_and_aspect_ratio_options():
    sq = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    np.testing.assert_allclose(L.Resizing(2, 2)(sq)[0, ..., 0], [[2.5, 4.5], [10.5, 12.5]])
    wide = _images(2, 4, 8, 3)
    crop = L.Resizing(2, 2, crop_to_aspect_ratio=True)(wide)
    np.testing.assert_allclose(crop, _torch_resize(wide[:, :, 2:6], 2, 2, "bilinear"), atol=1e-3)
    pad = L.Resizing(8, 8, pad_to_aspect_ratio=True, fill_value=9.0)(wide)
    np.testing.assert_allclose(pad[:, 2:6], wide, atol=1e-4)
    assert np.all(pad[:, :2] == 9.0) and np.all(pad[:, 6:] == 9.0)
    same = L.Resizing(4, 8)(wide)
    np.testing.assert_array_equal(same, wide)


def test_center_crop_and_its_resize_when_the_image_is_smaller():
    x = _images(2, 5, 6, 2)
    np.testing.assert_array_equal(L.CenterCrop(3, 2)(x), x[:, 1:4, 2:4])
    out = L.CenterCrop(4, 8)(x)                     # too narrow: the 3 x 6 window at row 1, resized
    np.testing.assert_allclose(out, _torch_resize(x[:, 1:4], 4, 8, "bilinear"), atol=1e-3)
    assert L.CenterCrop(3, 2)(x[0]).shape == (3, 2, 2)


def test_random_crop_takes_one_window_per_batch_in_training_and_fits_the_image_in_inference():
    x = _images(3, 8, 9, 2)
    layer = L.RandomCrop(5, 4, seed=4)
    places = set()
    for _ in range(25):
        out = layer(x)
        assert out.shape == (3, 5, 4, 2)
        hits = [(t, l) for t in range(4) for l in range(6) if np.array_equal(out, x[:, t:t + 5, l:l + 4])]
        assert len(hits) == 1
        places.add(hits[0])
    assert len(places) > 5
    inf = layer(x, training=False)                 # the largest 8 x 6 window of aspect 5:4... centred, resized
    np.testing.assert_allclose(inf, _torch_resize(x[:, :, 1:7], 5, 4, "bilinear"), atol=1e-3)
    small = L.RandomCrop(10, 10)(x)                # not larger than the target: fitted, even in training
    np.testing.assert_allclose(small, _torch_resize(x[:, :, 0:8], 10, 10, "bilinear"), atol=1e-3)


# --- every random layer: training flag, seeds, channels_first, shapes ------------------------------------------

@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_random_layers_are_seeded_and_the_identity_in_inference(make):
    x = _images(4, 6, 7, 3)
    a, b = make(seed=11), make(seed=11)
    first = a(x)
    np.testing.assert_array_equal(first, b(x))            # the same seed: the same draws
    np.testing.assert_array_equal(a(x), b(x))             # and the same sequence after
    assert not np.array_equal(a(x), first)                # a new draw each call
    if not isinstance(a, L.RandomCrop):
        np.testing.assert_array_equal(a(x, training=False), x)
    pg.set_seed(5)
    c1 = make()(x)
    pg.set_seed(5)
    np.testing.assert_array_equal(make()(x), c1)          # seedless: the library's seed


@pytest.mark.parametrize("make", RANDOM_LAYERS + [
    lambda seed=None, **k: L.Resizing(3, 9, **k), lambda seed=None, **k: L.CenterCrop(3, 4, **k)])
def test_channels_first_matches_channels_last(make):
    x = _images(3, 6, 7, 2)
    last = make(seed=8)(x)
    first = make(seed=8, data_format="channels_first")(x.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(first, last.transpose(0, 3, 1, 2), atol=1e-5)
    layer = make(data_format="channels_first")
    node = layer(pg.Input((2, 6, 7)))
    assert node.shape == (None, 2) + last.shape[1:3]


# --- in models: training only in fit ----------------------------------------------------------------------------

def _spied(layer):
    calls = []
    real = layer.augment

    def augment(images):
        calls.append(len(images))
        return real(images)
    layer.augment = augment
    return calls


def test_augmentation_runs_on_each_fit_batch_and_never_in_predict_or_evaluate():
    flip = L.RandomFlip(seed=0)
    inp = pg.Input((4, 5, 1))
    out = L.Dense(1)(L.Flatten()(flip(inp)))
    m = pg.Model(inp, out)
    m.compile(optimizer="sgd", loss="mse", seed=0)
    calls = _spied(flip)
    x, y = _images(40, 4, 5, 1) / 255, np.zeros((40, 1), np.float32)
    w = m.get_weights()
    ref = x.reshape(40, -1) @ w["dense.weight"].T + w["dense.bias"]
    np.testing.assert_allclose(m.predict(x), ref, rtol=1e-4, atol=1e-5)
    m.evaluate(x, y, verbose=0)
    assert calls == []
    m.fit(x, y, epochs=2, batch_size=16, validation_split=0.25, verbose=0)
    assert calls == [16, 14] * 2                          # 30 training rows a epoch; the 10 held out: not
    m.fit(x, y, epochs=1, batch_size=16, validation_data=(x, y), verbose=0)
    assert calls[4:] == [16, 16, 8]
    m.train_on_batch(x[:5], y[:5])
    assert calls[-1] == 5
    m.test_on_batch(x[:5], y[:5])
    m.predict(x[:3])
    assert len(calls) == 8
    m.free()


def test_fit_sees_augmented_batches_and_predict_the_raw_ones():
    # RandomBrightness pinned to +1: in training every image is white (1.0), so the model learns y for
    # white images only; predictions on the raw images differ from those on white ones
    inp = pg.Input((2, 2, 1))
    out = L.Dense(1)(L.Flatten()(L.RandomBrightness((1.0, 1.0), value_range=(0.0, 1.0))(inp)))
    m = pg.Model(inp, out)
    m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse", seed=0)
    x = _images(16, 2, 2, 1, seed=3) / 255
    y = np.full((16, 1), 3.0, np.float32)
    m.fit(x, y, epochs=60, batch_size=16, verbose=0, shuffle=False)
    w = m.get_weights()
    white = np.ones((1, 4)) @ w["dense.weight"].T + w["dense.bias"]
    np.testing.assert_allclose(white, [[3.0]], atol=0.05)
    np.testing.assert_allclose(m.predict(x), x.reshape(16, 4) @ w["dense.weight"].T + w["dense.bias"],
                               rtol=1e-4, atol=1e-5)
    m.free()


def test_trainer_steps_augment_and_generators_too():
    flip = L.RandomFlip("vertical")
    m = pg.Sequential([pg.Input((4, 4, 1)), flip, L.Flatten(), L.Dense(1)])
    m.compile(optimizer="sgd", loss="mse", seed=0)
    calls = _spied(flip)
    x, y = _images(8, 4, 4, 1) / 255, np.zeros((8, 1), np.float32)
    tr = pg.Trainer(m, batch_size=8)
    tr.step(x, y)
    tr.eval(x, y)
    tr.predict(x)
    assert calls == [8]
    tr.free()

    def gen():
        for i in range(2):
            yield x[4 * i:4 * i + 4], y[4 * i:4 * i + 4]
    m.fit(gen(), epochs=1, steps_per_epoch=2, verbose=0)
    assert calls == [8, 4, 4]
    m.free()


# --- keras-io's pattern ------------------------------------------------------------------------------------------

def test_keras_io_data_augmentation_in_a_functional_model_trains_saves_and_loads(tmp_path):
    keras, layers = pg, pg.layers
    data_augmentation = keras.Sequential([layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)])
    images = _images(9, 18, 18, 3)
    augmented = data_augmentation(images)                      # keras-io's plotting: augments by default
    assert augmented.shape == images.shape and augmented.dtype == np.float32
    assert not np.allclose(augmented, images)
    np.testing.assert_array_equal(data_augmentation(images, training=False), images)

    inputs = keras.Input(shape=(18, 18, 3))
    x = data_augmentation(inputs)
    x = layers.Rescaling(1.0 / 255)(x)
    x = layers.Conv2D(4, 3, activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    x_train = (rng.random((48, 18, 18, 3)) * 255).astype(np.float32)
    y_train = (x_train[:, :, :, 0].mean(axis=(1, 2)) > 127.5).astype(np.int64)
    hist = model.fit(x_train, y_train, epochs=3, batch_size=16, validation_split=0.25, verbose=0)
    assert len(hist.history["loss"]) == 3 and np.all(np.isfinite(hist.history["loss"]))
    p = model.predict(x_train)
    np.testing.assert_array_equal(model.predict(x_train), p)     # inference: no augmentation
    assert [type(l).__name__ for l in model.layers][:3] == ["InputLayer", "Sequential", "Rescaling"]
    for name in ("aug.gguf", "aug.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_array_equal(loaded.predict(x_train), p)
        nested = loaded.get_layer(index=1)
        assert [l.get_config() for l in nested.layers] == [l.get_config() for l in data_augmentation.layers]
        loaded.fit(x_train, y_train, epochs=1, batch_size=16, verbose=0)
        loaded.free()
    model.free()


def test_keras_io_function_of_augmentation_layers_on_nodes_and_on_batches():
    data_augmentation_layers = [L.RandomFlip("horizontal"), L.RandomRotation(0.1)]

    def data_augmentation(images):
        for layer in data_augmentation_layers:
            images = layer(images)
        return images
    images = _images(4, 10, 10, 3)
    assert data_augmentation(images).shape == images.shape              # as in a dataset's map
    inputs = pg.Input(shape=(10, 10, 3))
    x = L.Rescaling(1.0 / 255)(data_augmentation(inputs))
    model = pg.Model(inputs, L.Dense(1)(L.GlobalAveragePooling2D()(L.Conv2D(2, 3)(x))))
    model.compile(optimizer="adam", loss="mse")
    model.fit(images, np.ones((4, 1)), epochs=2, batch_size=2, verbose=0)
    assert model.predict(images).shape == (4, 1)
    model.free()
    nested = [[[0.0], [1.0]], [[2.0], [3.0]]]                            # a list of pixels, one image
    np.testing.assert_array_equal(L.RandomFlip("vertical")(nested, training=False), np.array(nested))
    assert L.Resizing(4, 4)(nested).shape == (4, 4, 1)


def test_augmentation_as_the_first_layers_of_a_sequential_model(tmp_path):
    model = pg.Sequential([
        pg.Input((12, 12, 3)),
        L.RandomFlip("horizontal"), L.RandomRotation(0.1), L.RandomZoom(0.1), L.RandomTranslation(0.1, 0.1),
        L.RandomContrast(0.2), L.RandomBrightness(0.1), L.RandomCrop(10, 10), L.Resizing(8, 8),
        L.CenterCrop(6, 6),
        L.Rescaling(1.0 / 255), L.Conv2D(3, 3, activation="relu"), L.Flatten(), L.Dense(1),
    ])
    model.compile(optimizer="adam", loss="mse")
    x, y = _images(24, 12, 12, 3), np.random.default_rng(1).random((24, 1)).astype(np.float32)
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    p = model.predict(x)
    path = str(tmp_path / "seq.gguf")
    model.save(path)
    loaded = pg.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x), p)
    assert [type(l).__name__ for l in loaded.layers] == [type(l).__name__ for l in model.layers]
    # inference: random layers are the identity, RandomCrop fits 12 x 12 to 10 x 10, then the resizes
    fitted = L.CenterCrop(6, 6)(L.Resizing(8, 8)(L.Resizing(10, 10)(x)))
    head = pg.Sequential([pg.Input((6, 6, 3)), L.Rescaling(1.0 / 255), L.Conv2D(3, 3, activation="relu"),
                          L.Flatten(), L.Dense(1)])
    head.compile(loss="mse")
    head.set_weights(model.get_weights())
    np.testing.assert_allclose(head.predict(fitted), p, rtol=1e-4, atol=1e-5)
    loaded.free()
    model.free()
    head.free()


def test_a_batch_of_64_images_of_180_x_180_goes_through_the_augmentations():
    aug = pg.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1), L.RandomZoom(0.1)])
    x = _images(64, 180, 180, 3)
    out = aug(x)
    assert out.shape == x.shape and np.isfinite(out).all()


# --- configs -----------------------------------------------------------------------------------------------------

CONFIGURED = [
    lambda: L.Resizing(5, 6, interpolation="nearest", crop_to_aspect_ratio=True, name="rs"),
    lambda: L.Resizing(5, 6, pad_to_aspect_ratio=True, fill_value=2.0, antialias=True),
    lambda: L.CenterCrop(3, 4, data_format="channels_first"),
    lambda: L.RandomCrop(3, 4, seed=1),
    lambda: L.RandomFlip("vertical", seed=2),
    lambda: L.RandomRotation((-0.1, 0.2), fill_mode="constant", interpolation="nearest", seed=3, fill_value=1.5),
    lambda: L.RandomZoom((-0.2, 0.3), None, fill_mode="wrap", seed=4),
    lambda: L.RandomTranslation(0.1, (0.0, 0.2), fill_mode="nearest", seed=5),
    lambda: L.RandomContrast((0.1, 0.3), value_range=(0, 1), seed=6),
    lambda: L.RandomBrightness(0.2, value_range=[0, 1], seed=7),
]


@pytest.mark.parametrize("make", CONFIGURED)
def test_config_round_trips_and_the_copy_computes_the_same(make):
    layer = make()
    cfg = layer.get_config()
    assert {"name", "trainable", "dtype", "data_format"} <= set(cfg)
    again = type(layer).from_config(json.loads(json.dumps(cfg)))
    assert json.loads(json.dumps(again.get_config())) == json.loads(json.dumps(cfg))
    x = _images(2, 6, 8, 3)
    if cfg["data_format"] == "channels_first":
        x = x.transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(again(x), layer(x))


def test_keras_config_keys():
    assert L.RandomRotation(0.1).get_config()["factor"] == [-0.1, 0.1]
    z = L.RandomZoom(0.2).get_config()
    assert z["height_factor"] == 0.2 and z["width_factor"] is None and z["fill_mode"] == "reflect"
    t = L.RandomTranslation(0.1, 0.2).get_config()
    assert (t["height_factor"], t["width_factor"], t["interpolation"], t["fill_value"]) == (0.1, 0.2, "bilinear", 0.0)
    r = L.Resizing(4, 5).get_config()
    assert (r["interpolation"], r["crop_to_aspect_ratio"], r["data_format"]) == ("bilinear", False, "channels_last")
    assert L.RandomFlip().get_config()["mode"] == "horizontal_and_vertical"
    assert L.RandomBrightness(0.1).get_config()["value_range"] == [0.0, 255.0]


# --- bad arguments and inputs --------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, match", [
    (lambda: L.Resizing(0, 4), "height"),
    (lambda: L.Resizing(4, 2.5), "width"),
    (lambda: L.Resizing(4, 4, interpolation="cubic"), "interpolation"),
    (lambda: L.Resizing(4, 4, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True), "only one"),
    (lambda: L.Resizing(4, 4, fill_mode="reflect"), "fill_mode"),
    (lambda: L.CenterCrop(-1, 4), "height"),
    (lambda: L.RandomCrop(4, None), "width"),
    (lambda: L.RandomFlip("diagonal"), "mode"),
    (lambda: L.RandomFlip(seed=-1), "seed"),
    (lambda: L.RandomRotation(1.5), "factor"),
    (lambda: L.RandomRotation((0.1, 0.2, 0.3)), "factor"),
    (lambda: L.RandomRotation("big"), "factor"),
    (lambda: L.RandomRotation(0.1, fill_mode="mirror"), "fill_mode"),
    (lambda: L.RandomRotation(0.1, interpolation="bicubic"), "interpolation"),
    (lambda: L.RandomRotation(0.1, fill_value=float("nan")), "fill_value"),
    (lambda: L.RandomZoom(-1.0), "height_factor"),
    (lambda: L.RandomZoom(0.1, (0.2, 1.5)), "width_factor"),
    (lambda: L.RandomTranslation(0.1), "width_factor"),
    (lambda: L.RandomTranslation(0.1, -1.2), "width_factor"),
    (lambda: L.RandomContrast(-0.1), "factor"),
    (lambda: L.RandomContrast(0.1, value_range=(0,)), "value_range"),
    (lambda: L.RandomBrightness(0.1, value_range=5), "value_range"),
    (lambda: L.RandomBrightness(2.0), "factor"),
    (lambda: L.RandomZoom(0.1, data_format="NHWC"), "data_format"),
])
def test_bad_arguments_are_refused_naming_them(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("make", RANDOM_LAYERS + [lambda **k: L.Resizing(3, 3), lambda **k: L.CenterCrop(2, 2)])
def test_bad_inputs_are_refused(make):
    layer = make()
    with pytest.raises(ValueError, match="height, width, channels"):
        layer(np.zeros((2, 5, 5, 3, 1)))
    with pytest.raises(ValueError, match="height, width, channels"):
        layer(np.zeros((4, 5)))
    with pytest.raises(TypeError, match="numbers"):
        layer(np.array([[["a"]]]))
    with pytest.raises(ValueError, match="positive"):
        layer(np.zeros((2, 0, 5, 3)))
    with pytest.raises(ValueError, match="batch, height, width, channels"):
        make()(pg.Input((5, 5)))


def test_outputs_too_large_to_hold_are_refused_before_any_work():
    with pytest.raises(ValueError, match="too large"):
        L.Resizing(60000, 60000)(np.zeros((1, 2, 2, 3)))


def test_a_sequential_whose_host_layers_come_first_nests_on_data_only():
    # simclr's augmenter: preprocessing first, then graph layers; nested on the model's input its
    # host layers run on that data (augmenting in training only), its graph layers in the graph
    inner = pg.Sequential([L.Rescaling(0.5), L.RandomFlip("horizontal"), L.Dense(2)])
    inp = pg.Input((4, 4, 1))
    m = pg.Model(inp, L.Dense(1)(L.Flatten()(inner(inp)))).compile(optimizer=pg.optimizers.SGD(0.0), loss="mse")
    x = _images(6, 4, 4, 1) + np.arange(4, dtype=np.float32)[None, None, :, None]    # flips change them
    w = m.get_weights()
    inner_w, inner_b = (w[f"{inner.name}.{inner.layers[-1].name}.{k}"] for k in ("weight", "bias"))
    outer = m.layers[-1]
    outer_w, outer_b = w[f"{outer.name}.weight"], w[f"{outer.name}.bias"]

    def reference(images):
        h = (images * 0.5) @ inner_w.T + inner_b
        return h.reshape(len(images), -1) @ outer_w.T + outer_b

    want = reference(x)
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-4, atol=1e-5)
    loss = float(m.train_on_batch(x, want))           # some images flipped: a loss above zero
    everything = float(np.mean((reference(x[:, :, ::-1]) - want) ** 2))
    assert 0.0 <= loss <= everything * 1.0001
    m.free()
    # host layers after a graph layer, or nested on a tensor computed in the graph: refused, unless
    # they have a graph form (a flip: tests/test_keras_io_port_gaps_5.py)
    inner2 = pg.Sequential([L.Dense(2), L.RandomPerspective()])
    inp = pg.Input((4, 4, 1))
    with pytest.raises(ValueError, match="preprocess"):
        pg.Model(inp, L.Dense(1)(L.Flatten()(inner2(inp))))
    inner3 = pg.Sequential([L.RandomPerspective(), L.Dense(2)])
    with pytest.raises(ValueError, match="mixes preprocessing layers"):
        pg.Sequential([pg.Input((4, 4, 1)), L.Dense(1), inner3, L.Flatten(), L.Dense(1)]).compile(loss="mse")


def test_rescaling_runs_on_the_host_only_between_the_inputs_and_host_layers():
    inp = pg.Input((4, 4, 1))
    before = L.Rescaling(0.5, offset=1.0)
    m = pg.Model(inp, L.Dense(1)(L.Flatten()(L.RandomFlip()(before(inp)))))
    assert [n.layer for n in m._topology.host_nodes] == [before, m.layers[2]]
    m.compile(loss="mse", seed=0)
    x = _images(5, 4, 4, 1)
    w = m.get_weights()
    ref = (x * 0.5 + 1.0).reshape(5, -1) @ w["dense.weight"].T + w["dense.bias"]
    np.testing.assert_allclose(m.predict(x), ref, rtol=1e-4, atol=1e-3)
    m.free()
    inp = pg.Input((4, 4, 1))
    alone = pg.Model(inp, L.Dense(1)(L.Flatten()(L.Rescaling(0.5)(inp))))
    assert alone._topology.host_nodes == []                      # nothing on the host after it: in the graph
    alone.free()


def test_tensorflow_tutorial_resize_and_rescale_then_augmentation_as_nested_sequentials(tmp_path):
    resize_and_rescale = pg.Sequential([L.Resizing(8, 8), L.Rescaling(1.0 / 255)])
    data_augmentation = pg.Sequential([L.RandomFlip("horizontal_and_vertical"), L.RandomRotation(0.2)])
    x = _images(12, 16, 16, 3)
    np.testing.assert_allclose(resize_and_rescale(x), _torch_resize(x, 8, 8, "bilinear") / 255, atol=1e-5)
    model = pg.Sequential([pg.Input((16, 16, 3)), resize_and_rescale, data_augmentation,
                           L.Conv2D(4, 3, padding="same", activation="relu"), L.MaxPooling2D(), L.Flatten(),
                           L.Dense(2)])
    model.compile(optimizer="adam", loss=pg.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    hist = model.fit(x, np.arange(12) % 2, epochs=2, batch_size=4, verbose=0)
    assert np.all(np.isfinite(hist.history["loss"]))
    p = model.predict(x)
    path = str(tmp_path / "tutorial.keras")
    model.save(path)
    loaded = pg.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x), p)
    loaded.free()
    model.free()


def test_host_layers_must_come_before_the_graph():
    # (those with a graph form, the flips and affine ones, contrast and brightness, run in it there)
    inp = pg.Input((4, 4, 1))
    with pytest.raises(ValueError, match="host"):
        pg.Model(inp, L.RandomPerspective()(L.Conv2D(1, 1)(inp)))


def test_a_functional_model_of_host_layers_nests_and_keeps_its_output_dtype():
    words = pg.Input((3,), dtype="string")
    lookup = pg.Model(words, L.StringLookup(vocabulary=["a", "b"])(words))
    assert lookup.host and lookup.output_dtype == "int32"
    inp = pg.Input((3,), dtype="string")
    node = lookup(inp)
    assert node.dtype == "int32"
    m = pg.Model(inp, L.Dense(1)(L.Flatten()(L.Embedding(3, 2)(node))))
    m.compile(loss="mse", seed=0)
    x = np.array([["a", "b", "c"], ["b", "b", "a"]])
    np.testing.assert_array_equal(lookup(x), [[1, 2, 0], [2, 2, 1]])
    w = m.get_weights()
    emb = w["embedding.weight"][np.array([[1, 2, 0], [2, 2, 1]])].reshape(2, -1)
    np.testing.assert_allclose(m.predict(x), emb @ w["dense.weight"].T + w["dense.bias"], rtol=1e-5, atol=1e-6)
    m.free()
