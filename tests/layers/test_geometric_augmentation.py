"""Keras's geometric and mixing augmentation layers (HostLayers, numpy on the
host): RandomShear, RandomPerspective, RandomErasing, RandomElasticTransform,
MixUp, CutMix, and the Pipeline that chains layers.

References are written apart from the layers: per-pixel loops over an image
padded with ``np.pad``'s modes for the warps, the homography checked on its
corners, boxes and mixes worked out from the labels the layers give.  Then
seeds, training vs inference in fit / predict, the dict form keras-io uses in
a dataset's ``map``, configs, save and load, bad arguments."""

import json
import math

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests
from pyggml.layers.preprocessing import _image_ops

L = pg.layers

RANDOM_LAYERS = [
    lambda **k: L.RandomShear(0.3, 0.2, **k),
    lambda **k: L.RandomPerspective(**k),
    lambda **k: L.RandomErasing(**k),
    lambda **k: L.RandomElasticTransform(**k),
    lambda **k: L.MixUp(**k),
    lambda **k: L.CutMix(**k),
]


def _images(n=3, h=6, w=7, c=3, seed=0):
    return (np.random.default_rng(seed).random((n, h, w, c)) * 255).astype(np.float32)


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


# --- RandomShear ------------------------------------------------------------------------------------------------

def test_shear_matrices_move_a_known_pixel():
    img = np.zeros((1, 5, 6, 1), np.float32)
    img[0, 2, 4, 0] = 1.0                                   # row 2, column 4
    m = _image_ops.shear_matrices([0.5], [0.0], 5, 6)
    out = _image_ops.affine_sample(img, m, "nearest", "constant", 0.0)
    # output (x, y) reads (x + 0.5 y, y): the pixel at column 4 of row 2 shows at column 3
    assert np.argwhere(out[0, ..., 0]).tolist() == [[2, 3]]
    m = _image_ops.shear_matrices([0.0], [-1.0], 5, 6)     # (x, y) reads (x, y - x): row 2 + 4 = row 6: out
    out = _image_ops.affine_sample(img, m, "nearest", "constant", 0.0)
    assert not out.any()


