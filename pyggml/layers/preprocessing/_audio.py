"""Audio helpers in numpy for MelSpectrogram and STFTSpectrogram: windows,
the framed short-time Fourier transform, and the mel filter bank."""

import numpy as np

from pyggml._windows import WINDOWS, check_window, window_values  # noqa: F401 (this module's names too)

__all__ = ["WINDOWS", "window_values", "check_window", "stft", "hertz_to_mel", "mel_weight_matrix"]

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
