"""Hashing: strings or integers to hash bins, on the host before the graph
(Keras's layer), with Keras's bins exactly.

As Keras (through TensorFlow's ops): integers are hashed as their decimal
text, floats first truncated to integers, strings as their UTF-8 bytes; the
hash is FarmHash's Fingerprint64 (``salt=None``) or SipHash-2-4 keyed by the
salt's two 64-bit halves, and the bin is the hash modulo the bins.  With a
``mask_value`` (and more than one bin) bin 0 is the mask's and the others take
the hash modulo ``num_bins - 1``, plus one."""

import numpy as np

from pyggml._validation import is_int, is_number
from pyggml.layers.node import Node
from pyggml.layers.preprocessing._encoding import check_output_mode, encode, encoded_shape
from pyggml.layers.preprocessing._fingerprint import fingerprint64
from pyggml.layers.preprocessing._siphash import siphash24
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Hashing"]

_U64 = 1 << 64


def salt_pair(salt, what="Hashing"):
    if salt is None:
        return None
    if is_int(salt):
        pair = [int(salt), int(salt)]
    elif isinstance(salt, (tuple, list)) and len(salt) == 2 and all(is_int(s) for s in salt):
        pair = [int(s) for s in salt]
    else:
        raise ValueError(f"{what}: salt can only be a tuple of size 2 integers, or a single integer, got {salt!r}")
    if not all(0 <= s < _U64 for s in pair):
        raise ValueError(f"{what}: salt values must be unsigned 64-bit integers (0 to 2**64 - 1), got {salt!r}")
    return pair


def _as_bytes(v):
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


@register_builtin
class Hashing(HostLayer):
    """``Hashing(num_bins, mask_value=None, salt=None, output_mode="int", sparse=False)``:
    ``"int"`` gives each value's bin (int32), ``"one_hot"``, ``"multi_hot"`` and
    ``"count"`` float32 vectors of ``num_bins``."""

    def __init__(self, num_bins, mask_value=None, salt=None, output_mode="int", sparse=False, **kwargs):
        kwargs.pop("dtype", None)
        super().__init__(**kwargs)
        if num_bins is None or not is_int(num_bins) or num_bins <= 0:
            raise ValueError(f"Hashing: num_bins cannot be None or a non-positive value; it must be a positive "
                             f"integer, got {num_bins!r}")
        if num_bins >= 1 << 31:
            raise ValueError(f"Hashing: num_bins={num_bins} is too large (the bins are int32)")
        self.num_bins = int(num_bins)
        self.output_mode = check_output_mode(output_mode, "Hashing", ("int", "one_hot", "multi_hot", "count"))
        if sparse:
            raise ValueError("Hashing: sparse=True gives TensorFlow sparse tensors, which pyggml does not have; use "
                             "sparse=False (dense outputs)")
        self.sparse = False
        if mask_value is not None and not isinstance(mask_value, (str, bytes)) and not is_number(mask_value):
            raise ValueError(f"Hashing: mask_value must be None, a string or a number, got {mask_value!r}")
        self.mask_value = mask_value.decode("utf-8") if isinstance(mask_value, bytes) else mask_value
        self.salt = salt_pair(salt)

    @property
    def output_dtype(self):
        return "int32" if self.output_mode == "int" else "float32"

    # --- hashing ----------------------------------------------------------------------------------------
    def _hash(self, key):
        if self.salt is None:
            return fingerprint64(key)
        return siphash24(self.salt[0], self.salt[1], key)

    def _keys(self, a):
        """The bytes TensorFlow hashes for each value, and where the mask is."""
        kind = a.dtype.kind
        masked = None
        if kind in "USO":
            if a.dtype.kind == "O" and not all(isinstance(v, (str, bytes, np.str_, np.bytes_)) for v in a.flat):
                bad = next(v for v in a.flat if not isinstance(v, (str, bytes, np.str_, np.bytes_)))
                raise TypeError(f"Hashing takes strings or integers, got {type(bad).__name__} {bad!r} among strings")
            keys = np.array([_as_bytes(v) for v in a.reshape(-1)], dtype=object)
            if self.mask_value is not None:
                if not isinstance(self.mask_value, str):
                    raise TypeError(f"Hashing: mask_value={self.mask_value!r} is a number but the inputs are "
                                    f"strings")
                masked = keys == self.mask_value.encode("utf-8")
            return keys, masked
        if kind not in "biuf":
            raise TypeError(f"Hashing takes strings or integers, got an array of dtype {a.dtype}")
        if self.mask_value is not None:
            if isinstance(self.mask_value, str):
                raise TypeError(f"Hashing: mask_value={self.mask_value!r} is a string but the inputs are numbers")
            masked = (a == self.mask_value).reshape(-1)
        if kind == "b":
            return np.array([b"true" if v else b"false" for v in a.reshape(-1)], dtype=object), masked
        if kind == "f":
            if not np.all(np.isfinite(a)):
                raise ValueError("Hashing: float inputs must be finite (they are truncated to integers)")
            if a.size and np.max(np.abs(a)) >= 2.0 ** 63:
                raise ValueError("Hashing: float inputs must fit in int64 (they are truncated to integers)")
            a = a.astype(np.int64)
        return np.array([str(v).encode() for v in a.reshape(-1).tolist()], dtype=object), masked

    def _bins(self, inputs):
        """The bin of each value (int64, the input's shape)."""
        a = np.asarray(inputs)
        keys, masked = self._keys(a)
        use_mask = self.mask_value is not None and self.num_bins > 1
        n = self.num_bins - 1 if use_mask else self.num_bins
        if keys.size:
            uniq, inverse = np.unique(keys, return_inverse=True)
            hashed = np.array([self._hash(k) % n for k in uniq.tolist()], dtype=np.int64)
            out = hashed[inverse.reshape(-1)]
        else:
            out = np.zeros(0, dtype=np.int64)
        if use_mask:
            out = np.where(masked, 0, out + 1)
        return out.reshape(a.shape)

    def host_call(self, inputs):
        bins = self._bins(inputs)
        if self.output_mode == "int":
            return bins.astype(np.int32)
        return encode(bins, self.output_mode, self.num_bins)

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], (list, tuple)) and not any(isinstance(v, Node) for v in args[0]):
            return self.host_call(np.asarray(args[0]))          # Keras's eager call on a list
        return super().__call__(*args, **kwargs)

    def compute_output_shape(self, input_shape):
        return encoded_shape(tuple(input_shape), self.output_mode, self.num_bins)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(num_bins=self.num_bins, salt=self.salt, mask_value=self.mask_value, output_mode=self.output_mode,
                   sparse=False)
        return cfg