@pytest.mark.parametrize("fill_mode", ["reflect", "wrap", "nearest", "constant"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_shear_by_a_pinned_amount_against_a_per_pixel_reference(fill_mode, interpolation):
    x = _images(6, 5, 7, 2)
    layer = L.RandomShear((0.4, 0.4), (0.25, 0.25), fill_mode=fill_mode, interpolation=interpolation,
                          fill_value=3.0, seed=2)
    out = layer(x)
    signs = set()
    for i in range(len(x)):
        refs = {s: _reference_sample(x[i], lambda r, c, s=s: (r + s * 0.25 * c, c + s * 0.4 * r), fill_mode,
                                     interpolation, 3.0) for s in (1.0, -1.0)}
        hits = [s for s, ref in refs.items() if np.allclose(out[i], ref, atol=1e-3)]
        assert len(hits) == 1
        signs.add(hits[0])
    assert signs == {1.0, -1.0}                           # the direction is drawn too


def test_shear_factor_zero_is_the_identity_and_draws_stay_in_the_range():
    x = _images(4)
    np.testing.assert_allclose(L.RandomShear()(x), x, atol=1e-4)
    layer = L.RandomShear(0.3, 0.0, seed=0)
    m = layer.matrices(2000, 6, 7)
    assert np.abs(m[:, 1]).max() <= 0.3 and np.abs(m[:, 1]).max() > 0.28 and (m[:, 3] == 0).all()
    assert (m[:, 1] < 0).mean() == pytest.approx(0.5, abs=0.05)
    m = L.RandomShear((0.1, 0.2), seed=0).matrices(2000, 6, 7)
    assert ((np.abs(m[:, 1]) >= 0.1) & (np.abs(m[:, 1]) <= 0.2)).all()


# --- RandomPerspective ------------------------------------------------------------------------------------------

def test_homographies_take_the_target_corners_to_the_source_corners():
    rng = np.random.default_rng(0)
    src = np.array([[0.0, 0.0], [9.0, 0.0], [0.0, 7.0], [9.0, 7.0]])[None].repeat(3, 0)
    dst = src + rng.uniform(-1.5, 1.5, size=src.shape)
    m = _image_ops.homographies(src, dst)
    for i in range(3):
        for (u, v), (x, y) in zip(src[i], dst[i]):
            k = m[i, 6] * x + m[i, 7] * y + 1
            np.testing.assert_allclose([(m[i, 0] * x + m[i, 1] * y + m[i, 2]) / k,
                                        (m[i, 3] * x + m[i, 4] * y + m[i, 5]) / k], [u, v], atol=1e-9)
    same = _image_ops.homographies(src[:1], src[:1])
    np.testing.assert_allclose(same, [[1, 0, 0, 0, 1, 0, 0, 0]], atol=1e-12)


def test_projective_sampling_against_a_per_pixel_reference():
    x = _images(1, 6, 8, 2)
    m = np.array([[1.1, 0.1, -0.5, -0.05, 0.9, 0.7, 0.01, -0.02]])

    def source(r, c):
        k = m[0, 6] * c + m[0, 7] * r + 1
        return (m[0, 3] * c + m[0, 4] * r + m[0, 5]) / k, (m[0, 0] * c + m[0, 1] * r + m[0, 2]) / k
    out = _image_ops.projective_sample(x, m, "bilinear", "constant", 2.0)
    np.testing.assert_allclose(out[0], _reference_sample(x[0], source, "constant", "bilinear", 2.0), atol=1e-3)
    affine = np.array([[1.0, 0.2, 0.5, 0.1, 1.0, -0.3, 0.0, 0.0]])
    np.testing.assert_allclose(_image_ops.projective_sample(x, affine, "nearest", "reflect", 0.0),
                               _image_ops.affine_sample(x, affine[:, :6], "nearest", "reflect", 0.0), atol=1e-5)


def test_perspective_replayed_from_its_seed_against_a_per_pixel_reference():
    x = _images(5, 6, 7, 2)
    out = L.RandomPerspective(factor=(0.5, 0.5), scale=0.6, fill_value=1.0, seed=4)(x)
    rng = np.random.default_rng(4)                        # the documented draws, in their order
    apply = rng.uniform(0, 1, size=5) < rng.uniform(0.5, 0.5, size=5)
    shift = rng.uniform(-0.3, 0.3, size=(5, 4, 2))
    corners = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 5.0], [6.0, 5.0]])
    assert 0 < apply.sum() < 5
    for i in range(5):
        if not apply[i]:
            np.testing.assert_array_equal(out[i], x[i])
            continue
        end = corners + corners * shift[i]
        m = _image_ops.homographies(corners[None], end[None])[0]

        def source(r, c, m=m):
            k = m[6] * c + m[7] * r + 1
            return (m[3] * c + m[4] * r + m[5]) / k, (m[0] * c + m[1] * r + m[2]) / k
        np.testing.assert_allclose(out[i], _reference_sample(x[i], source, "constant", "bilinear", 1.0), atol=1e-3)


def test_perspective_scale_zero_or_factor_zero_is_the_identity():
    x = _images(3)
    np.testing.assert_allclose(L.RandomPerspective(scale=0.0)(x), x, atol=1e-4)
    np.testing.assert_array_equal(L.RandomPerspective(factor=0.0)(x), x)


# --- RandomErasing -----------------------------------------------------------------------------------------------

def _box_of(changed):
    """The changed pixels of one image (h, w) as a box (top, left, rows, cols), asserting they are one."""
    rows, cols = np.flatnonzero(changed.any(axis=1)), np.flatnonzero(changed.any(axis=0))
    box = np.zeros_like(changed)
    box[rows.min():rows.max() + 1, cols.min():cols.max() + 1] = True
    np.testing.assert_array_equal(changed, box)
    assert len(rows) == rows.max() - rows.min() + 1 and len(cols) == cols.max() - cols.min() + 1
    return rows.min(), cols.min(), len(rows), len(cols)


