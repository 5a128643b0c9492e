"""Windows and short-time Fourier kernels in numpy, shared by the audio layers
(MelSpectrogram, STFTSpectrogram) and Keras's STFT initializer."""

import math

import numpy as np

__all__ = ["WINDOWS", "check_window", "window_values", "stft_kernels"]

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


def stft_kernels(frame_length, fft_length, window, periodic, scaling, owner="STFTSpectrogram"):
    """(real, imag) float64 arrays of shape (frame_length, 1, fft_length // 2 + 1)."""
    bins = fft_length // 2 + 1
    t = np.arange(frame_length, dtype=np.float64)[:, None, None]
    f = np.arange(bins, dtype=np.float64)[None, None, :]
    phase = -2.0 * np.pi * t * f / fft_length
    real, imag = np.cos(phase), np.sin(phase)
    if window is not None:
        w = window_values(window, frame_length, periodic, owner)[:, None, None]
        s = 1.0
        if scaling == "density":
            s = math.sqrt(float(np.sum(w * w)))
        elif scaling == "spectrum":
            s = float(np.sum(np.abs(w)))
        if s == 0:
            s = 1.0
        real, imag = real * w / s, imag * w / s
    return real, imag
