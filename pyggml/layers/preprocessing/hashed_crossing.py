"""HashedCrossing: crosses of categorical features by the hashing trick, on the
host before the graph (Keras's layer), with Keras's bins exactly.

As TensorFlow's ``sparse.cross_hashed`` (what Keras calls): each feature's value
becomes a 64-bit number (a string its FarmHash Fingerprint64, an integer its
own two's-complement bits); these are folded, in input order, into a running
hash that starts at the key 0xDECAFCAFFE through ``FingerprintCat64``; the bin
is that hash modulo ``num_bins``."""

import numpy as np

from pyggml._validation import is_int
from pyggml.layers.node import Node
from pyggml.layers.preprocessing._encoding import check_output_mode, encode
from pyggml.layers.preprocessing._fingerprint import fingerprint64
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["HashedCrossing"]

_M = (1 << 64) - 1
_KEY = 0xDECAFCAFFE                 # TensorFlow's default hash_key of cross_hashed
_MUL = 0xC6A4A7935BD1E995


def _shift_mix(v):
    return v ^ (v >> 47)


def _fingerprint_cat(fp1, fp2):
    """Two 64-bit fingerprints combined into one (TensorFlow's FingerprintCat64)."""
    r = fp1 ^ _MUL
    r ^= (_shift_mix((fp2 * _MUL) & _M) * _MUL) & _M
    r = (r * _MUL) & _M
    r = (_shift_mix(r) * _MUL) & _M
    return _shift_mix(r)


def _feature_hashes(a, who):
    """Each value's 64-bit number: strings their fingerprint, integers their bits."""
    kind = a.dtype.kind
    if kind in "iu":
        return [int(v) & _M for v in a.reshape(-1).tolist()]
    if kind in "USO":
        out = []
        for v in a.reshape(-1):
            if isinstance(v, (str, np.str_)):
                out.append(fingerprint64(str(v)))
            elif isinstance(v, (bytes, np.bytes_)):
                out.append(fingerprint64(bytes(v)))
            else:
                raise ValueError(f"{who}: all inputs should have an integer or string dtype; got "
                                 f"{type(v).__name__} {v!r} among strings")
        return out
    raise ValueError(f"{who}: all inputs should have an integer or string dtype, got dtype {a.dtype} (give "
                     f"integer features an integer Input dtype, e.g. dtype='int64')")


@register_builtin
class HashedCrossing(HostLayer):
    """``HashedCrossing(num_bins, output_mode="int", sparse=False)``, called on a list
    or tuple of two or more features of equal shape ``()``, ``(batch,)`` or
    ``(batch, 1)``, strings or integers: ``"int"`` gives each row's bin (int32),
    ``"one_hot"`` float32 vectors of ``num_bins``."""

    def __init__(self, num_bins, output_mode="int", sparse=False, **kwargs):
        kwargs.pop("dtype", None)
        super().__init__(**kwargs)
        if not is_int(num_bins) or not 0 < num_bins < 1 << 31:
            raise ValueError(f"HashedCrossing: num_bins must be a positive integer (below 2**31), got {num_bins!r}")
        self.num_bins = int(num_bins)
        self.output_mode = check_output_mode(output_mode, "HashedCrossing", ("int", "one_hot"))
        if sparse:
            raise ValueError("HashedCrossing: sparse=True gives TensorFlow sparse tensors, which pyggml does not "
                             "have; use sparse=False (dense outputs)")
        self.sparse = False

    @property
    def output_dtype(self):
        return "int32" if self.output_mode == "int" else "float32"

    def _check_count(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"HashedCrossing should be called on a list or tuple of inputs, got "
                             f"{type(inputs).__name__}")
        if len(inputs) < 2:
            raise ValueError(f"HashedCrossing should be called on at least two inputs, got {len(inputs)}")

    def host_call(self, inputs):
        self._check_count(inputs)
        arrays = [np.asarray(a) for a in inputs]
        shape = arrays[0].shape
        if len(shape) > 2 or (len(shape) == 2 and shape[-1] != 1):
            raise ValueError(f"HashedCrossing: all inputs should have shape (), (batch_size,) or (batch_size, 1), "
                             f"got {shape}")
        if any(a.shape != shape for a in arrays[1:]):
            raise ValueError(f"HashedCrossing: all inputs should have equal shapes, got "
                             f"{[a.shape for a in arrays]}")
        columns = [_feature_hashes(a, "HashedCrossing") for a in arrays]
        bins = []
        for row in zip(*columns):
            h = _KEY
            for f in row:
                h = _fingerprint_cat(h, f)
            bins.append(h % self.num_bins)
        out = np.array(bins, dtype=np.int64).reshape(shape)
        if self.output_mode == "int":
            return out.astype(np.int32)
        hot = encode(out, "one_hot", self.num_bins)
        return hot[0] if not shape else hot

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], (list, tuple)) and args[0] and all(isinstance(v, Node) for v in args[0]):
            self._check_count(args[0])
            for node in args[0]:
                if node.dtype not in ("string", "int32"):
                    raise ValueError(f"HashedCrossing: all inputs should have an integer or string dtype, got a "
                                     f"{node.dtype} input (give integer features an integer Input dtype, e.g. "
                                     f"dtype='int64')")
            return super().__call__(list(args[0]), **kwargs)
        if args and any(isinstance(v, Node) for v in (args[0] if isinstance(args[0], (list, tuple)) else [args[0]])):
            raise ValueError("HashedCrossing should be called on a list or tuple of two or more inputs")
        if args and len(args) == 1 and not kwargs:
            return self.host_call(args[0])                           # eager, on arrays
        return super().__call__(*args, **kwargs)

    def compute_output_shape(self, input_shape):
        shapes = [tuple(s) for s in input_shape]
        for s in shapes:
            if s[1:] != (1,):
                raise ValueError(f"HashedCrossing: all inputs should have shape (1,) (one value a row), got "
                                 f"{s[1:]}")
        return (None, 1) if self.output_mode == "int" else (None, self.num_bins)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(num_bins=self.num_bins, output_mode=self.output_mode, sparse=False)
        return cfg