def test_erasing_fills_one_box_per_image_with_the_value_and_its_area_follows_scale():
    x = 100 + _images(20, 30, 40, 3) / 4                   # 100..164: never the fill value
    out = L.RandomErasing(factor=(1.0, 1.0), scale=(0.1, 0.2), fill_value=7, seed=1)(x)   # always
    for i in range(20):
        changed = (out[i] != x[i]).any(axis=-1)
        top, left, rows, cols = _box_of(changed)
        np.testing.assert_array_equal(out[i][changed], 7.0)
        np.testing.assert_array_equal(out[i][~changed], x[i][~changed])
        # each side is sqrt(a fraction in [0.1, 0.2]) of the image's, give or take the pixel grid
        assert math.sqrt(0.1) * 40 - 1 <= cols <= math.sqrt(0.2) * 40 + 1
        assert math.sqrt(0.1) * 30 - 1 <= rows <= math.sqrt(0.2) * 30 + 1


def test_erasing_fill_per_channel_noise_clipped_and_probability():
    x = _images(8, 12, 12, 3) / 255
    out = L.RandomErasing((1.0, 1.0), fill_value=[0.1, 0.5, 2.0], value_range=(0, 1), seed=0)(x)
    changed = (out != x).any(axis=-1)
    np.testing.assert_allclose(out[changed], np.broadcast_to([0.1, 0.5, 1.0], out[changed].shape))   # clipped
    noise = L.RandomErasing(seed=3)(x * 255)
    changed = (noise != x * 255).any(axis=-1)
    assert changed.any() and noise.min() >= 0 and noise.max() <= 255
    assert len(np.unique(noise[changed])) > 10                # noise, not a constant
    np.testing.assert_array_equal(L.RandomErasing(factor=0.0)(x), x)
    some = L.RandomErasing(factor=(0.5, 0.5), fill_value=-1.0, value_range=(-1, 1), seed=5)(_images(400, 6, 6, 1))
    erased = (some == -1.0).any(axis=(1, 2, 3)).mean()
    assert 0.4 < erased < 0.6


# --- RandomElasticTransform ----------------------------------------------------------------------------------------

def test_gaussian_blur_matches_scipy():
    ndimage = pytest.importorskip("scipy.ndimage")
    f = np.random.default_rng(0).uniform(-1, 1, size=(2, 9, 11))
    ours = _image_ops.gaussian_blur_2d(f, 1.3)
    ref = np.stack([ndimage.gaussian_filter(g, 1.3, mode="reflect", truncate=math.ceil(3 * 1.3) / 1.3) for g in f])
    np.testing.assert_allclose(ours, ref, atol=1e-10)


def test_elastic_sampling_by_a_constant_field_is_a_shift():
    x = _images(2, 5, 6, 1)
    dx, dy = np.full((2, 5, 6), 2.0), np.full((2, 5, 6), -1.0)
    out = _image_ops.elastic_sample(x, dx, dy, "nearest", "wrap", 0.0)
    np.testing.assert_array_equal(out, np.roll(np.roll(x, -2, axis=2), 1, axis=1))


def test_elastic_transform_replayed_from_its_seed():
    x = _images(3, 10, 12, 1)
    out = L.RandomElasticTransform(scale=(0.5, 0.5), fill_mode="constant", fill_value=9.0, seed=6)(x)
    rng = np.random.default_rng(6)
    apply = rng.uniform(0, 1, size=3) < rng.uniform(0, 1, size=3)
    s = rng.uniform(0.5, 0.5)
    alpha, sigma = 12 * 0.1 * s, 10 * 0.05 * s
    noise = rng.uniform(-1, 1, size=(2, 3, 10, 12))
    for i in range(3):
        if not apply[i]:
            np.testing.assert_array_equal(out[i], x[i])
            continue
        dx = _image_ops.gaussian_blur_2d(noise[0, i:i + 1], sigma)[0] * alpha
        dy = _image_ops.gaussian_blur_2d(noise[1, i:i + 1], sigma)[0] * alpha
        ref = _reference_sample(x[i], lambda r, c: (r + dy[r, c], c + dx[r, c]), "constant", "bilinear", 9.0)
        np.testing.assert_allclose(out[i], np.clip(ref, 0, 255), atol=1e-3)
    assert apply.any()


