"""Keras's ``audio_dataset_from_directory``: WAV files in class folders as a
``Dataset`` of (audio, labels) batches, read with the standard library's ``wave``.

The folder walk, labels, shuffling and validation split are those of
``text_dataset_from_directory`` (pyggml.utils.directory_utils).  Audio is
float32 in [-1, 1), shaped (samples, channels): 8-bit (unsigned), 16-, 24- and
32-bit integer PCM files are read (``wave`` reads no float or compressed WAV;
such a file raises a ValueError naming it).

- ``sampling_rate``: every file is resampled to this rate (band-limited, through
  the FFT: exact for signals below both Nyquist frequencies); None keeps each
  file's own rate.  Keras needs tensorflow-io for this; pyggml does it in numpy.
- ``output_sequence_length``: clips are cut or zero-padded at the end to this
  many samples; None pads each batch to its longest clip (``ragged=False``).
- ``ragged=True``: each batch's audio is a numpy object array of the clips, each
  (its own length, channels), pyggml's form of Keras's ragged tensor.
"""

import wave

import numpy as np

from pyggml._validation import is_int
from pyggml.utils.dataset_utils import Dataset
from pyggml.utils.directory_utils import _build

__all__ = ["audio_dataset_from_directory", "read_wav", "resample"]

AUDIO_EXTENSIONS = (".wav",)


def read_wav(path):
    """(float32 array (samples, channels) in [-1, 1), sampling rate) of a PCM WAV file."""
    try:
        with wave.open(str(path), "rb") as w:
            channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as e:
        raise ValueError(f"cannot read the WAV file {path}: {e} (integer PCM WAV files only)") from None
    if width not in (1, 2, 3, 4) or channels < 1:
        raise ValueError(f"cannot read the WAV file {path}: {width * 8}-bit samples are not supported")
    usable = len(frames) // (width * channels) * width * channels       # a cut-off last frame is dropped
    raw = np.frombuffer(frames[:usable], dtype=np.uint8)
    if width == 1:
        data = (raw.astype(np.float32) - 128.0) / 128.0
    elif width == 3:
        b = raw.reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        v = np.where(v >= 1 << 23, v - (1 << 24), v)
        data = v.astype(np.float32) / float(1 << 23)
    else:
        dt = np.dtype("<i2") if width == 2 else np.dtype("<i4")
        data = (np.frombuffer(raw.tobytes(), dtype=dt).astype(np.float64) / float(1 << (8 * width - 1)))
        data = data.astype(np.float32)
    return data.reshape(-1, channels), rate


def resample(audio, rate_in, rate_out):
    """Band-limited resampling of (samples, channels) audio from rate_in to rate_out through
    the FFT (the spectrum cut or zero-extended)."""
    if rate_in == rate_out or len(audio) == 0:
        return audio
    n_in = len(audio)
    n_out = max(int(round(n_in * rate_out / rate_in)), 1)
    spec = np.fft.rfft(audio.astype(np.float64), axis=0)
    keep = min(len(spec), n_out // 2 + 1)
    out_spec = np.zeros((n_out // 2 + 1, audio.shape[1]), dtype=np.complex128)
    out_spec[:keep] = spec[:keep]
    if n_out < n_in and n_out % 2 == 0:
        out_spec[n_out // 2] = 2 * out_spec[n_out // 2].real  # +f and -f fold into the new Nyquist bin
    elif n_in < n_out and n_in % 2 == 0:
        out_spec[n_in // 2] *= 0.5                           # the old Nyquist bin, split between +-f
    return (np.fft.irfft(out_spec, n=n_out, axis=0) * (n_out / n_in)).astype(np.float32)


def _batcher(ragged):
    def batch(samples, batch_size):
        n = len(samples)
        count = -(-n // batch_size)

        def get(i):
            parts = [samples[j] for j in range(i * batch_size, min((i + 1) * batch_size, n))]
            labelled = isinstance(parts[0], tuple)
            clips = [np.asarray(p[0] if labelled else p) for p in parts]
            channels = {c.shape[1] for c in clips}
            if len(channels) > 1:
                raise ValueError(f"audio_dataset_from_directory: the files of a batch have different channel "
                                 f"counts {sorted(channels)}; give files of one channel count")
            if ragged:
                audio = np.empty(len(clips), dtype=object)
                for k, c in enumerate(clips):
                    audio[k] = c
            else:
                longest = max(len(c) for c in clips)
                audio = np.zeros((len(clips), longest, clips[0].shape[1]), dtype=np.float32)
                for k, c in enumerate(clips):
                    audio[k, :len(c)] = c
            if not labelled:
                return audio
            return audio, np.stack([np.asarray(p[1]) for p in parts])
        return Dataset(count, get, [samples])
    return batch


def audio_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None, batch_size=32,
                                 sampling_rate=None, output_sequence_length=None, ragged=False, shuffle=True,
                                 seed=None, validation_split=None, subset=None, follow_links=False, verbose=True):
    """The ``.wav`` files under ``directory`` as a dataset of (audio, labels) batches: audio
    float32 (batch, samples, channels), labels as ``text_dataset_from_directory`` gives them.
    See the module's notes for ``sampling_rate``, ``output_sequence_length`` and ``ragged``."""
    if sampling_rate is not None and (not is_int(sampling_rate) or sampling_rate <= 0):
        raise ValueError(f"sampling_rate must be a positive int or None, got {sampling_rate!r}")
    if output_sequence_length is not None and (not is_int(output_sequence_length) or output_sequence_length <= 0):
        raise ValueError(f"output_sequence_length must be a positive int or None, got {output_sequence_length!r}")
    if not isinstance(ragged, bool):
        raise TypeError(f"ragged must be True or False, got {ragged!r}")
    if ragged and output_sequence_length is not None:
        raise ValueError("ragged=True and output_sequence_length cannot both be set: clips of one length "
                         "are not ragged")

    def read(path):
        audio, rate = read_wav(path)
        if sampling_rate is not None:
            audio = resample(audio, rate, int(sampling_rate))
        if output_sequence_length is not None:
            n = int(output_sequence_length)
            audio = audio[:n] if len(audio) >= n else np.concatenate(
                [audio, np.zeros((n - len(audio), audio.shape[1]), dtype=np.float32)])
        return audio
    return _build(directory, AUDIO_EXTENSIONS, "audio", labels, label_mode, class_names, batch_size, shuffle, seed,
                  validation_split, subset, follow_links, verbose, read, batch=_batcher(ragged))
