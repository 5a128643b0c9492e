"""Keras's audio preprocessing layers: MelSpectrogram (a HostLayer, numpy on
the host) and STFTSpectrogram (a graph layer: framing by im2col and the
Fourier kernels as weights).

References: ``torch.stft`` for the transform, a per-element loop for the mel
filter bank (the HTK formula written out), ``np.fft.rfft`` on frames cut by
hand for STFTSpectrogram, and the harness (forward, gradients by central
differences, configs, saving, training) for STFTSpectrogram in every mode."""

import json
import math

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, harness_tests
from pyggml.layers.preprocessing import _audio
from pyggml.layers.preprocessing.stft_spectrogram import _atan2, stft_kernels

L = pg.layers


def _signals(n=2, samples=1000, seed=0):
    return np.random.default_rng(seed).standard_normal((n, samples)).astype(np.float32)


# --- MelSpectrogram -------------------------------------------------------------------------------------------------

def test_the_framed_transform_against_torch_stft():
    torch = pytest.importorskip("torch")
    x = _signals(3, 900).astype(np.float64)
    for length, stride, fft, window in [(512, 128, 512, "hann"), (300, 100, 512, "hamming"), (256, 64, 256, None)]:
        ours = _audio.stft(x, length, stride, fft, window)
        win = {"hann": torch.hann_window, "hamming": torch.hamming_window}[window](length, dtype=torch.float64) \
            if window else torch.ones(length, dtype=torch.float64)
        ref = torch.stft(torch.tensor(x), n_fft=fft, hop_length=stride, win_length=length, window=win, center=True,
                         pad_mode="reflect", return_complex=True).numpy()
        np.testing.assert_allclose(ours, np.swapaxes(ref, -1, -2), atol=1e-9)


def test_windows_are_scipys():
    signal = pytest.importorskip("scipy.signal")
    for name in ("hann", "hamming"):
        for periodic in (True, False):
            np.testing.assert_allclose(_audio.window_values(name, 11, periodic, "t"),
                                       signal.get_window(name, 11, fftbins=periodic), atol=1e-12)


def _mel_reference(num_mel, num_bins, rate, low, high):
    """The HTK filter bank, one entry at a time."""
    mel = lambda f: 1127.0 * math.log(1.0 + f / 700.0)          # noqa: E731
    edges = [mel(low) + (mel(high) - mel(low)) * i / (num_mel + 1) for i in range(num_mel + 2)]
    w = np.zeros((num_bins, num_mel))
    for k in range(1, num_bins):
        m = mel(k * (rate / 2) / (num_bins - 1))
        for j in range(num_mel):
            lo, c, hi = edges[j], edges[j + 1], edges[j + 2]
            w[k, j] = max(0.0, min((m - lo) / (c - lo), (hi - m) / (hi - c)))
    return w


def test_mel_filter_bank_against_the_formula():
    np.testing.assert_allclose(_audio.mel_weight_matrix(10, 129, 8000, 125.0, 3800.0),
                               _mel_reference(10, 129, 8000, 125.0, 3800.0), atol=1e-12)
    w = _audio.mel_weight_matrix(40, 513, 16000, 20.0, 8000.0)
    assert w.shape == (513, 40) and (w[0] == 0).all() and w.max() <= 1.0
    assert (w.max(axis=0) > 0.5).all()                                # every filter sees some bin


