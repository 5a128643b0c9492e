"""Keras 3's colour augmentation and preprocessing image layers (HostLayers,
numpy on the host): RandomGrayscale, RandomHue, RandomSaturation,
RandomSharpness, Solarization, RandomInvert, RandomPosterization,
RandomColorDegeneration, RandomColorJitter, AutoContrast, Equalization,
RandomGaussianBlur, and the policies RandAugment and AugMix.

References are written apart from the layers, in float64: HSV through Python's
``colorsys``, filters as explicit loops over a zero-padded image, histograms
worked by hand.  Factors pinned to one value ``(f, f)`` make the draws known.
Then seeds, new draws per call and per fit batch, the identity in inference,
channels_first, configs, save and load, keras-io's nesting, bad arguments."""

import colorsys
import json

import numpy as np
import pytest

import pyggml as pg

L = pg.layers

LUMA = np.array([0.2989, 0.5870, 0.1140])


def _images(n=3, h=6, w=7, c=3, seed=0):
    return (np.random.default_rng(seed).random((n, h, w, c)) * 255).astype(np.float32)


def _hsv_reference(img, fn):
    """img (h, w, 3) in [0, 1]: every pixel through colorsys, (h, s, v) -> fn -> back to RGB."""
    out = np.zeros(img.shape)
    for r in range(img.shape[0]):
        for c in range(img.shape[1]):
            h, s, v = colorsys.rgb_to_hsv(*[float(t) for t in img[r, c]])
            out[r, c] = colorsys.hsv_to_rgb(*fn(h, s, v))
    return out


def _filter_reference(img, kernel):
    """img (h, w, c) filtered by kernel (kh, kw) over a zero-padded copy, 'same' size, loops."""
    kh, kw = kernel.shape
    h, w, ch = img.shape
    top, left = (kh - 1) // 2, (kw - 1) // 2
    big = np.zeros((h + kh - 1, w + kw - 1, ch))
    big[top:top + h, left:left + w] = img
    out = np.zeros((h, w, ch))
    for r in range(h):
        for c in range(w):
            out[r, c] = (big[r:r + kh, c:c + kw] * kernel[:, :, None]).sum(axis=(0, 1))
    return out


# --- RandomGrayscale ---------------------------------------------------------------------------------------------

def test_grayscale_uses_the_luma_weights_on_every_channel():
    x = _images(4)
    out = L.RandomGrayscale(factor=1.0)(x)
    grey = x.astype(np.float64) @ LUMA
    np.testing.assert_allclose(out, np.repeat(grey[..., None], 3, axis=-1), rtol=1e-5)
    pure = np.array([[[[255, 0, 0], [0, 255, 0], [0, 0, 255]]]], np.float32)
    np.testing.assert_allclose(L.RandomGrayscale(1.0)(pure)[0, 0, :, 0], [76.2195, 149.685, 29.07], rtol=1e-5)


def test_grayscale_factor_is_the_probability():
    x = _images(400, 2, 2)
    np.testing.assert_array_equal(L.RandomGrayscale(0.0)(x), x)
    out = L.RandomGrayscale(0.3, seed=1)(x)
    grey = np.all(out[..., 0] == out[..., 1], axis=(1, 2))
    assert 0.22 < grey.mean() < 0.38
    np.testing.assert_array_equal(out[~grey], x[~grey])


def test_grayscale_one_channel_is_kept_and_other_counts_refused():
    g = _images(2, c=1)
    np.testing.assert_array_equal(L.RandomGrayscale(1.0)(g), g)
    with pytest.raises(ValueError, match="3 channels"):
        L.RandomGrayscale(1.0)(_images(2, c=4))


# --- RandomHue ---------------------------------------------------------------------------------------------------

def test_hue_half_turn_takes_pure_colours_to_their_complements():
    pure = np.array([[[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [128, 128, 128]]]], np.float32)
    out = L.RandomHue((1.0, 1.0))(pure)
    np.testing.assert_allclose(out[0, 0], [[0, 255, 255], [255, 0, 255], [255, 255, 0], [0, 0, 255],
                                           [128, 128, 128]], atol=1e-3)


def test_hue_third_of_a_turn_moves_red_to_green_or_blue():
    red = np.tile(np.array([255, 0, 0], np.float32), (60, 1, 1, 1))
    out = L.RandomHue((2 / 3, 2 / 3), seed=0)(red)[:, 0, 0]
    green = np.all(np.abs(out - [0, 255, 0]) < 1e-2, axis=1)
    blue = np.all(np.abs(out - [0, 0, 255]) < 1e-2, axis=1)
    assert np.all(green | blue) and green.any() and blue.any()      # a random sign per image


def test_hue_matches_colorsys_with_value_range_0_1():
    x = _images(3, 4, 5) / 255
    f = 0.3
    out = L.RandomHue((f, f), value_range=(0, 1), seed=3)(x)
    for i in range(3):
        plus = _hsv_reference(x[i], lambda h, s, v: ((h + f / 2) % 1.0, s, v))
        minus = _hsv_reference(x[i], lambda h, s, v: ((h - f / 2) % 1.0, s, v))
        assert min(np.abs(out[i] - plus).max(), np.abs(out[i] - minus).max()) < 1e-5
    np.testing.assert_allclose(L.RandomHue(0.0)(x * 255), x * 255, atol=1e-3)