def test_elastic_transform_scale_zero_is_the_identity_and_clips_to_value_range():
    x = _images(3)
    np.testing.assert_array_equal(L.RandomElasticTransform(scale=0.0)(x), x)
    out = L.RandomElasticTransform(value_range=(10, 200), seed=0)(x)
    assert out.min() >= 10 and out.max() <= 200


# --- MixUp and CutMix ------------------------------------------------------------------------------------------------

def test_mix_up_mixes_images_and_labels_with_the_same_weight_and_shuffle():
    x, labels = _images(8, 4, 5, 3), np.eye(8, dtype=np.float32)
    out = L.MixUp(alpha=0.4, seed=3)({"images": x, "labels": labels})
    assert set(out) == {"images", "labels"} and out["labels"].dtype == np.float32
    mixed = out["labels"]
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0, atol=1e-6)
    moved = [i for i in range(8) if mixed[i, i] < 1 - 1e-6]
    assert len(moved) >= 2
    w = mixed[moved[0], moved[0]]                           # one weight for the batch
    for i in range(8):
        other = np.argmax(mixed[i] - w * (np.arange(8) == i)) if i in moved else i
        np.testing.assert_allclose(mixed[i, i], w if i in moved else 1.0, atol=1e-6)
        np.testing.assert_allclose(out["images"][i], w * x[i] + (1 - w) * x[other], rtol=1e-5, atol=1e-3)
    # sparse labels (one number per image) mix the same way
    y = np.arange(8, dtype=np.float32)
    again = L.MixUp(alpha=0.4, seed=3)({"images": x, "labels": y})
    np.testing.assert_allclose(again["labels"], mixed @ y, atol=1e-4)


def test_mix_up_weights_follow_beta_alpha_alpha():
    layer = L.MixUp(alpha=0.2, seed=0)
    x = np.stack([np.zeros((1, 1, 1)), np.ones((1, 1, 1))]).astype(np.float32)
    ws = []
    for _ in range(3000):
        out = layer({"images": x, "labels": np.eye(2, dtype=np.float32)})["labels"]
        ws.append(out[0, 0])
    ws = np.array(ws)
    ws = ws[ws < 1 - 1e-7]                                  # the draws where the shuffle swapped the two
    # Beta(0.2, 0.2): mean 1/2, variance 1 / (4 * 1.4)
    assert abs(ws.mean() - 0.5) < 0.04 and abs(ws.var() - 1 / 5.6) < 0.02


def test_cut_mix_pastes_one_box_whose_area_is_the_label_weight():
    x = np.arange(8, dtype=np.float32)[:, None, None, None] + np.zeros((8, 12, 10, 2), np.float32)
    out = L.CutMix(seed=1)({"images": x, "labels": np.eye(8, dtype=np.float32)})
    labels, images = out["labels"], out["images"]
    np.testing.assert_allclose(labels.sum(axis=1), 1.0, atol=1e-6)
    pasted = 0
    for i in range(8):
        changed = images[i, ..., 0] != i
        if not changed.any():
            assert labels[i, i] == pytest.approx(1.0) or (labels[i] > 0).sum() == 1
            continue
        pasted += 1
        _box_of(changed)
        source = int(images[i][changed][0, 0])
        np.testing.assert_array_equal(images[i][changed], source)
        assert labels[i, i] == pytest.approx(1 - changed.sum() / 120, abs=1e-6)
        assert labels[i, source] == pytest.approx(changed.sum() / 120, abs=1e-6)
    assert pasted >= 4
    single = _images(1, 5, 5, 3)[0]
    np.testing.assert_array_equal(L.CutMix(seed=0)(single), single)   # no other image to cut from