def _mel_layer_reference(x, fft, stride, length, window, rate, mels, low, high, mag_exp, to_db, top_db, min_power,
                         ref_power):
    torch = pytest.importorskip("torch")
    win = torch.hann_window(length, dtype=torch.float64) if window == "hann" else \
        torch.ones(length, dtype=torch.float64)
    spec = torch.stft(torch.tensor(x, dtype=torch.float64), n_fft=fft, hop_length=stride, win_length=length,
                      window=win, center=True, pad_mode="reflect", return_complex=True).abs().numpy() ** mag_exp
    out = np.einsum("...ft,fm->...mt", spec, _mel_reference(mels, fft // 2 + 1, rate, low, high))
    if to_db:
        out = 10 * np.log10(np.maximum(out, min_power)) - 10 * np.log10(max(abs(ref_power), min_power))
        if top_db is not None:
            out = np.maximum(out, out.max() - top_db)
    return out


@pytest.mark.parametrize("kw", [
    dict(),
    dict(fft_length=256, sequence_stride=100, sequence_length=200, num_mel_bins=20, sampling_rate=8000),
    dict(fft_length=128, sequence_stride=32, num_mel_bins=16, min_freq=100.0, max_freq=3000.0, sampling_rate=8000,
         power_to_db=False, mag_exp=1.0),
    dict(fft_length=256, sequence_stride=64, window=None, num_mel_bins=24, top_db=20.0, ref_power=3.0,
         min_power=1e-6),
])
def test_mel_spectrogram_against_torch_and_the_formula(kw):
    x = _signals(2, 3000)
    layer = L.MelSpectrogram(**kw)
    cfg = layer.get_config()
    ref = _mel_layer_reference(x.astype(np.float64), cfg["fft_length"], cfg["sequence_stride"],
                               cfg["sequence_length"], cfg["window"], cfg["sampling_rate"], cfg["num_mel_bins"],
                               cfg["min_freq"], cfg["max_freq"], cfg["mag_exp"], cfg["power_to_db"], cfg["top_db"],
                               cfg["min_power"], cfg["ref_power"])
    out = layer(x)
    assert out.dtype == np.float32 and out.shape == ref.shape
    assert out.shape == (2, cfg["num_mel_bins"], 1 + 3000 // cfg["sequence_stride"])
    if cfg["power_to_db"]:
        np.testing.assert_allclose(out, ref, atol=2e-3)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3 * np.abs(ref).max())
    np.testing.assert_allclose(layer(x[0]), _mel_layer_reference(
        x[:1].astype(np.float64), cfg["fft_length"], cfg["sequence_stride"], cfg["sequence_length"], cfg["window"],
        cfg["sampling_rate"], cfg["num_mel_bins"], cfg["min_freq"], cfg["max_freq"], cfg["mag_exp"],
        cfg["power_to_db"], cfg["top_db"], cfg["min_power"], cfg["ref_power"])[0], atol=2e-3, rtol=1e-4)


def test_mel_spectrogram_keras_shapes_and_a_pure_tone():
    assert L.MelSpectrogram(num_mel_bins=64, sampling_rate=8000, sequence_stride=256,
                            fft_length=2048)(np.random.rand(16000)).shape == (64, 63)
    layer = L.MelSpectrogram(fft_length=512, sequence_stride=256, num_mel_bins=40, sampling_rate=16000,
                             power_to_db=False)
    t = np.arange(16000) / 16000
    out = layer(np.sin(2 * np.pi * 1000 * t))
    peak = np.argmax(out[:, 10])
    centres = np.linspace(_audio.hertz_to_mel(20.0), _audio.hertz_to_mel(8000.0), 42)[1:-1]
    assert abs(centres[peak] - _audio.hertz_to_mel(1000.0)) < (centres[1] - centres[0]) * 1.01
    assert layer.compute_output_shape((None, 16000)) == (None, 40, 63)


def test_mel_spectrogram_in_a_model_trains_saves_and_loads(tmp_path):
    inp = pg.Input((800,))
    mel = L.MelSpectrogram(fft_length=128, sequence_stride=64, num_mel_bins=8, sampling_rate=8000)
    x = L.Dense(1)(L.Flatten()(L.Rescaling(1 / 80)(mel(inp))))
    model = pg.Model(inp, x)
    assert mel(inp).shape == (None, 8, 13)
    model.compile(optimizer="adam", loss="mse")
    a, y = _signals(8, 800), np.random.default_rng(1).random((8, 1)).astype(np.float32)
    hist = model.fit(a, y, epochs=2, batch_size=4, verbose=0)
    assert np.all(np.isfinite(hist.history["loss"]))
    p = model.predict(a, batch_size=8)
    w = model.get_weights()
    feats = (mel(a) / 80).reshape(8, -1)
    np.testing.assert_allclose(p, feats @ w["dense.weight"].T + w["dense.bias"], rtol=1e-4, atol=1e-4)
    for name in ("mel.gguf", "mel.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_allclose(loaded.predict(a, batch_size=8), p, rtol=1e-6, atol=1e-6)
        loaded.free()
    model.free()


def test_mel_spectrogram_config_round_trip_and_keras_defaults():
    cfg = L.MelSpectrogram().get_config()
    assert (cfg["fft_length"], cfg["sequence_stride"], cfg["sequence_length"], cfg["window"], cfg["sampling_rate"],
            cfg["num_mel_bins"], cfg["min_freq"], cfg["max_freq"], cfg["power_to_db"], cfg["top_db"],
            cfg["mag_exp"], cfg["min_power"], cfg["ref_power"]) == \
        (2048, 512, 2048, "hann", 16000, 128, 20.0, 8000, True, 80.0, 2.0, 1e-10, 1.0)
    layer = L.MelSpectrogram(fft_length=64, sequence_stride=16, window=list(np.hanning(48)), sequence_length=48,
                             num_mel_bins=10, sampling_rate=4000, top_db=None)
    cfg = json.loads(json.dumps(layer.get_config()))
    again = L.MelSpectrogram.from_config(cfg)
    assert json.loads(json.dumps(again.get_config())) == cfg
    x = _signals(2, 300)
    np.testing.assert_array_equal(again(x), layer(x))


@pytest.mark.parametrize("make, match", [
    (lambda: L.MelSpectrogram(fft_length=0), "fft_length"),
    (lambda: L.MelSpectrogram(fft_length=256, sequence_length=512), "sequence_length"),
    (lambda: L.MelSpectrogram(sequence_stride=2.5), "sequence_stride"),
    (lambda: L.MelSpectrogram(window="blackman"), "window"),
    (lambda: L.MelSpectrogram(window=[1.0, 2.0]), "window"),
    (lambda: L.MelSpectrogram(sampling_rate=-1), "sampling_rate"),
    (lambda: L.MelSpectrogram(num_mel_bins=0), "num_mel_bins"),
    (lambda: L.MelSpectrogram(min_freq=5000.0, max_freq=4000.0), "min_freq"),
    (lambda: L.MelSpectrogram(max_freq=9000.0), "max_freq"),
    (lambda: L.MelSpectrogram(top_db=-1.0), "top_db"),
    (lambda: L.MelSpectrogram(mag_exp=0.0), "mag_exp"),
    (lambda: L.MelSpectrogram(min_power=0.0), "min_power"),
    (lambda: L.MelSpectrogram(power_to_db="yes"), "power_to_db"),
])
def test_mel_spectrogram_bad_arguments(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_mel_spectrogram_bad_inputs():
    layer = L.MelSpectrogram(fft_length=64, sequence_stride=16)
    with pytest.raises(ValueError, match="batch, samples"):
        layer(np.zeros((2, 3, 100)))
    with pytest.raises(TypeError, match="numbers"):
        layer(np.array(["a", "b"]))
    with pytest.raises(ValueError, match="too short"):
        layer(np.zeros((2, 20)))
    with pytest.raises(ValueError, match="batch, samples"):
        layer(pg.Input((10, 2)))


# --- STFTSpectrogram ------------------------------------------------------------------------------------------------

def test_stft_kernels_are_the_windowed_fourier_basis():
    real, imag = stft_kernels(6, 8, "hann", False, "density")
    w = np.hanning(6)
    t, f = np.arange(6)[:, None], np.arange(5)[None, :]
    np.testing.assert_allclose(real[:, 0], np.cos(-2 * np.pi * t * f / 8) * w[:, None] / np.sqrt((w ** 2).sum()))
    np.testing.assert_allclose(imag[:, 0], np.sin(-2 * np.pi * t * f / 8) * w[:, None] / np.sqrt((w ** 2).sum()))
    real, _ = stft_kernels(6, 8, "hamming", True, "spectrum")
    wp = 0.54 - 0.46 * np.cos(2 * np.pi * np.arange(6) / 6)
    np.testing.assert_allclose(real[:, 0, 0], wp / wp.sum())
    real, _ = stft_kernels(4, 4, None, False, "density")
    np.testing.assert_allclose(real[:, 0, 0], 1.0)                   # no window: no scaling


def test_the_polynomial_atan2_over_every_quadrant_and_the_axes():
    t = np.linspace(-np.pi + 1e-6, np.pi, 4001)
    r = np.random.default_rng(0).uniform(1e-3, 1e3, size=t.shape)
    y, x = (r * np.sin(t)).astype(np.float32), (r * np.cos(t)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(_atan2(y, x)), np.arctan2(y, x), atol=1e-6)
    axes = np.asarray(_atan2(np.array([0, 1, 0, -1, 0], np.float32), np.array([1, 0, -1, 0, 0], np.float32)))
    np.testing.assert_allclose(axes, [0, np.pi / 2, np.pi, -np.pi / 2, 0], atol=1e-6)


def _stft_reference(mode, frame_length, frame_step, fft_length, padding, expand_dims, data_format):
    """A float64 numpy STFTSpectrogram over the weights given (the harness's w)."""
    def ref(hs, w, training):
        x = hs[0]
        if data_format == "channels_last":
            x = x.transpose(0, 2, 1)                                  # (b, c, t)
        b, c, t = x.shape
        if padding == "same":
            out = -(-t // frame_step)
            total = max((out - 1) * frame_step + frame_length - t, 0)
            x = np.pad(x, ((0, 0), (0, 0), (total // 2, total - total // 2)))
        n = (x.shape[2] - frame_length) // frame_step + 1
        frames = np.stack([x[:, :, i * frame_step:i * frame_step + frame_length] for i in range(n)], axis=2)
        re = frames @ w["real_kernel"][:, 0, :] if "real_kernel" in w else None
        im = frames @ w["imag_kernel"][:, 0, :] if "imag_kernel" in w else None
        if mode == "real":
            y = re
        elif mode == "imag":
            y = im
        elif mode == "angle":
            y = np.arctan2(im, re)
        elif mode == "stft":
            y = np.concatenate([re, im], axis=-1)
        else:
            power = re ** 2 + im ** 2
            if mode == "psd":
                y = power.copy()
                y[..., 1:-1] *= 2
            else:
                y = np.sqrt(np.maximum(power, 1e-7))
                if mode == "log":
                    y = np.log(np.maximum(y, 1e-7))
        k = y.shape[-1]                                                # (b, c, frames, k)
        if data_format == "channels_last":
            return y.transpose(0, 2, 3, 1) if expand_dims else y.transpose(0, 2, 1, 3).reshape(b, n, c * k)
        return y if expand_dims else y.transpose(0, 1, 3, 2).reshape(b, c * k, n)
    return ref


def _stft_case(case_id, shape, lr=None, **kw):
    full = dict(mode="log", frame_length=4, frame_step=2, fft_length=8, padding="valid", expand_dims=False,
                data_format="channels_last")
    full.update(kw)
    fft = full["fft_length"] or 2 ** math.ceil(math.log2(full["frame_length"]))
    step = full["frame_step"] or full["frame_length"] // 2
    ref = _stft_reference(full["mode"], full["frame_length"], step, fft, full["padding"],
                          full["expand_dims"], full["data_format"])
    case = LayerCase(case_id, lambda: L.STFTSpectrogram(**kw), [shape], ref)
    if lr is not None:
        case.lr = lr
    return case


CASES = [
    _stft_case("stft_log", (10, 2), frame_length=4, frame_step=2, fft_length=8),
    _stft_case("stft_magnitude_same", (9, 1), mode="magnitude", frame_length=4, frame_step=3, fft_length=4,
               padding="same", window="hamming", periodic=True),
    _stft_case("stft_psd_spectrum", (8, 2), mode="psd", frame_length=5, frame_step=2, fft_length=8,
               scaling="spectrum", lr=1e-4),                 # the power is quartic in the weights: a small step
    _stft_case("stft_real_no_window", (8, 1), mode="real", frame_length=4, frame_step=2, fft_length=6,
               window=None, scaling=None),
    _stft_case("stft_imag_expand", (8, 2), mode="imag", frame_length=4, frame_step=2, fft_length=8,
               expand_dims=True),
    _stft_case("stft_stft_channels_first", (2, 9), mode="stft", frame_length=4, frame_step=2, fft_length=4,
               data_format="channels_first"),
    _stft_case("stft_angle_channels_first_expand", (1, 8), mode="angle", frame_length=4, frame_step=4,
               fft_length=4, data_format="channels_first", expand_dims=True),
    _stft_case("stft_defaults_step", (12, 1), frame_length=6, frame_step=None, fft_length=None),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_stft_spectrogram_against_numpy_rfft_of_hand_cut_frames():
    x = _signals(2, 64).reshape(2, 64, 1) * np.array([1.0, -0.5], np.float32)[None, None, :]
    layer = L.STFTSpectrogram(mode="stft", frame_length=16, frame_step=8, fft_length=32, window="hann",
                              periodic=True, scaling=None)
    out = layer(x)
    frames = np.stack([x[:, i * 8:i * 8 + 16, :] for i in range(7)], axis=1)     # (2, 7, 16, 2)
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)
    spec = np.fft.rfft(frames * w[None, None, :, None], n=32, axis=2)            # (2, 7, 17, 2)
    assert out.shape == (2, 7, 2 * 34)
    for c in range(2):
        np.testing.assert_allclose(out[:, :, c * 34:c * 34 + 17], spec[..., c].real, atol=1e-4)
        np.testing.assert_allclose(out[:, :, c * 34 + 17:(c + 1) * 34], spec[..., c].imag, atol=1e-4)
    mag = L.STFTSpectrogram(mode="magnitude", frame_length=16, frame_step=8, fft_length=32, periodic=True,
                            scaling=None)(x)
    np.testing.assert_allclose(mag[:, :, :17], np.abs(spec[..., 0]), atol=1e-4)


@pytest.mark.parametrize("periodic", [False, True])
def test_stft_spectrogram_against_torch_stft(periodic):
    torch = pytest.importorskip("torch")
    x = _signals(3, 200)
    win = torch.hann_window(32, periodic=periodic, dtype=torch.float64)
    ref = torch.stft(torch.tensor(x, dtype=torch.float64), n_fft=32, hop_length=12, window=win, center=False,
                     return_complex=True).numpy()                               # (3, 17, frames)
    scale = float(np.sqrt((win.numpy() ** 2).sum()))
    out = L.STFTSpectrogram(mode="stft", frame_length=32, frame_step=12, periodic=periodic,
                            data_format="channels_first")(x[:, None, :])          # density scaling
    np.testing.assert_allclose(out[:, :17], ref.real / scale, atol=1e-5)
    np.testing.assert_allclose(out[:, 17:], ref.imag / scale, atol=1e-5)
    log = L.STFTSpectrogram(frame_length=32, frame_step=12, periodic=periodic)(x[:, :, None])
    # the power is floored at 1e-7 (Keras's epsilon); float32 logs of tiny magnitudes drift, so compare
    # the magnitudes they give back
    magnitude = np.sqrt(np.maximum((np.abs(ref) / scale) ** 2, 1e-7)).transpose(0, 2, 1)
    np.testing.assert_allclose(np.exp(log), magnitude, rtol=1e-4, atol=1e-6)


def test_stft_spectrogram_keras_shapes_and_defaults():
    layer = L.STFTSpectrogram(mode="log", frame_length=256, frame_step=128, fft_length=512, padding="valid",
                              trainable=False)
    assert layer.compute_output_shape((3, 16000, 1)) == (3, 124, 257)
    assert L.STFTSpectrogram(frame_length=256, frame_step=128, fft_length=512, padding="same",
                             expand_dims=True).compute_output_shape((3, 16000, 3)) == (3, 125, 257, 3)
    out = layer(_signals(3, 4000).reshape(3, 4000, 1))
    assert out.shape == (3, 30, 257) and np.isfinite(out).all()
    assert layer.variables and not layer.trainable_variables              # trainable=False: fixed kernels
    cfg = L.STFTSpectrogram().get_config()
    assert (cfg["mode"], cfg["frame_length"], cfg["frame_step"], cfg["fft_length"], cfg["window"], cfg["periodic"],
            cfg["scaling"], cfg["padding"], cfg["expand_dims"], cfg["data_format"]) == \
        ("log", 256, None, None, "hann", False, "density", "valid", False, "channels_last")
    real_only = L.STFTSpectrogram(mode="real", frame_length=4, fft_length=4)
    real_only(np.zeros((1, 8, 1), np.float32))
    assert [v.name for v in real_only.variables] == ["real_kernel"]


def test_stft_spectrogram_feeds_a_conv_model_that_trains_saves_and_loads(tmp_path):
    inp = pg.Input((64, 1))
    spec = L.STFTSpectrogram(frame_length=16, frame_step=8, fft_length=16, expand_dims=True, trainable=False)
    x = L.Conv2D(2, 3, activation="relu")(spec(inp))
    model = pg.Model(inp, L.Dense(1)(L.Flatten()(x)))
    model.compile(optimizer="adam", loss="mse")
    a, y = _signals(8, 64).reshape(8, 64, 1), np.random.default_rng(2).random((8, 1)).astype(np.float32)
    before = model.get_weights()
    model.fit(a, y, epochs=2, batch_size=4, verbose=0)
    after = model.get_weights()
    key = next(k for k in after if k.endswith("real_kernel"))
    np.testing.assert_array_equal(after[key], before[key])              # frozen
    assert not np.array_equal(after["dense.weight"], before["dense.weight"])
    p = model.predict(a)
    for name in ("stft.gguf", "stft.keras"):
        path = str(tmp_path / name)
        model.save(path)
        loaded = pg.load_model(path)
        np.testing.assert_allclose(loaded.predict(a), p, rtol=1e-5, atol=1e-6)
        loaded.free()
    model.free()


@pytest.mark.parametrize("make, match", [
    (lambda: L.STFTSpectrogram(mode="power"), "mode"),
    (lambda: L.STFTSpectrogram(frame_length=0), "frame_length"),
    (lambda: L.STFTSpectrogram(frame_length=8, frame_step=9), "frame_step"),
    (lambda: L.STFTSpectrogram(frame_length=8, fft_length=4), "fft_length"),
    (lambda: L.STFTSpectrogram(window="kaiser"), "window"),
    (lambda: L.STFTSpectrogram(frame_length=4, window=[1.0, 1.0]), "window"),
    (lambda: L.STFTSpectrogram(scaling="l2"), "scaling"),
    (lambda: L.STFTSpectrogram(padding="causal"), "padding"),
    (lambda: L.STFTSpectrogram(expand_dims="yes"), "expand_dims"),
    (lambda: L.STFTSpectrogram(periodic=2), "periodic"),
    (lambda: L.STFTSpectrogram(data_format="NWC"), "data_format"),
])
def test_stft_spectrogram_bad_arguments(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_stft_spectrogram_bad_inputs():
    with pytest.raises(ValueError, match="batch, time, channels"):
        L.STFTSpectrogram(frame_length=4)(pg.Input((10,)))
    with pytest.raises(ValueError, match="shorter than frame_length"):
        L.STFTSpectrogram(frame_length=16)(pg.Input((10, 1)))
    with pytest.raises(ValueError, match="shorter than frame_length"):
        L.STFTSpectrogram(frame_length=16)(np.zeros((2, 10, 1), np.float32))