# --- RandomSaturation --------------------------------------------------------------------------------------------

def test_saturation_factor_half_is_the_identity_zero_grey_one_full():
    x = _images(3)
    np.testing.assert_allclose(L.RandomSaturation((0.5, 0.5))(x), x, atol=1e-3)
    grey = L.RandomSaturation((0.0, 0.0))(x)
    np.testing.assert_allclose(grey, np.repeat(x.max(axis=-1, keepdims=True), 3, axis=-1), atol=1e-3)
    full = L.RandomSaturation((1.0, 1.0))(x)
    np.testing.assert_allclose(full.min(axis=-1), 0.0, atol=1e-3)
    np.testing.assert_allclose(full.max(axis=-1), x.max(axis=-1), atol=1e-3)


def test_saturation_matches_colorsys():
    x = _images(2, 4, 4) / 255
    out = L.RandomSaturation((0.25, 0.25), value_range=(0, 1))(x)      # s * 0.25 / 0.75
    for i in range(2):
        ref = _hsv_reference(x[i], lambda h, s, v: (h, min(s / 3.0, 1.0), v))
        np.testing.assert_allclose(out[i], ref, atol=1e-5)


# --- RandomSharpness ---------------------------------------------------------------------------------------------

SMOOTH = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]]) / 13.0


def test_sharpness_blends_with_the_3x3_smoothed_image():
    x = _images(2, 5, 6)
    np.testing.assert_allclose(L.RandomSharpness((0.5, 0.5))(x), x, atol=1e-3)
    smoothed = np.stack([_filter_reference(x[i].astype(np.float64), SMOOTH) for i in range(2)])
    np.testing.assert_allclose(L.RandomSharpness((0.0, 0.0))(x), smoothed, rtol=1e-5, atol=1e-3)
    sharp = np.clip(2 * x - smoothed, 0, 255)                      # factor 1: image + (1 - 2)(smoothed - image)
    np.testing.assert_allclose(L.RandomSharpness((1.0, 1.0))(x), sharp, rtol=1e-5, atol=1e-3)
    f = 0.2
    ref = np.clip(x + (1 - 2 * f) * (smoothed - x), 10, 200)
    np.testing.assert_allclose(L.RandomSharpness((f, f), value_range=(10, 200))(x), ref, rtol=1e-5, atol=1e-3)


# --- Solarization ------------------------------------------------------------------------------------------------

def test_solarization_defaults_invert_everything():
    x = _images(2)
    np.testing.assert_allclose(L.Solarization()(x), 255 - x, atol=1e-4)


def test_solarization_addition_then_threshold():
    x = _images(3)
    a, t = 0.1, 0.6
    ref = np.clip(x.astype(np.float64) + a * 255, 0, 255)
    ref = np.where(ref < t * 255, ref, 255 - ref)
    out = L.Solarization((a, a), (t, t))(x)
    np.testing.assert_allclose(out, ref, atol=1e-3)
    out01 = L.Solarization((a, a), (t, t), value_range=(0, 1))(x / 255)
    np.testing.assert_allclose(out01, ref / 255, atol=1e-5)


# --- RandomInvert ------------------------------------------------------------------------------------------------

def test_invert_always_never_and_in_value_range():
    x = _images(3)
    np.testing.assert_allclose(L.RandomInvert((1.0, 1.0))(x), 255 - x)
    np.testing.assert_array_equal(L.RandomInvert(0.0)(x), x)
    np.testing.assert_allclose(L.RandomInvert((1.0, 1.0), value_range=(-1, 1))(x / 255), -x / 255, atol=1e-7)
    many = _images(400, 1, 1, 1)
    out = L.RandomInvert(seed=0)(many)                              # factor 1: probability ~ U(0, 1): 1/2 overall
    inverted = np.abs(out - (255 - many)) < 1e-3
    assert 0.4 < inverted.mean() < 0.6


# --- RandomPosterization -----------------------------------------------------------------------------------------

def test_posterization_keeps_the_high_bits():
    x = np.array([[[[0, 37, 255], [200, 129, 7]]]], np.float32)
    np.testing.assert_array_equal(L.RandomPosterization((3, 3))(x), [[[[0, 32, 224], [192, 128, 0]]]])
    np.testing.assert_array_equal(L.RandomPosterization((8, 8))(x), x)
    np.testing.assert_array_equal(L.RandomPosterization((1, 1))(x), [[[[0, 0, 128], [128, 128, 0]]]])
    np.testing.assert_allclose(L.RandomPosterization((3, 3), value_range=(0, 1))(x / 255),
                               [[[[0, 32 / 255, 224 / 255], [192 / 255, 128 / 255, 0]]]], atol=1e-6)


def test_posterization_draws_bits_from_the_range():
    x = np.full((300, 1, 1, 1), 255.0, np.float32)
    out = L.RandomPosterization(4, seed=0)(x)                      # 1 to 4 bits: 128, 192, 224, 240
    assert set(np.unique(out)) == {128.0, 192.0, 224.0, 240.0}


