"""IntegerLookup: integer values (category codes, ids) to contiguous indices (or
one-hot, multi-hot, count vectors) through a vocabulary, on the host before
the graph (Keras's layer).  Its vocabulary is in its config, so it is saved in
the model's file; ``"int"`` output is int32, the encodings float32."""

import numpy as np

from pyggml._validation import check_choice, is_int
from pyggml.layers.preprocessing._fingerprint import fingerprint64
from pyggml.layers.preprocessing._siphash import siphash24
from pyggml.layers.preprocessing.hashing import salt_pair
from pyggml.layers.preprocessing.index_lookup import IndexLookup
from pyggml.saving.object_registration import register_builtin

__all__ = ["IntegerLookup"]

_LIMIT = 2 ** 63


@register_builtin
class IntegerLookup(IndexLookup):
    """``IntegerLookup(max_tokens=None, num_oov_indices=1, mask_token=None,
    oov_token=-1, output_mode="int", pad_to_max_tokens=False, sparse=False,
    vocabulary=None, vocabulary_dtype="int64", invert=False, oov_method="floormod", salt=None)``;
    ``adapt(data)``, ``get_vocabulary()``, ``vocabulary_size()``, ``set_vocabulary(vocabulary)``.
    With several OOV indices, an unknown value's bucket is ``value % num_oov_indices``
    (``"floormod"``) or, with ``oov_method="farmhash"``, TensorFlow's hash bucket of its
    decimal text (FarmHash64; SipHash-2-4 keyed by ``salt``), which spreads values that share
    a factor."""

    _token_kind = "integer"

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=-1, output_mode="int",
                 pad_to_max_tokens=False, sparse=False, vocabulary=None, vocabulary_dtype="int64", idf_weights=None,
                 invert=False, oov_method="floormod", salt=None, **kwargs):
        self.vocabulary_dtype = check_choice("vocabulary_dtype", vocabulary_dtype, ("int64", "int32"))
        self.oov_method = check_choice("oov_method", oov_method, ("floormod", "farmhash"))
        if salt is not None and self.oov_method != "farmhash":
            raise ValueError(f"IntegerLookup: salt is only used with oov_method='farmhash', got oov_method="
                             f"{oov_method!r}")
        self.salt = salt_pair(salt, "IntegerLookup")
        super().__init__(max_tokens=max_tokens, num_oov_indices=num_oov_indices, mask_token=mask_token,
                         oov_token=oov_token, vocabulary=vocabulary, idf_weights=idf_weights, invert=invert,
                         output_mode=output_mode, pad_to_max_tokens=pad_to_max_tokens, sparse=sparse, **kwargs)

    def _empty(self):
        return np.array([], dtype=np.int64)

    def _token(self, value, what):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        if not is_int(value):
            raise TypeError(f"IntegerLookup: {what} must be integers, got {value!r}")
        if not -_LIMIT <= int(value) < _LIMIT:
            raise ValueError(f"IntegerLookup: {what} must fit in int64, got {value}")
        return int(value)

    def _as_keys(self, array):
        a = np.asarray(array)
        if a.dtype.kind in "iub":
            if a.dtype.kind == "u" and a.size and a.max() >= _LIMIT:
                raise ValueError("IntegerLookup: values must fit in int64")
            return a.astype(np.int64)
        if a.dtype.kind == "f":
            if a.size and (not np.all(np.isfinite(a)) or np.any(a != np.floor(a)) or
                           np.any(np.abs(a) >= _LIMIT)):
                raise ValueError("IntegerLookup takes integers, got values that are not whole numbers")
            return a.astype(np.int64)
        if a.dtype == object:
            try:
                return np.array([self._token(v, "inputs") for v in a.reshape(-1)], dtype=np.int64).reshape(a.shape)
            except TypeError:
                pass
        raise TypeError(f"IntegerLookup takes integers, got an array of dtype {a.dtype} (StringLookup takes "
                        f"strings)")

    def _oov_buckets(self, values):
        if self.oov_method == "floormod":
            return np.mod(values, self.num_oov_indices)        # Keras's floormod
        uniq, inverse = np.unique(values, return_inverse=True)
        hashed = [fingerprint64(str(int(v))) if self.salt is None else
                  siphash24(self.salt[0], self.salt[1], str(int(v))) for v in uniq]
        return (np.array(hashed, dtype=np.uint64) % np.uint64(self.num_oov_indices)).astype(np.int64)[
            inverse.reshape(-1)]

    def _to_python(self, token):
        return int(token)

    def _read_vocabulary_file(self, path):
        with open(path) as f:
            lines = [ln for ln in f.read().splitlines()]
        while lines and lines[-1] == "":
            lines.pop()
        try:
            return [int(ln) for ln in lines]
        except ValueError:
            raise ValueError(f"IntegerLookup: the vocabulary file {path!r} must hold one integer per line") from None

    @property
    def output_dtype(self):
        if self.invert and not self._fits_int32():
            return "int64"
        return super().output_dtype

    def _fits_int32(self):
        values = [int(self._tokens.min()), int(self._tokens.max())] if len(self._tokens) else []
        values += [v for v in (self.mask_token, self.oov_token) if v is not None]
        return all(-2 ** 31 <= v < 2 ** 31 for v in values)

    def _inverted_array(self, objects):
        """int32 values, or int64 when the vocabulary needs them (output_dtype says which)."""
        dtype = np.int32 if self._fits_int32() else np.int64
        return np.array([int(v) for v in objects], dtype=dtype) if objects.size else np.zeros(0, dtype)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(vocabulary_dtype=self.vocabulary_dtype, oov_method=self.oov_method, salt=self.salt)
        return cfg
