"""StringLookup: strings to integer indices (or one-hot, multi-hot, count
vectors) through a vocabulary, on the host before the graph (Keras's layer).

Its vocabulary is in its config, so it is saved in the model's file.  Call
it on ``pg.Input(shape, dtype="string")``; ``"int"`` output is int32 (for an
Embedding), the encodings float32."""

import numpy as np

from pyggml.layers.preprocessing._fingerprint import fingerprint64
from pyggml.layers.preprocessing.index_lookup import IndexLookup
from pyggml.saving.object_registration import register_builtin

__all__ = ["StringLookup"]


def _text(v, encoding):
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode(encoding)
    raise TypeError(f"StringLookup takes strings, got {type(v).__name__} {v!r} (IntegerLookup takes integers)")


@register_builtin
class StringLookup(IndexLookup):
    """``StringLookup(max_tokens=None, num_oov_indices=1, mask_token=None,
    oov_token="[UNK]", vocabulary=None, invert=False, output_mode="int",
    pad_to_max_tokens=False, sparse=False, encoding="utf-8")``; ``adapt(data)``,
    ``get_vocabulary()``, ``vocabulary_size()``, ``set_vocabulary(vocabulary)``."""

    _token_kind = "string"

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token="[UNK]", vocabulary=None,
                 idf_weights=None, invert=False, output_mode="int", pad_to_max_tokens=False, sparse=False,
                 encoding="utf-8", **kwargs):
        if not isinstance(encoding, str):
            raise TypeError(f"StringLookup: encoding must be a str, got {encoding!r}")
        try:
            "".encode(encoding)
        except LookupError:
            raise ValueError(f"StringLookup: unknown encoding {encoding!r}") from None
        self.encoding = encoding
        super().__init__(max_tokens=max_tokens, num_oov_indices=num_oov_indices, mask_token=mask_token,
                         oov_token=oov_token, vocabulary=vocabulary, idf_weights=idf_weights, invert=invert,
                         output_mode=output_mode, pad_to_max_tokens=pad_to_max_tokens, sparse=sparse, **kwargs)

    def _empty(self):
        return np.array([], dtype=np.str_)

    def _token(self, value, what):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if not isinstance(value, (str, bytes, np.str_, np.bytes_)):
            raise TypeError(f"StringLookup: {what} must be strings, got {value!r}")
        return str(_text(value, self.encoding))

    def _as_keys(self, array):
        a = np.asarray(array)
        if a.dtype.kind == "U":
            return a
        if a.dtype.kind == "S":
            return np.char.decode(a, self.encoding) if a.size else a.astype(np.str_)
        if a.dtype == object:
            flat = [_text(v, self.encoding) for v in a.reshape(-1)]
            return np.array(flat, dtype=np.str_).reshape(a.shape) if flat else a.astype(np.str_)
        raise TypeError(f"StringLookup takes strings, got an array of dtype {a.dtype} (IntegerLookup takes "
                        f"integers)")

    def _oov_buckets(self, values):
        uniq, inverse = np.unique(values, return_inverse=True)
        buckets = np.array([fingerprint64(str(v)) % self.num_oov_indices for v in uniq], dtype=np.int64)
        return buckets[inverse.reshape(-1)]

    def _to_python(self, token):
        return str(token)

    def _read_vocabulary_file(self, path):
        with open(path, encoding=self.encoding) as f:
            lines = f.read().splitlines()
        while lines and lines[-1] == "":
            lines.pop()
        return lines

    def _inverted_array(self, objects):
        return np.array([str(v) for v in objects], dtype=np.str_) if objects.size else np.array([], np.str_)

    def get_config(self):
        cfg = super().get_config()
        cfg["encoding"] = self.encoding
        return cfg