# --- RandomColorDegeneration -------------------------------------------------------------------------------------

def test_color_degeneration_moves_towards_grey():
    x = _images(3)
    grey = (x.astype(np.float64) @ LUMA)[..., None]
    np.testing.assert_allclose(L.RandomColorDegeneration((1.0, 1.0))(x), np.repeat(grey, 3, -1), rtol=1e-5)
    np.testing.assert_array_equal(L.RandomColorDegeneration((0.0, 0.0))(x), x)
    np.testing.assert_allclose(L.RandomColorDegeneration((0.4, 0.4))(x), x + 0.4 * (grey - x), rtol=1e-5,
                               atol=1e-3)


# --- RandomColorJitter -------------------------------------------------------------------------------------------

def test_color_jitter_runs_the_steps_given_in_order():
    x = _images(3)
    np.testing.assert_array_equal(L.RandomColorJitter()(x), x)
    np.testing.assert_allclose(L.RandomColorJitter(brightness_factor=(0.1, 0.1))(x), np.clip(x + 25.5, 0, 255),
                               atol=1e-3)
    # brightness (pinned) then contrast c in [0.5, 1.5] about each channel's mean of the brightened image
    b = np.clip(x.astype(np.float64) + 25.5, 0, 255)
    mean = b.mean(axis=(1, 2), keepdims=True)
    out = L.RandomColorJitter(brightness_factor=(0.1, 0.1), contrast_factor=(0.5, 0.5), seed=0)(x)
    for i in range(len(x)):
        inside = (out[i] > 0) & (out[i] < 255)
        d, o = (b[i] - mean[i])[inside], (out[i] - mean[i])[inside]
        c = (d * o).sum() / (d * d).sum()
        assert 0.5 <= c <= 1.5
        np.testing.assert_allclose(out[i], np.clip((b[i] - mean[i]) * c + mean[i], 0, 255), atol=1e-2)
    pure = np.array([[[[255, 0, 0]]]], np.float32)
    out = L.RandomColorJitter(saturation_factor=(0.5, 0.5), hue_factor=(1.0, 1.0))(pure)
    np.testing.assert_allclose(out[0, 0, 0], [0, 255, 255], atol=1e-2)


def test_color_jitter_is_seeded_by_its_own_seed():
    x = _images(4)
    make = lambda: L.RandomColorJitter(brightness_factor=0.2, contrast_factor=0.3, saturation_factor=0.4,  # noqa
                                       hue_factor=0.2, seed=9)
    a, b = make(), make()
    first = a(x)
    np.testing.assert_array_equal(first, b(x))
    assert not np.allclose(a(x), first)


# --- AutoContrast ------------------------------------------------------------------------------------------------

