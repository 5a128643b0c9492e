"""MelSpectrogram (Keras's layer): raw audio to mel spectrograms, on the host.

Audio ``(batch, samples)`` (or one signal ``(samples,)``) gives
``(batch, num_mel_bins, frames)``: the short-time Fourier transform (frames of
``fft_length`` every ``sequence_stride`` samples, the signal reflect-padded by
``fft_length // 2`` at both ends, a periodic ``window`` of ``sequence_length``
centred in each frame), its magnitude to the power ``mag_exp``, the HTK mel
filter bank from ``min_freq`` to ``max_freq``, and with ``power_to_db``
``10 log10(max(S, min_power) / max(|ref_power|, min_power))`` floored at its
maximum minus ``top_db`` (the maximum over the whole batch, as Keras; ``top_db=None``:
no floor).  ``frames = 1 + samples // sequence_stride`` (for an even ``fft_length``).
"""

import numpy as np

from pyggml._validation import check_bool, check_number, check_positive_int, is_number
from pyggml.layers.preprocessing import _audio
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["MelSpectrogram"]

_MAX_VALUES = 1 << 31


@register_builtin
class MelSpectrogram(HostLayer):
    """``MelSpectrogram(fft_length=2048, sequence_stride=512, sequence_length=None, window="hann",
    sampling_rate=16000, num_mel_bins=128, min_freq=20.0, max_freq=None, power_to_db=True, top_db=80.0,
    mag_exp=2.0, min_power=1e-10, ref_power=1.0)``."""

    def __init__(self, fft_length=2048, sequence_stride=512, sequence_length=None, window="hann",
                 sampling_rate=16000, num_mel_bins=128, min_freq=20.0, max_freq=None, power_to_db=True,
                 top_db=80.0, mag_exp=2.0, min_power=1e-10, ref_power=1.0, **kwargs):
        super().__init__(**kwargs)
        owner = "MelSpectrogram"
        self.fft_length = check_positive_int(f"{owner}: fft_length", fft_length, 1 << 20)
        self.sequence_stride = check_positive_int(f"{owner}: sequence_stride", sequence_stride, 1 << 24)
        self.sequence_length = self.fft_length if sequence_length is None else \
            check_positive_int(f"{owner}: sequence_length", sequence_length, 1 << 20)
        if self.sequence_length > self.fft_length:
            raise ValueError(f"{owner}: fft_length must be at least sequence_length, got fft_length="
                             f"{self.fft_length} and sequence_length={self.sequence_length}")
        self.window = _audio.check_window(window, owner)
        if isinstance(self.window, list) and len(self.window) != self.sequence_length:
            raise ValueError(f"{owner}: the window array has {len(self.window)} values; it must have "
                             f"sequence_length={self.sequence_length}")
        if not is_number(sampling_rate) or not np.isfinite(float(sampling_rate)) or sampling_rate <= 0:
            raise ValueError(f"{owner}: sampling_rate must be a positive number, got {sampling_rate!r}")
        self.sampling_rate = sampling_rate
        self.num_mel_bins = check_positive_int(f"{owner}: num_mel_bins", num_mel_bins, 1 << 16)
        nyquist = sampling_rate / 2.0
        self.min_freq = check_number(f"{owner}: min_freq", min_freq, 0.0)
        self.max_freq = int(sampling_rate / 2) if max_freq is None else \
            check_number(f"{owner}: max_freq", max_freq, 0.0)
        if not self.min_freq < self.max_freq or self.max_freq > nyquist:
            raise ValueError(f"{owner}: min_freq ({self.min_freq}) must be below max_freq ({self.max_freq}), which "
                             f"must be at most half the sampling_rate ({nyquist})")
        self.power_to_db = check_bool(f"{owner}: power_to_db", power_to_db)
        self.top_db = None if top_db is None else check_number(f"{owner}: top_db", top_db, 0.0)
        self.mag_exp = check_number(f"{owner}: mag_exp", mag_exp, 0.0, low_open=True)
        self.min_power = check_number(f"{owner}: min_power", min_power, 0.0, low_open=True)
        self.ref_power = check_number(f"{owner}: ref_power", ref_power)
        self._weights = None

    def frames(self, samples):
        """How many spectrogram columns a signal of this many samples gives."""
        return 1 + (samples + 2 * (self.fft_length // 2) - self.fft_length) // self.sequence_stride

    def mel_matrix(self):
        """(fft_length // 2 + 1, num_mel_bins): the filter bank."""
        if self._weights is None:
            self._weights = _audio.mel_weight_matrix(self.num_mel_bins, self.fft_length // 2 + 1, self.sampling_rate,
                                                     self.min_freq, self.max_freq)
        return self._weights

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        if len(shape) != 2:
            raise ValueError(f"MelSpectrogram takes audio of shape (batch, samples), got {shape}")
        n = shape[1]
        return (shape[0], self.num_mel_bins, None if n is None else self.frames(n))

    def host_call(self, inputs):
        a = np.asarray(inputs)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"MelSpectrogram takes audio samples (numbers), got an array of dtype {a.dtype}")
        if a.ndim not in (1, 2):
            raise ValueError(f"MelSpectrogram takes audio of shape (batch, samples) or one signal (samples,), got "
                             f"an array of shape {a.shape}")
        samples = a.shape[-1]
        if samples < 2 or self.fft_length // 2 >= samples:
            raise ValueError(f"MelSpectrogram: signals of {samples} samples are too short for fft_length="
                             f"{self.fft_length} (reflect padding needs more than fft_length // 2 samples)")
        rows = 1 if a.ndim == 1 else a.shape[0]
        if rows * self.frames(samples) * self.fft_length > _MAX_VALUES:
            raise ValueError(f"MelSpectrogram: audio of shape {a.shape} is too large to process at once (more than "
                             f"2**31 frame values): give fewer signals a call")
        if rows == 0:
            return np.zeros((0, self.num_mel_bins, self.frames(samples)), np.float32)
        spectrum = np.abs(_audio.stft(a, self.sequence_length, self.sequence_stride, self.fft_length,
                                      self.window)) ** self.mag_exp
        mel = spectrum @ self.mel_matrix()                           # (..., frames, mels)
        if self.power_to_db:
            mel = 10.0 * np.log10(np.maximum(mel, self.min_power))
            mel -= 10.0 * np.log10(max(abs(self.ref_power), self.min_power))
            if self.top_db is not None:
                mel = np.maximum(mel, mel.max() - self.top_db)
        return np.ascontiguousarray(np.swapaxes(mel, -1, -2), dtype=np.float32)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(fft_length=self.fft_length, sequence_stride=self.sequence_stride,
                   sequence_length=self.sequence_length, window=self.window, sampling_rate=self.sampling_rate,
                   num_mel_bins=self.num_mel_bins, min_freq=self.min_freq, max_freq=self.max_freq,
                   power_to_db=self.power_to_db, top_db=self.top_db, mag_exp=self.mag_exp,
                   min_power=self.min_power, ref_power=self.ref_power)
        return cfg