def test_mixing_layers_in_a_dataset_map_as_keras_io_writes_them():
    x = _images(16, 6, 6, 3) / 255
    y = np.eye(4, dtype=np.float32)[np.arange(16) % 4]
    mix_up, cut_mix = L.MixUp(alpha=0.3, seed=0), L.CutMix(seed=0)
    ds = (pg.data.Dataset.from_tensor_slices((x, y)).batch(8)
          .map(lambda images, labels: mix_up({"images": images, "labels": labels}))
          .map(lambda data: cut_mix(data))
          .map(lambda data: (data["images"], data["labels"])))
    bx, by = ds[0]
    assert bx.shape == (8, 6, 6, 3) and by.shape == (8, 4)
    np.testing.assert_allclose(by.sum(axis=1), 1.0, atol=1e-5)
    assert not np.allclose(by, y[:8])
    model = pg.Sequential([pg.Input((6, 6, 3)), L.Flatten(), L.Dense(4, activation="softmax")])
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    hist = model.fit(ds, epochs=2, verbose=0)
    assert np.all(np.isfinite(hist.history["loss"]))
    model.free()


def test_dict_calls_keep_labels_for_geometric_layers_and_refuse_other_keys():
    x, y = _images(3), np.eye(3, dtype=np.float32)
    out = L.RandomShear(0.2, seed=0)({"images": x, "labels": y})
    np.testing.assert_array_equal(out["labels"], y)
    assert not np.allclose(out["images"], x)
    np.testing.assert_array_equal(L.MixUp()({"images": x, "labels": y}, training=False)["labels"], y)
    with pytest.raises(ValueError, match="bounding_boxes"):
        L.MixUp()({"images": x, "bounding_boxes": y})
    with pytest.raises(ValueError, match="images"):
        L.CutMix()({"labels": y})
    with pytest.raises(ValueError, match="one row per image"):
        L.MixUp()({"images": x, "labels": y[:2]})
    with pytest.raises(TypeError, match="labels"):
        L.MixUp()({"images": x, "labels": np.array(["a", "b", "c"])})
    with pytest.raises(TypeError, match="node alone"):
        L.CutMix()({"images": pg.Input((4, 4, 3)), "labels": pg.Input((2,))})


# --- every layer: seeds, inference, channels_first, models ----------------------------------------------------------

@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_seeded_new_draws_each_call_and_the_identity_in_inference(make):
    x = _images(6, 8, 9, 3)
    a, b = make(seed=11), make(seed=11)
    first = a(x)
    assert first.shape == x.shape and first.dtype == np.float32
    np.testing.assert_array_equal(first, b(x))
    np.testing.assert_array_equal(a(x), b(x))
    assert not np.array_equal(a(x), first)
    np.testing.assert_array_equal(a(x, training=False), x)
    pg.set_seed(5)
    c1 = make()(x)
    pg.set_seed(5)
    np.testing.assert_array_equal(make()(x), c1)