def test_auto_contrast_stretches_each_channel():
    x = np.zeros((1, 1, 3, 3), np.float32)
    x[0, 0, :, 0] = [10, 20, 30]
    x[0, 0, :, 1] = [50, 50, 50]                                     # one value: left as it is
    x[0, 0, :, 2] = [0, 100, 255]
    out = L.AutoContrast()(x)
    np.testing.assert_allclose(out[0, 0], [[0, 50, 0], [127.5, 50, 100], [255, 50, 255]], atol=1e-4)
    y = _images(2) / 255 * 0.5 + 0.2
    out = L.AutoContrast(value_range=(0, 1))(y)
    lo, hi = y.min(axis=(1, 2), keepdims=True), y.max(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(out, (y - lo) / (hi - lo), atol=1e-5)
    np.testing.assert_allclose(L.AutoContrast(value_range=(0, 1))(y, training=False), out)  # always on


# --- Equalization ------------------------------------------------------------------------------------------------

def test_equalization_of_a_known_histogram():
    x = np.array([0, 0, 0, 0, 100, 100, 200, 255], np.float32).reshape(1, 2, 4, 1)
    # counts 4, 2, 1, 1; cdf 4, 6, 7, 8; cdf_min 4: (cdf - 4) * 255 / 4 rounded: 0, 128 (127.5), 191, 255
    np.testing.assert_array_equal(L.Equalization()(x).reshape(-1), [0, 0, 0, 0, 128, 128, 191, 255])
    np.testing.assert_allclose(L.Equalization(value_range=(0, 1))(x / 255).reshape(-1),
                               np.array([0, 0, 0, 0, 128, 128, 191, 255]) / 255, atol=1e-6)
    flat = np.full((1, 3, 3, 1), 77.0, np.float32)
    np.testing.assert_array_equal(L.Equalization()(flat), flat)


def test_equalization_with_fewer_bins_and_per_image_and_channel():
    x = np.array([0, 10, 130, 250], np.float32).reshape(1, 2, 2, 1)
    # 2 bins: bin int(v / 255): 0, 0, 0, 0 -> one bin: unchanged; 3 bins: int(v * 2 / 255): 0, 0, 1, 1
    np.testing.assert_array_equal(L.Equalization(bins=2)(x), x)
    # cdf 2, 4; cdf_min 2: bin 0 -> 0, bin 1 -> 255
    np.testing.assert_array_equal(L.Equalization(bins=3)(x).reshape(-1), [0, 0, 255, 255])
    both = np.concatenate([np.concatenate([x, x[::-1, ::-1] * 0.5], axis=-1), np.zeros((1, 2, 2, 2), np.float32)])
    out = L.Equalization()(both)
    np.testing.assert_array_equal(out[0, ..., 0], L.Equalization()(x)[0, ..., 0])
    np.testing.assert_array_equal(out[1], both[1])                   # the other image does not change it


def test_equalization_acts_in_training_only_as_keras():
    x = _images(2)
    assert not np.allclose(L.Equalization()(x), x)
    np.testing.assert_array_equal(L.Equalization()(x, training=False), x)


# --- RandomGaussianBlur ------------------------------------------------------------------------------------------

def _gauss(size, sigma):
    t = np.arange(size) - (size - 1) / 2
    k = np.exp(-t ** 2 / (2 * sigma ** 2))
    return k / k.sum()


def test_gaussian_blur_against_a_loop():
    x = _images(2, 6, 7)
    s = 0.8
    out = L.RandomGaussianBlur(factor=(1.0, 1.0), kernel_size=5, sigma=(s, s))(x)
    k = np.outer(_gauss(5, s + 1e-6), _gauss(5, s + 1e-6))
    ref = np.stack([_filter_reference(x[i].astype(np.float64), k) for i in range(2)])
    np.testing.assert_allclose(out, np.clip(ref, 0, 255), rtol=1e-5, atol=1e-3)
    # a pair: (across, down), as Keras's gaussian_blur
    out = L.RandomGaussianBlur(factor=(1.0, 1.0), kernel_size=(1, 3), sigma=(s, s))(x)
    ref = np.stack([_filter_reference(x[i].astype(np.float64), _gauss(3, s + 1e-6)[:, None]) for i in range(2)])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(L.RandomGaussianBlur(factor=0.0)(x), x)


# --- RandAugment and AugMix --------------------------------------------------------------------------------------

def _candidates_at_strength_zero(img):
    """What each of RandAugment's operations does at factor 0 to one image (1, h, w, 3)."""
    x = img.astype(np.float64)
    smoothed = _filter_reference(x[0], SMOOTH)[None]
    lo, hi = x.min(axis=(1, 2), keepdims=True), x.max(axis=(1, 2), keepdims=True)
    return {"identity": x, "sharpness": smoothed, "posterize_1_bit": (x >= 128) * 128.0,
            "solarize": 255 - x, "auto_contrast": (x - lo) * 255 / (hi - lo),
            "equalize": L.Equalization()(img).astype(np.float64)}


def test_rand_augment_picks_an_operation_per_image():
    x = _images(40, 5, 5, seed=4)
    out = L.RandAugment(num_ops=1, factor=0.0, seed=2)(x)
    seen = set()
    for i in range(40):
        cands = _candidates_at_strength_zero(x[i:i + 1])
        match = [k for k, v in cands.items() if np.allclose(out[i:i + 1], v, atol=1e-2)]
        assert match, f"image {i} is none of the operations"
        seen.update(match)
    assert len(seen) >= 4                                           # images of one batch take different ops
    np.testing.assert_array_equal(L.RandAugment(num_ops=0)(x), x)


def test_rand_augment_keeps_values_in_range_and_reproduces():
    x = _images(6, 8, 8)
    a, b = L.RandAugment(value_range=(0, 1), num_ops=3, factor=0.7, seed=5), L.RandAugment(
        value_range=(0, 1), num_ops=3, factor=0.7, seed=5)
    first = a(x / 255)
    np.testing.assert_array_equal(first, b(x / 255))
    assert first.min() >= -1e-6 and first.max() <= 1 + 1e-6 and first.shape == x.shape
    assert not np.allclose(a(x / 255), first)


def test_aug_mix_mixes_chains_with_the_original():
    x = _images(5, 6, 6)
    np.testing.assert_allclose(L.AugMix(chain_depth=0, seed=0)(x), x, rtol=1e-5, atol=1e-3)   # every chain: x
    a, b = L.AugMix(seed=3, all_ops=False), L.AugMix(seed=3, all_ops=False)
    first = a(x)
    np.testing.assert_array_equal(first, b(x))
    assert first.min() >= 0 and first.max() <= 255 and not np.allclose(first, x)
    out = L.AugMix(num_chains=2, chain_depth=4, factor=(0.2, 0.6), alpha=0.5, value_range=(0, 1),
                   interpolation="nearest", seed=1)(x / 255)
    assert out.shape == x.shape and np.isfinite(out).all() and out.max() <= 1.0


# --- common behaviour ---------------------------------------------------------------------------------------------

RANDOM = [
    lambda **k: L.RandomGrayscale(0.5, **k),
    lambda **k: L.RandomHue(0.5, **k),
    lambda **k: L.RandomSaturation(0.8, **k),
    lambda **k: L.RandomSharpness(0.9, **k),
    lambda **k: L.Solarization(0.3, 0.7, **k),
    lambda **k: L.RandomInvert(**k),
    lambda **k: L.RandomPosterization(5, **k),
    lambda **k: L.RandomColorDegeneration(0.9, **k),
    lambda **k: L.RandomColorJitter(brightness_factor=0.2, hue_factor=0.3, **k),
    lambda **k: L.RandomGaussianBlur(sigma=(0.5, 1.0), **k),
    lambda **k: L.RandAugment(**k),
    lambda **k: L.AugMix(**k),
]


@pytest.mark.parametrize("make", RANDOM)
def test_seeds_reproduce_calls_draw_anew_and_inference_is_the_identity(make):
    x = _images(6, 6, 6)
    a, b = make(seed=11), make(seed=11)
    first = a(x)
    assert first.dtype == np.float32 and first.shape == x.shape
    np.testing.assert_array_equal(first, b(x))
    assert not np.array_equal(first, x)
    assert not np.array_equal(a(x), first)
    np.testing.assert_array_equal(a(x, training=False), x)
    single = make(seed=11)(x[0])                                      # one image (rank 3): a batch of one
    np.testing.assert_array_equal(single, make(seed=11)(x[:1])[0])
    np.testing.assert_array_equal(make(seed=11)(x[0], training=False), x[0])


def _unseeded(cls):
    return lambda seed=None, **k: cls(**k)


ALL = RANDOM + [_unseeded(L.AutoContrast), _unseeded(L.Equalization)]


@pytest.mark.parametrize("make", ALL)
def test_channels_first_is_channels_last_transposed(make):
    x = _images(3, 5, 6)
    last = make(seed=3)(x)
    first = make(seed=3, data_format="channels_first")(x.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(first.transpose(0, 2, 3, 1), last, rtol=1e-5, atol=1e-3)


CONFIGURED = [
    lambda: L.RandomGrayscale(0.3, seed=1, name="g"),
    lambda: L.RandomHue((0.1, 0.4), value_range=(0, 1), seed=2),
    lambda: L.RandomSaturation(0.7, value_range=[-1, 1], seed=3),
    lambda: L.RandomSharpness((0.2, 0.9), seed=4, data_format="channels_first"),
    lambda: L.Solarization((0.1, 0.2), 0.5, value_range=(0, 1), seed=5),
    lambda: L.RandomInvert(0.6, seed=6),
    lambda: L.RandomPosterization((2, 6), seed=7),
    lambda: L.RandomColorDegeneration(0.5, seed=8),
    lambda: L.RandomColorJitter((0, 1), brightness_factor=(-0.1, 0.2), contrast_factor=0.1, hue_factor=0.2, seed=9),
    lambda: L.AutoContrast(value_range=(0, 1)),
    lambda: L.Equalization(value_range=(0, 1), bins=64),
    lambda: L.RandomGaussianBlur(0.8, kernel_size=(3, 5), sigma=(0.3, 0.9), seed=10),
    lambda: L.RandAugment(value_range=(0, 1), num_ops=3, factor=(0.1, 0.4), interpolation="nearest", seed=11),
    lambda: L.AugMix(value_range=(0, 1), num_chains=2, chain_depth=2, factor=0.4, alpha=0.5, all_ops=False,
                     seed=12),
]


@pytest.mark.parametrize("make", CONFIGURED)
def test_config_round_trips_and_the_copy_computes_the_same(make):
    layer = make()
    cfg = layer.get_config()
    assert {"name", "trainable", "dtype", "data_format"} <= set(cfg)
    again = type(layer).from_config(json.loads(json.dumps(cfg)))
    assert json.loads(json.dumps(again.get_config())) == json.loads(json.dumps(cfg))
    x = _images(2, 6, 8, 3) / 255
    if cfg["data_format"] == "channels_first":
        x = x.transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(again(x), layer(x))


def test_keras_config_keys_and_defaults():
    assert L.RandomGrayscale().get_config()["factor"] == 0.5
    assert L.RandomHue(0.4).get_config()["factor"] == [0.0, 0.4]               # a number f: (0, f), as Keras
    assert L.RandomInvert().get_config()["factor"] == [0.0, 1.0]
    assert L.RandomPosterization(4).get_config()["factor"] == [1, 4]            # bounds (1, 8)
    s = L.Solarization().get_config()
    assert s["addition_factor"] == [0.0, 0.0] and s["threshold_factor"] == [0.0, 0.0]
    assert s["value_range"] == [0.0, 255.0]
    b = L.RandomGaussianBlur().get_config()
    assert (b["factor"], b["kernel_size"], b["sigma"]) == ([0.0, 1.0], [3, 3], [0.0, 1.0])
    e = L.Equalization().get_config()
    assert e["bins"] == 256 and "seed" not in e
    r = L.RandAugment().get_config()
    assert (r["num_ops"], r["factor"], r["interpolation"], r["value_range"]) == (2, [0.0, 0.5], "bilinear",
                                                                                   [0.0, 255.0])
    a = L.AugMix().get_config()
    assert (a["num_chains"], a["chain_depth"], a["factor"], a["alpha"], a["all_ops"]) == (3, 3, [0.0, 0.3], 1.0,
                                                                                          True)
    j = L.RandomColorJitter(hue_factor=(0.1, 0.2)).get_config()
    assert j["hue_factor"] == [0.1, 0.2] and j["brightness_factor"] is None


# --- in models ---------------------------------------------------------------------------------------------------

def _spied(layer):
    calls = []
    real = layer.augment

    def augment(images):
        calls.append(len(images))
        return real(images)
    layer.augment = augment
    return calls


def test_fit_draws_per_batch_and_predict_evaluate_do_not_augment():
    hue = L.RandomHue(0.5, seed=0)
    m = pg.Sequential([pg.Input((4, 4, 3)), hue, L.RandomGrayscale(0.5), L.Rescaling(1 / 255), L.Flatten(),
                       L.Dense(1)])
    m.compile(optimizer="sgd", loss="mse", seed=0)
    calls = _spied(hue)
    x, y = _images(20, 4, 4), np.zeros((20, 1), np.float32)
    m.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert calls == [8, 8, 4] * 2
    m.evaluate(x, y, verbose=0)
    w = m.get_weights()
    np.testing.assert_allclose(m.predict(x), x.reshape(20, -1) / 255 @ w["dense.weight"].T + w["dense.bias"],
                               rtol=1e-4, atol=1e-5)
    assert len(calls) == 6
    m.free()


def test_fit_sees_solarized_images_and_predict_the_raw_ones():
    # Solarization's defaults invert every value in training: the model learns y for inverted images
    inp = pg.Input((2, 2, 1))
    out = L.Dense(1)(L.Flatten()(L.Solarization(value_range=(0, 1))(inp)))
    m = pg.Model(inp, out)
    m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse", seed=0)
    x = np.zeros((16, 2, 2, 1), np.float32)                            # inverted: all ones
    y = np.full((16, 1), 2.0, np.float32)
    m.fit(x, y, epochs=80, batch_size=16, verbose=0)
    w = m.get_weights()
    np.testing.assert_allclose(np.ones((1, 4)) @ w["dense.weight"].T + w["dense.bias"], [[2.0]], atol=0.05)
    np.testing.assert_allclose(m.predict(x[:1]), w["dense.bias"][None], rtol=1e-5, atol=1e-5)
    m.free()


def test_keras_io_augmentation_sequential_in_a_functional_model_saves_and_loads(tmp_path):
    data_augmentation = pg.Sequential([L.RandomFlip("horizontal"), L.RandAugment(value_range=(0, 255), seed=1),
                                       L.RandomColorJitter(brightness_factor=0.1, saturation_factor=0.3),
                                       L.AutoContrast(), L.AugMix(seed=2), L.Equalization(),
                                       L.RandomGaussianBlur(0.5), L.RandomPosterization(6)])
    images = _images(4, 10, 10)
    assert not np.allclose(data_augmentation(images), images)
    inputs = pg.Input(shape=(10, 10, 3))
    x = L.Rescaling(1.0 / 255)(data_augmentation(inputs))
    outputs = L.Dense(2, activation="softmax")(L.Flatten()(L.Conv2D(2, 3)(x)))
    model = pg.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x_train = _images(16, 10, 10, seed=5)
    y_train = (x_train[..., 0].mean(axis=(1, 2)) > 127.5).astype(np.int64)
    hist = model.fit(x_train, y_train, epochs=2, batch_size=8, verbose=0)
    assert np.all(np.isfinite(hist.history["loss"]))
    p = model.predict(x_train)
    # inference: of the augmentations only AutoContrast acts
    head = pg.Sequential([pg.Input((10, 10, 3)), L.Rescaling(1.0 / 255), L.Conv2D(2, 3), L.Flatten(),
                          L.Dense(2, activation="softmax")])
    head.compile(loss="mse")
    head.set_weights(model.get_weights())
    contrasted = L.AutoContrast()(x_train)
    assert not np.allclose(contrasted, x_train)
    np.testing.assert_allclose(head.predict(contrasted), p, rtol=1e-4, atol=1e-6)
    head.free()
    for name in ("colour.gguf", "colour.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_allclose(loaded.predict(x_train), p, rtol=1e-6, atol=1e-7)
        nested = loaded.get_layer(index=1)
        assert [l.get_config() for l in nested.layers] == [l.get_config() for l in data_augmentation.layers]
        loaded.fit(x_train, y_train, epochs=1, batch_size=8, verbose=0)
        loaded.free()
    model.free()


def test_sequential_model_of_every_layer_trains_and_reloads(tmp_path):
    model = pg.Sequential([pg.Input((8, 8, 3))] + [make(seed=i) for i, make in enumerate(ALL)] +
                          [L.Rescaling(1 / 255), L.Flatten(), L.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    x, y = _images(8, 8, 8), np.ones((8, 1), np.float32)
    model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    p = model.predict(x)
    path = str(tmp_path / "all.gguf")
    model.save(path)
    loaded = pg.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x), p)
    loaded.free()
    model.free()


def test_integer_images_and_nested_lists():
    x = _images(2).astype(np.uint8)
    out = L.RandomInvert((1.0, 1.0))(x)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, 255.0 - x)
    np.testing.assert_allclose(L.RandomGrayscale(1.0)([[[10.0, 10.0, 10.0]]]), np.full((1, 1, 3), 9.999),
                               rtol=1e-6)                     # Keras's weights sum to 0.9999


# --- bad arguments and inputs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, match", [
    (lambda: L.RandomGrayscale(1.5), "factor"),
    (lambda: L.RandomGrayscale("half"), "factor"),
    (lambda: L.RandomHue(-0.1), "factor"),
    (lambda: L.RandomHue((0.1, 0.2, 0.3)), "factor"),
    (lambda: L.RandomHue(0.1, value_range=(1, 1)), "value_range"),
    (lambda: L.RandomSaturation(2), "factor"),
    (lambda: L.RandomSaturation(0.2, value_range=5), "value_range"),
    (lambda: L.RandomSharpness(float("nan")), "factor"),
    (lambda: L.Solarization(1.5), "addition_factor"),
    (lambda: L.Solarization(0.1, (0.2, -0.1)), "threshold_factor"),
    (lambda: L.RandomInvert(0.5, value_range=("a", 1)), "value_range"),
    (lambda: L.RandomPosterization(0), "factor"),
    (lambda: L.RandomPosterization(9), "factor"),
    (lambda: L.RandomPosterization(2.5), "factor"),
    (lambda: L.RandomPosterization((1, 3, 5)), "factor"),
    (lambda: L.RandomColorDegeneration(1.1), "factor"),
    (lambda: L.RandomColorJitter(hue_factor=2.0), "hue_factor"),
    (lambda: L.RandomColorJitter(brightness_factor="x"), "brightness_factor"),
    (lambda: L.RandomColorJitter(value_range=(0,)), "value_range"),
    (lambda: L.AutoContrast(value_range=None), "value_range"),
    (lambda: L.Equalization(bins=1), "bins"),
    (lambda: L.Equalization(bins=2.5), "bins"),
    (lambda: L.Equalization(seed=1), "seed"),
    (lambda: L.RandomGaussianBlur(kernel_size=4), "kernel_size"),
    (lambda: L.RandomGaussianBlur(kernel_size=(3, 5, 7)), "kernel_size"),
    (lambda: L.RandomGaussianBlur(kernel_size=0), "kernel_size"),
    (lambda: L.RandomGaussianBlur(sigma=2.0), "sigma"),
    (lambda: L.RandomGaussianBlur(factor=-1), "factor"),
    (lambda: L.RandAugment(num_ops=-1), "num_ops"),
    (lambda: L.RandAugment(num_ops=1.5), "num_ops"),
    (lambda: L.RandAugment(factor=1.5), "factor"),
    (lambda: L.RandAugment(interpolation="bicubic"), "interpolation"),
    (lambda: L.AugMix(num_chains=0), "num_chains"),
    (lambda: L.AugMix(chain_depth=-1), "chain_depth"),
    (lambda: L.AugMix(alpha=0.0), "alpha"),
    (lambda: L.AugMix(all_ops="yes"), "all_ops"),
    (lambda: L.AugMix(seed=-3), "seed"),
    (lambda: L.RandomHue(0.1, data_format="NCHW"), "data_format"),
])
def test_bad_arguments_are_refused_naming_them(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("make", ALL)
def test_bad_inputs_are_refused(make):
    layer = make(seed=0)
    with pytest.raises(ValueError, match="height, width, channels"):
        layer(np.zeros((2, 5, 5, 3, 1)))
    with pytest.raises(TypeError, match="numbers"):
        layer(np.array([[["a"]]]))
    with pytest.raises(ValueError, match="positive"):
        layer(np.zeros((2, 0, 5, 3)))
    with pytest.raises(ValueError, match="batch, height, width, channels"):
        make(seed=0)(pg.Input((5, 5)))


@pytest.mark.parametrize("make", [lambda: L.RandomHue(0.2), lambda: L.RandomSaturation(0.2),
                                  lambda: L.RandomColorDegeneration(0.2), lambda: L.RandAugment(),
                                  lambda: L.AugMix(), lambda: L.RandomColorJitter(hue_factor=0.1)])
def test_colour_layers_need_rgb_images(make):
    with pytest.raises(ValueError, match="3 channels"):
        make()(_images(2, c=2))


@pytest.mark.parametrize("make", [lambda: L.RandomHue(0.2), lambda: L.RandomSaturation(0.2),
                                  lambda: L.RandomGrayscale(), lambda: L.RandomColorDegeneration(0.2),
                                  lambda: L.RandAugment(), lambda: L.AugMix(),
                                  lambda: L.RandomColorJitter(saturation_factor=0.1)])
def test_models_refuse_inputs_of_the_wrong_channel_count_when_built(make):
    with pytest.raises(ValueError, match="3 channels"):
        make()(pg.Input((6, 6, 2)))
    with pytest.raises(ValueError, match="3 channels"):
        L.RandomHue(0.1, data_format="channels_first")(pg.Input((2, 6, 6)))
    assert make()(pg.Input((6, 6, 3))).shape[1:] == (6, 6, 3)
    # brightness and contrast alone take any channel count
    assert L.RandomColorJitter(brightness_factor=0.1)(pg.Input((6, 6, 2))).shape[1:] == (6, 6, 2)
    assert L.RandomColorJitter(brightness_factor=0.1)(_images(2, c=2)).shape == (2, 6, 7, 2)


# --- parity with Pillow's ImageOps on uint8 images -----------------------------------------------------------------

def _pil_rgb(seed=0):
    return (np.random.default_rng(seed).random((9, 11, 3)) * 256).astype(np.uint8)


def test_posterize_solarize_and_auto_contrast_match_pillow():
    Image = pytest.importorskip("PIL.Image")
    ImageOps = pytest.importorskip("PIL.ImageOps")
    img = _pil_rgb()
    for bits in (1, 3, 6):
        ref = np.asarray(ImageOps.posterize(Image.fromarray(img), bits), np.float32)
        np.testing.assert_array_equal(L.RandomPosterization((bits, bits))(img[None])[0], ref)
    for threshold in (0, 100, 200):
        ref = np.asarray(ImageOps.solarize(Image.fromarray(img), threshold), np.float32)
        out = L.Solarization(threshold_factor=(threshold / 255, threshold / 255))(img[None])[0]
        np.testing.assert_allclose(out, ref, atol=1e-3)
    low_contrast = (img // 3 + 60).astype(np.uint8)
    ref = np.asarray(ImageOps.autocontrast(Image.fromarray(low_contrast)), np.float32)
    np.testing.assert_allclose(L.AutoContrast()(low_contrast[None])[0], ref, atol=1.0)   # Pillow truncates


def test_library_seed_decides_unseeded_draws_and_a_dataset_map_augments():
    x = _images(8, 6, 6)
    pg.set_seed(3)
    first = L.RandAugment()(x)
    pg.set_seed(3)
    np.testing.assert_array_equal(L.RandAugment()(x), first)
    aug = L.RandomColorJitter(brightness_factor=(0.5, 0.5), value_range=(0, 1))
    ds = pg.data.Dataset.from_tensor_slices((x / 255, np.ones((8, 1), np.float32))).batch(4)
    batches = list(ds.map(lambda a, b: (aug(a), b)))
    np.testing.assert_allclose(np.concatenate([np.asarray(a) for a, _ in batches]), np.clip(x / 255 + 0.5, 0, 1),
                               atol=1e-6)
    model = pg.Sequential([pg.Input((6, 6, 3)), L.Flatten(), L.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(ds.map(lambda a, b: (aug(a), b)), epochs=1, verbose=0)
    model.free()


# --- ContrastLimitedAdaptiveHistogramEqualization -------------------------------------------------------------
def test_clahe_with_one_tile_and_no_clip_is_histogram_equalisation():
    rng = np.random.default_rng(3)
    x = rng.integers(90, 140, (2, 16, 12, 3)).astype(np.float32)
    got = L.ContrastLimitedAdaptiveHistogramEqualization(clip_limit=0, tile_grid_size=(1, 1))(x)
    for b in range(2):
        for ch in range(3):
            v = x[b, :, :, ch].astype(np.int64)
            cdf = np.cumsum(np.bincount(v.reshape(-1), minlength=256)).astype(np.float64)
            table = (cdf - cdf.min()) * 255.0 / (v.size - cdf.min())
            np.testing.assert_allclose(got[b, :, :, ch], table[v], rtol=1e-5, atol=1e-4)


def test_clahe_tiles_value_ranges_layouts_and_config():
    rng = np.random.default_rng(4)
    x = (rng.random((2, 37, 45, 3)) * 60 + 100).astype(np.float32)
    layer = L.ContrastLimitedAdaptiveHistogramEqualization(clip_limit=2.0, tile_grid_size=(3, 5))
    out = layer(x)
    assert out.shape == x.shape and out.min() >= 0 and out.max() <= 255
    assert out.max() - out.min() > 2 * (x.max() - x.min())             # the low contrast stretched
    unit = L.ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 1), clip_limit=2.0, tile_grid_size=(3, 5))
    np.testing.assert_allclose(unit(x / 255.0), out / 255.0, atol=1e-5)
    np.testing.assert_allclose(layer(x[0]), out[0], atol=1e-4)          # one image, unbatched
    cf = L.ContrastLimitedAdaptiveHistogramEqualization(clip_limit=2.0, tile_grid_size=(3, 5),
                                                        data_format="channels_first")
    np.testing.assert_allclose(cf(x.transpose(0, 3, 1, 2)), out.transpose(0, 3, 1, 2), atol=1e-4)
    np.testing.assert_allclose(layer(x, training=False), out)           # not random: inference too
    back = L.ContrastLimitedAdaptiveHistogramEqualization.from_config(layer.get_config())
    np.testing.assert_allclose(back(x), out)
    with pytest.raises(ValueError, match="tile_grid_size"):
        L.ContrastLimitedAdaptiveHistogramEqualization(tile_grid_size=(8,))
