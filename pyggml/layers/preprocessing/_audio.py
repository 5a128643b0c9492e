"""Audio helpers in numpy for MelSpectrogram and STFTSpectrogram: windows,
the framed short-time Fourier transform, and the mel filter bank."""

import numpy as np

__all__ = ["WINDOWS", "window_values", "check_window", "stft", "hertz_to_mel", "mel_weight_matrix"]

WINDOWS = ("hann", "hamming")


def check_window(window, owner):
    """A window name, None, or an array of numbers (returned as a list for the config)."""
    if window is None or (isinstance(window, str) and window in WINDOWS):
        return window
    if isinstance(window, str):
        raise ValueError(f"{owner}: window must be one of {WINDOWS}, None or an array of numbers, got {window!r}")
    try:
        a = np.asarray(window, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: window must be one of {WINDOWS}, None or an array of numbers, "
                        f"got {window!r}") from None
    if a.ndim != 1 or not len(a) or not np.isfinite(a).all():
        raise ValueError(f"{owner}: a window array must be 1-D, finite and not empty, got shape {a.shape}")
    return [float(v) for v in a]


def window_values(window, length, periodic, owner):
    """(length,) float64: the window's values (a periodic one is the symmetric one of length + 1 cut)."""
    if window is None:
        return np.ones(length)
    if not isinstance(window, str):
        a = np.asarray(window, np.float64)
        if len(a) != length:
            raise ValueError(f"{owner}: the window array has {len(a)} values; it must have {length} (the frame "
                             f"length)")
        return a
    n = length + 1 if periodic else length
    if n == 1:
        return np.ones(1)
    t = np.arange(length, dtype=np.float64)
    a0 = 0.5 if window == "hann" else 0.54
    return a0 - (1.0 - a0) * np.cos(2.0 * np.pi * t / (n - 1))


def stft(signals, sequence_length, sequence_stride, fft_length, window, center=True):
    """(..., samples) -> complex (..., frames, fft_length // 2 + 1): Keras's ``ops.stft`` (periodic window of
    ``sequence_length`` centred in each ``fft_length`` frame; ``center``: the signal reflect-padded by
    ``fft_length // 2`` on both sides first)."""
    x = np.asarray(signals, np.float64)
    if center:
        pad = fft_length // 2
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    win = window_values(window, sequence_length, True, "stft")
    left = (fft_length - sequence_length) // 2
    full = np.zeros(fft_length)
    full[left:left + sequence_length] = win
    frames = 1 + (x.shape[-1] - fft_length) // sequence_stride
    idx = np.arange(frames)[:, None] * sequence_stride + np.arange(fft_length)[None, :]
    return np.fft.rfft(x[..., idx] * full, n=fft_length, axis=-1)


def hertz_to_mel(hz):
    """The HTK mel scale (Keras's): 1127 ln(1 + f / 700)."""
    return 1127.0 * np.log1p(np.asarray(hz, np.float64) / 700.0)


def mel_weight_matrix(num_mel_bins, num_spectrogram_bins, sampling_rate, lower_edge_hertz, upper_edge_hertz):
    """(num_spectrogram_bins, num_mel_bins) float64: triangular filters, evenly spaced in mel from
    ``lower_edge_hertz`` to ``upper_edge_hertz`` and peaking at 1, over the spectrogram's bins (0 to the
    Nyquist frequency); the DC bin weighs nothing."""
    freqs = np.linspace(0.0, sampling_rate / 2.0, num_spectrogram_bins)[1:]
    mel = hertz_to_mel(freqs)[:, None]
    edges = np.linspace(hertz_to_mel(lower_edge_hertz), hertz_to_mel(upper_edge_hertz), num_mel_bins + 2)
    low, centre, high = edges[None, :-2], edges[None, 1:-1], edges[None, 2:]
    with np.errstate(divide="ignore", invalid="ignore"):
        rising = (mel - low) / (centre - low)
        falling = (high - mel) / (high - centre)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights = np.nan_to_num(weights, nan=0.0, posinf=0.0, neginf=0.0)
    return np.concatenate([np.zeros((1, num_mel_bins)), weights], axis=0)