@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_channels_first_matches_channels_last(make):
    x = _images(4, 6, 7, 3)
    last = make(seed=8)(x)
    first = make(seed=8, data_format="channels_first")(x.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(first, last.transpose(0, 3, 1, 2), atol=1e-4)
    node = make(data_format="channels_first")(pg.Input((3, 6, 7)))
    assert node.shape == (None, 3, 6, 7)


@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_new_draws_on_each_fit_batch_and_never_in_predict(make):
    layer = make(seed=0)
    seen = []
    real = layer.augment

    def augment(images):
        out = real(images)
        seen.append(out.copy())
        return out
    layer.augment = augment
    inp = pg.Input((5, 5, 3))
    m = pg.Model(inp, L.Dense(1)(L.Flatten()(layer(inp))))
    m.compile(optimizer="sgd", loss="mse", seed=0)
    x, y = _images(16, 5, 5, 3) / 255, np.zeros((16, 1), np.float32)
    w = m.get_weights()
    np.testing.assert_allclose(m.predict(x), x.reshape(16, -1) @ w["dense.weight"].T + w["dense.bias"],
                               rtol=1e-4, atol=1e-4)
    m.evaluate(x, y, verbose=0)
    assert seen == []
    m.fit(np.concatenate([x[:8], x[:8]]), y, epochs=1, batch_size=8, verbose=0, shuffle=False)
    assert len(seen) == 2 and not np.array_equal(seen[0], seen[1])      # the same images, new draws
    m.free()


def test_a_model_of_all_of_them_trains_saves_and_loads(tmp_path):
    model = pg.Sequential([
        pg.Input((10, 10, 3)),
        L.RandomShear(0.2, (0.0, 0.1), fill_mode="constant"), L.RandomPerspective(0.5, scale=0.4),
        L.RandomErasing(0.5, fill_value=0.0), L.RandomElasticTransform(0.5, 0.5), L.MixUp(0.3), L.CutMix(0.8),
        L.Rescaling(1.0 / 255), L.Conv2D(2, 3, activation="relu"), L.Flatten(), L.Dense(1),
    ])
    model.compile(optimizer="adam", loss="mse")
    x, y = _images(16, 10, 10, 3), np.random.default_rng(1).random((16, 1)).astype(np.float32)
    hist = model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert np.all(np.isfinite(hist.history["loss"]))
    p = model.predict(x)
    for name in ("geo.gguf", "geo.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_array_equal(loaded.predict(x), p)
        assert [l.get_config() for l in loaded.layers] == [l.get_config() for l in model.layers]
        loaded.fit(x, y, epochs=1, batch_size=8, verbose=0)
        loaded.free()
    model.free()


# --- configs and bad arguments ---------------------------------------------------------------------------------------

CONFIGURED = [
    lambda: L.RandomShear(0.2, (0.1, 0.3), interpolation="nearest", fill_mode="wrap", fill_value=1.0, seed=1),
    lambda: L.RandomPerspective((0.2, 0.9), scale=0.5, interpolation="nearest", fill_value=3.0, seed=2),
    lambda: L.RandomErasing(0.7, scale=(0.1, 0.2), fill_value=[1, 2, 3], value_range=(0, 10), seed=3),
    lambda: L.RandomErasing(fill_value=4.0, seed=3, data_format="channels_first"),
    lambda: L.RandomElasticTransform(0.8, (0.2, 0.6), fill_mode="nearest", value_range=[0, 1], seed=4),
    lambda: L.MixUp(alpha=0.5, seed=5),
    lambda: L.CutMix((0.2, 0.8), seed=6),
]


@pytest.mark.parametrize("make", CONFIGURED)
def test_config_round_trips_and_the_copy_computes_the_same(make):
    layer = make()
    cfg = layer.get_config()
    assert {"name", "trainable", "dtype", "data_format", "seed"} <= set(cfg)
    again = type(layer).from_config(json.loads(json.dumps(cfg)))
    assert json.loads(json.dumps(again.get_config())) == json.loads(json.dumps(cfg))
    x = _images(4, 6, 8, 3)
    if cfg["data_format"] == "channels_first":
        x = x.transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(again(x), layer(x))


def test_keras_defaults_in_the_config():
    s = L.RandomShear().get_config()
    assert (s["x_factor"], s["y_factor"], s["fill_mode"], s["interpolation"]) == (0.0, 0.0, "reflect", "bilinear")
    p = L.RandomPerspective().get_config()
    assert (p["factor"], p["scale"], p["fill_value"]) == ([0.0, 1.0], 1.0, 0.0)
    e = L.RandomErasing().get_config()
    assert (e["factor"], e["scale"], e["fill_value"], e["value_range"]) == ([0.0, 1.0], [0.02, 0.33], None,
                                                                            [0.0, 255.0])
    t = L.RandomElasticTransform().get_config()
    assert (t["factor"], t["scale"], t["fill_mode"], t["value_range"]) == ([0.0, 1.0], [0.0, 1.0], "reflect",
                                                                           [0.0, 255.0])
    assert L.MixUp().get_config()["alpha"] == 0.2
    assert L.CutMix().get_config()["factor"] == [0.0, 1.0]


@pytest.mark.parametrize("make, match", [
    (lambda: L.RandomShear(1.5), "x_factor"),
    (lambda: L.RandomShear(0.1, (0.1, -0.2)), "y_factor"),
    (lambda: L.RandomShear(0.1, "a"), "y_factor"),
    (lambda: L.RandomShear(0.1, fill_mode="mirror"), "fill_mode"),
    (lambda: L.RandomShear(0.1, interpolation="bicubic"), "interpolation"),
    (lambda: L.RandomPerspective(1.2), "factor"),
    (lambda: L.RandomPerspective(scale=2.0), "scale"),
    (lambda: L.RandomPerspective(interpolation="area"), "interpolation"),
    (lambda: L.RandomPerspective(fill_value=float("inf")), "fill_value"),
    (lambda: L.RandomErasing(scale=(0.1, 1.5)), "scale"),
    (lambda: L.RandomErasing(fill_value=[1, 2]), "fill_value"),
    (lambda: L.RandomErasing(fill_value="black"), "fill_value"),
    (lambda: L.RandomErasing(value_range=(1,)), "value_range"),
    (lambda: L.RandomElasticTransform(scale=-0.5), "scale"),
    (lambda: L.RandomElasticTransform(fill_mode="edge"), "fill_mode"),
    (lambda: L.MixUp(alpha=0.0), "alpha"),
    (lambda: L.MixUp(alpha="big"), "alpha"),
    (lambda: L.CutMix(factor=(0.1, 0.2, 0.3)), "factor"),
    (lambda: L.CutMix(seed=-3), "seed"),
    (lambda: L.MixUp(data_format="NCHW"), "data_format"),
])
def test_bad_arguments_are_refused_naming_them(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_bad_inputs_are_refused(make):
    layer = make()
    with pytest.raises(ValueError, match="height, width, channels"):
        layer(np.zeros((2, 5, 5, 3, 1)))
    with pytest.raises(TypeError, match="numbers"):
        layer(np.array([[["a"]]]))
    with pytest.raises(ValueError, match="positive"):
        layer(np.zeros((2, 0, 5, 3)))
    with pytest.raises(ValueError, match="batch, height, width, channels"):
        make()(pg.Input((5, 5)))


def test_erasing_a_per_channel_fill_on_images_of_other_channels_is_refused():
    with pytest.raises(ValueError, match="channels"):
        L.RandomErasing(fill_value=[1, 2, 3])(np.zeros((2, 4, 4, 1)))


# --- Pipeline --------------------------------------------------------------------------------------------------------

def _pipeline_dense_relu_tanh(hs, w, training):
    h = np.maximum(hs[0] @ w["pipeline_layers.0.weight"].T + w["pipeline_layers.0.bias"], 0.0)
    return np.tanh(h @ w["pipeline_layers.2.weight"].T + w["pipeline_layers.2.bias"])


def _pipeline_rescale_dense(hs, w, training):
    return (hs[0] * 0.5 + 1.0) @ w["pipeline_layers.1.weight"].T + w["pipeline_layers.1.bias"]


# a Pipeline of graph layers is a graph layer: the harness checks it (its layers' weights are its own)
CASES = [
    LayerCase("pipeline_dense_relu_dense", lambda: L.Pipeline([L.Dense(3), L.ReLU(), L.Dense(2, activation="tanh")]),
              [(4,)], _pipeline_dense_relu_tanh),
    LayerCase("pipeline_rescaling_dense", lambda: L.Pipeline([L.Rescaling(0.5, offset=1.0), L.Dense(2)]),
              [(3,)], _pipeline_rescale_dense),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_pipeline_of_augmentations_applies_them_in_order_on_the_host():
    x = _images(4, 8, 8, 3)
    pipe = L.Pipeline([L.RandomShear(0.3, seed=1), L.RandomErasing((1.0, 1.0), fill_value=0.0, seed=2),
                       L.Resizing(4, 4)])
    steps = [L.RandomShear(0.3, seed=1), L.RandomErasing((1.0, 1.0), fill_value=0.0, seed=2), L.Resizing(4, 4)]
    ref = x
    for s in steps:
        ref = s(ref)
    np.testing.assert_array_equal(pipe(x), ref)
    assert pipe.host and pipe.host_training and pipe.layers[2] is pipe.pipeline_layers[2]
    np.testing.assert_array_equal(pipe(x, training=False), L.Resizing(4, 4)(x))
    assert pipe(pg.Input((8, 8, 3))).shape == (None, 4, 4, 3)
    assert pipe(x[0]).shape == (4, 4, 3)                            # one image


def test_pipeline_on_a_dict_mixes_labels_through_mixing_layers():
    x, y = _images(6, 5, 5, 3), np.eye(6, dtype=np.float32)
    pipe = L.Pipeline([L.RandomFlip(seed=0), L.MixUp(seed=1), L.Rescaling(1 / 255)])
    out = pipe({"images": x, "labels": y})
    ref_images = L.RandomFlip(seed=0)(x)
    ref = L.MixUp(seed=1)({"images": ref_images, "labels": y})
    np.testing.assert_allclose(out["images"], ref["images"] / 255, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out["labels"], ref["labels"])


def test_pipeline_in_models_trains_saves_and_loads(tmp_path):
    aug = L.Pipeline([L.RandomFlip("horizontal"), L.RandomShear(0.2), L.CutMix()], name="augment")
    inp = pg.Input((6, 6, 3))
    head = L.Pipeline([L.Flatten(), L.Dense(4, activation="relu"), L.Dense(1)], name="head")
    model = pg.Model(inp, head(L.Rescaling(1 / 255)(aug(inp))))
    model.compile(optimizer="adam", loss="mse")
    calls = []
    real = aug.pipeline_layers[2].augment
    aug.pipeline_layers[2].augment = lambda images: calls.append(len(images)) or real(images)
    x, y = _images(12, 6, 6, 3), np.random.default_rng(0).random((12, 1)).astype(np.float32)
    model.fit(x, y, epochs=2, batch_size=6, verbose=0)
    assert calls == [6, 6, 6, 6]
    p = model.predict(x)
    assert len(calls) == 4
    w = model.get_weights()
    h = np.maximum((x / 255).reshape(12, -1) @ w["head.pipeline_layers.1.weight"].T +
                   w["head.pipeline_layers.1.bias"], 0)
    np.testing.assert_allclose(p, h @ w["head.pipeline_layers.2.weight"].T + w["head.pipeline_layers.2.bias"],
                               rtol=1e-4, atol=1e-5)
    for name in ("pipe.gguf", "pipe.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_array_equal(loaded.predict(x), p)
        assert [type(l).__name__ for l in loaded.get_layer("augment").layers] == ["RandomFlip", "RandomShear",
                                                                                 "CutMix"]
        loaded.free()
    seq = pg.Sequential([pg.Input((6, 6, 3)), L.Pipeline([L.RandomFlip(), L.RandomErasing()]), L.Flatten(),
                         L.Dense(1)])
    seq.compile(optimizer="adam", loss="mse")
    seq.fit(x, y, epochs=1, batch_size=4, verbose=0)
    assert seq.predict(x).shape == (12, 1)
    model.free()
    seq.free()


def test_pipeline_holding_keras_ios_augmentation_sequential(tmp_path):
    data_augmentation = pg.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1)])
    pipe = L.Pipeline([data_augmentation, L.MixUp(seed=0)])
    x, y = _images(6, 6, 6, 3), np.random.default_rng(0).random((6, 1)).astype(np.float32)
    assert pipe.host and pipe(x).shape == x.shape
    np.testing.assert_array_equal(pipe(x, training=False), x)
    inp = pg.Input((6, 6, 3))
    model = pg.Model(inp, L.Dense(1)(L.Flatten()(pipe(inp))))
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, epochs=1, batch_size=3, verbose=0)
    path = str(tmp_path / "nested.keras")
    model.save(path)
    loaded = pg.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    loaded.free()
    model.free()


def test_pipeline_config_round_trip_and_bad_arguments():
    pipe = L.Pipeline([L.RandomFlip("vertical", seed=3), L.MixUp(0.4, seed=2)], name="p")
    cfg = json.loads(json.dumps(pipe.get_config()))
    again = L.Pipeline.from_config(cfg)
    assert json.loads(json.dumps(again.get_config())) == cfg
    x = _images(4)
    np.testing.assert_array_equal(again(x), pipe(x))
    with pytest.raises(TypeError, match="list of layers"):
        L.Pipeline(L.RandomFlip())
    with pytest.raises(TypeError, match=r"layers\[1\]"):
        L.Pipeline([L.RandomFlip(), "flip"])
    with pytest.raises(ValueError, match="mixes preprocessing layers"):
        L.Pipeline([L.RandomFlip(), L.Conv2D(2, 3)])
