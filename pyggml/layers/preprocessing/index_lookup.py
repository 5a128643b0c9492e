"""The vocabulary lookup behind StringLookup and IntegerLookup (Keras's IndexLookup),
computed on the host.

Index layout (Keras's): in ``"int"`` mode the mask token (when set) is index 0;
then come ``num_oov_indices`` out-of-vocabulary indices; then the vocabulary.
In the encoding modes the mask token has no index and its occurrences are
dropped.  An unknown token goes to the OOV index (with several, to a bucket:
``value % n`` for integers, FarmHash's fingerprint of the string modulo ``n``
for strings, as Keras); with ``num_oov_indices=0`` it is an error.  ``adapt``
keeps the most frequent tokens (ties: the larger token first) up to
``max_tokens`` indices in all.

``output_mode="tf_idf"`` (Keras's): the counts times each index's IDF weight.
``adapt`` learns them, ``log(1 + documents / (1 + documents holding the
token))`` with each row of the data a document (each value of a 1-D array); a given
vocabulary comes with ``idf_weights``, one per entry (special tokens included
when the vocabulary starts with them; otherwise, as for adapt, the OOV
indices weigh the mean)."""

import os

import numpy as np

from pyggml._tensor_arrays import as_ops_result
from pyggml._validation import check_int
from pyggml.layers.node import Node
from pyggml.layers.preprocessing._adapt import adapt_batches, ragged_rows
from pyggml.layers.preprocessing._encoding import ENCODINGS, check_output_mode, encode, encoded_shape
from pyggml.layers.preprocessing.host_layer import HostLayer

__all__ = ["IndexLookup"]

_MAX_VOCABULARY = 1 << 26


class IndexLookup(HostLayer):
    """Shared by StringLookup and IntegerLookup; subclasses say how tokens are read."""

    _token_kind = None                     # "string" or "integer"

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=None, vocabulary=None,
                 idf_weights=None, invert=False, output_mode="int", pad_to_max_tokens=False, sparse=False,
                 has_input_vocabulary=None, **kwargs):
        kwargs.pop("dtype", None)
        kwargs.pop("vocabulary_size", None)
        super().__init__(**kwargs)
        who = type(self).__name__
        if max_tokens is not None:
            max_tokens = check_int("max_tokens", max_tokens)
            if max_tokens <= 1:
                raise ValueError(f"{who}: max_tokens must be greater than 1 when set, got {max_tokens}")
        if pad_to_max_tokens and max_tokens is None:
            raise ValueError(f"{who}: pad_to_max_tokens=True needs max_tokens")
        self.num_oov_indices = check_int("num_oov_indices", num_oov_indices, 0, 1 << 20)
        self.output_mode = check_output_mode(output_mode, who, ("int",) + ENCODINGS + ("tf_idf",))
        if invert and self.output_mode != "int":
            raise ValueError(f"{who}: invert=True needs output_mode='int', got {self.output_mode!r}")
        if sparse:
            raise ValueError(f"{who}: sparse outputs are not supported (sparse=False)")
        if idf_weights is not None and self.output_mode != "tf_idf":
            raise ValueError(f"{who}: idf_weights are only given with output_mode='tf_idf', got output_mode="
                             f"{self.output_mode!r}")
        if idf_weights is not None and vocabulary is None:
            raise ValueError(f"{who}: idf_weights come with the vocabulary they weigh (vocabulary=...)")
        self._idf = None                   # tf_idf: the IDF weight of each index (special ones first)
        self.max_tokens = max_tokens
        self.pad_to_max_tokens = bool(pad_to_max_tokens)
        self.sparse = False
        self.invert = bool(invert)
        self.mask_token = None if mask_token is None else self._token(mask_token, "mask_token")
        self.oov_token = None if oov_token is None else self._token(oov_token, "oov_token")
        self._tokens = self._empty()
        self._keys = self._empty()         # the tokens sorted, and where each sits in _tokens
        self._order = np.zeros(0, dtype=np.int64)
        self._frozen_size = None           # the encoding depth fixed by a call on model inputs
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = self._read_vocabulary_file(os.fspath(vocabulary))
        self._has_input_vocabulary = bool(vocabulary is not None if has_input_vocabulary is None
                                          else has_input_vocabulary)
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)

    # --- what subclasses define --------------------------------------------------------------
    def _empty(self):
        raise NotImplementedError

    def _token(self, value, what):
        """One token (mask_token, oov_token), checked."""
        raise NotImplementedError

    def _as_keys(self, array):
        """The input as an array of keys (str or int64), checked."""
        raise NotImplementedError

    def _oov_buckets(self, values):
        """Which of the num_oov_indices buckets each unknown value goes to."""
        raise NotImplementedError

    def _to_python(self, token):
        raise NotImplementedError

    def _read_vocabulary_file(self, path):
        raise ValueError(f"{type(self).__name__}: vocabulary must be a list or an array of tokens")

    # --- the index layout ----------------------------------------------------------------------
    def _oov_start(self):
        return 1 if self.mask_token is not None and self.output_mode == "int" else 0

    def _token_start(self):
        return self._oov_start() + self.num_oov_indices

    def vocabulary_size(self):
        """The number of indices: mask (in "int" mode) + OOV + vocabulary."""
        return self._token_start() + len(self._tokens)

    def get_vocabulary(self, include_special_tokens=True):
        """The token of each index (the mask and OOV tokens first, unless excluded)."""
        tokens = [self._to_python(t) for t in self._tokens]
        if not include_special_tokens:
            return tokens
        special = [self.mask_token] * self._oov_start() + [self.oov_token] * self.num_oov_indices
        return special + tokens

    def _depth(self):
        return self.max_tokens if self.pad_to_max_tokens else self.vocabulary_size()

    @property
    def output_dtype(self):
        if self.invert:
            return "string" if self._token_kind == "string" else "int32"
        return "int32" if self.output_mode == "int" else "float32"

    # --- setting the vocabulary ------------------------------------------------------------------
    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Use this vocabulary (a list or array of tokens, optionally starting with the
        mask and OOV tokens in index order)."""
        who = type(self).__name__
        if self.output_mode == "tf_idf" and idf_weights is None:
            raise ValueError(f"{who}: with output_mode='tf_idf' a vocabulary needs its idf_weights")
        if self.output_mode != "tf_idf" and idf_weights is not None:
            raise ValueError(f"{who}: idf_weights are only given with output_mode='tf_idf', got output_mode="
                             f"{self.output_mode!r}")
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = self._read_vocabulary_file(os.fspath(vocabulary))
        items = list(np.asarray(vocabulary, dtype=object).reshape(-1)) if not isinstance(vocabulary, list) \
            else list(vocabulary)
        if not items:
            raise ValueError(f"{who}: cannot set an empty vocabulary")
        if len(items) > _MAX_VOCABULARY:
            raise ValueError(f"{who}: a vocabulary of {len(items)} tokens is too large")
        tokens = [self._token(t, "vocabulary entries") for t in items]
        special = [self.mask_token] * self._oov_start() + [self.oov_token] * self.num_oov_indices
        with_special = bool(special) and tokens[:len(special)] == special
        if with_special:
            tokens = tokens[len(special):]
        idf = None
        if idf_weights is not None:
            idf = np.asarray(idf_weights, dtype=np.float64) if not isinstance(idf_weights, np.ndarray) \
                else idf_weights.astype(np.float64)
            if idf.ndim != 1 or len(idf) != len(items):
                raise ValueError(f"{who}: idf_weights must be a 1-D list of one weight per vocabulary entry "
                                 f"({len(items)}), got shape {idf.shape}")
            if not np.all(np.isfinite(idf)):
                raise ValueError(f"{who}: idf_weights must be finite")
            # without the special tokens the OOV indices weigh the mean (Keras's)
            idf = idf if with_special else np.concatenate([np.full(self._token_start(), idf.mean()), idf])
        seen, repeated = set(), []
        for t in tokens:
            if t in seen and t not in repeated:
                repeated.append(t)
            seen.add(t)
        if repeated:
            raise ValueError(f"{who}: the vocabulary repeats {repeated[:10]}; each token must appear once")
        if self.mask_token is not None and self.mask_token in seen:
            raise ValueError(f"{who}: the mask token {self.mask_token!r} is in the vocabulary; leave it out (or "
                             f"put the special tokens only at the start, in this order: {special})")
        if self.invert and self.oov_token is not None and self.oov_token in seen:
            raise ValueError(f"{who}: the OOV token {self.oov_token!r} is in the vocabulary; leave it out (or "
                             f"put the special tokens only at the start, in this order: {special})")
        size = self._token_start() + len(tokens)
        if self.max_tokens is not None and size > self.max_tokens:
            raise ValueError(f"{who}: the vocabulary needs {size} indices, more than max_tokens={self.max_tokens}")
        self._install(tokens)
        self._idf = idf

    def _install(self, tokens):
        arr = np.array(tokens, dtype=np.str_ if self._token_kind == "string" else np.int64) if tokens \
            else self._empty()
        new_size = self._token_start() + len(arr)
        if self._frozen_size is not None and not self.pad_to_max_tokens and self.output_mode != "int" and \
                new_size != self._frozen_size:
            raise RuntimeError(f"{type(self).__name__}: the layer's output size ({self._frozen_size}) was fixed "
                               f"when it was called on model inputs; a vocabulary of {new_size} indices would "
                               f"change it")
        order = np.argsort(arr, kind="stable")
        self._tokens, self._keys, self._order = arr, arr[order], order.astype(np.int64)

    # --- adapt ------------------------------------------------------------------------------------
    def adapt(self, data, batch_size=None, steps=None):
        """Learn the vocabulary from data (an array or a dataset of batches): the most
        frequent tokens first, ties broken by the larger token; the mask and OOV tokens
        are not counted."""
        who = type(self).__name__
        if self._has_input_vocabulary:
            raise ValueError(f"{who}: cannot adapt a layer given a vocabulary (vocabulary= or set_vocabulary)")
        counts, documents, n_docs = {}, {}, 0
        tf_idf = self.output_mode == "tf_idf"
        for k, batch in enumerate(adapt_batches(data, who, steps)):
            if steps is not None and k >= steps:
                break
            keys = self._as_keys(batch)
            if tf_idf:
                # each row a document (each value of a 1-D array, as Keras's batch of them), counted once
                # per token it holds
                rows = keys.reshape(-1, 1) if keys.ndim <= 1 else keys.reshape(keys.shape[0], -1)
                n_docs += len(rows)
                for row in rows:
                    for t in np.unique(row).tolist():
                        documents[t] = documents.get(t, 0) + 1
            keys = keys.reshape(-1)
            if keys.size == 0:
                continue
            uniq, c = np.unique(keys, return_counts=True)
            for t, n in zip(uniq.tolist(), c.tolist()):
                counts[t] = counts.get(t, 0) + n
        self._install_adapted(counts, documents, n_docs)

    def _install_adapted(self, counts, documents, n_docs):
        """The vocabulary from adapt's counts ({token: occurrences}; tf_idf: {token: documents
        holding it} of n_docs documents): the most frequent first, ties the larger token first,
        the mask and OOV tokens left out, up to max_tokens indices."""
        tf_idf = self.output_mode == "tf_idf"
        for special in (self.mask_token, self.oov_token):
            if special is not None:
                counts.pop(special, None)
        tokens = sorted(counts, key=lambda t: (counts[t], t), reverse=True)
        if self.max_tokens is not None:
            tokens = tokens[:max(self.max_tokens - self._token_start(), 0)]
        self._install(tokens)
        if tf_idf:
            idf = np.log1p(n_docs / (1.0 + np.array([documents.get(t, 0) for t in tokens], dtype=np.float64)))
            self._idf = np.concatenate([np.full(self._token_start(), idf.mean() if len(idf) else 0.0), idf])

    # --- the lookup -------------------------------------------------------------------------------
    def _positions(self, keys):
        """Each key's index in the vocabulary, or -1."""
        flat = keys.reshape(-1)
        if not len(self._keys) or not flat.size:
            return np.full(flat.shape, -1, dtype=np.int64)
        pos = np.searchsorted(self._keys, flat)
        pos = np.minimum(pos, len(self._keys) - 1)
        found = self._keys[pos] == flat
        return np.where(found, self._order[pos], -1)

    def _lookup(self, keys):
        who = type(self).__name__
        flat = keys.reshape(-1)
        idx = self._positions(flat)
        out = np.where(idx >= 0, idx + self._token_start(), -1)
        masked = np.zeros(flat.shape, dtype=bool)
        if self.mask_token is not None:
            masked = flat == self.mask_token
            out[masked] = 0 if self.output_mode == "int" else -2
        oov = (idx < 0) & ~masked
        if oov.any():
            if self.num_oov_indices == 0:
                bad = np.unique(flat[oov])[:10].tolist()
                raise ValueError(f"{who}: with num_oov_indices=0 every input must be in the vocabulary; found "
                                 f"out-of-vocabulary values {bad} (set num_oov_indices=1 to map them to an OOV "
                                 f"index)")
            if self.num_oov_indices == 1:
                out[oov] = self._oov_start()
            else:
                out[oov] = self._oov_buckets(flat[oov]) + self._oov_start()
        return out.reshape(keys.shape)

    def _invert_lookup(self, indices):
        a = np.asarray(indices)
        if a.dtype == object or a.dtype.kind not in "biuf" or (
                a.dtype.kind == "f" and (not np.all(np.isfinite(a)) or np.any(a != np.floor(a)))):
            raise TypeError(f"{type(self).__name__}(invert=True) takes integer indices, got dtype {a.dtype}")
        a = a.astype(np.int64)
        flat = a.reshape(-1)
        start, n = self._token_start(), len(self._tokens)
        inside = (flat >= start) & (flat < start + n)
        fill = self.oov_token
        out = np.empty(flat.shape, dtype=object)
        out[:] = [fill] * flat.size if flat.size else []
        if inside.any():
            out[inside] = self._tokens[flat[inside] - start]
        if self.mask_token is not None:
            out[flat == 0] = self.mask_token
        return self._inverted_array(out).reshape(a.shape)

    def _inverted_array(self, objects):
        return objects

    def host_call(self, inputs):
        rows = ragged_rows(inputs)
        if rows is not None and not self.invert:
            return self._ragged_call(rows)
        if self.invert:
            return self._invert_lookup(inputs)
        keys = self._as_keys(inputs)
        idx = self._lookup(keys)
        if self.output_mode == "int":
            return idx.astype(np.int32)
        if not self.pad_to_max_tokens and not len(self._tokens):
            raise RuntimeError(f"{type(self).__name__}: set the vocabulary (vocabulary= or adapt) before "
                               f"encoding with output_mode={self.output_mode!r}")
        depth = self._depth()
        if np.any(idx >= depth):
            raise ValueError(f"{type(self).__name__}: an index exceeds max_tokens={self.max_tokens}")
        out = encode(idx, self.output_mode, depth)
        if self.output_mode == "tf_idf":
            weights = np.zeros(depth, dtype=np.float64)            # padding indices weigh 0
            weights[:len(self._idf)] = self._idf
            out = (out * weights).astype(np.float32)
        return out

    def _ragged_call(self, rows):
        """A ragged batch (terms of different numbers a row, keras-io's multi-label abstracts):
        one encoded row each, as Keras's lookup on a RaggedTensor gives."""
        if self.output_mode not in ("multi_hot", "count", "tf_idf"):
            raise ValueError(f"{type(self).__name__}: rows of different lengths give one row each with "
                             f"output_mode 'multi_hot', 'count' or 'tf_idf'; for {self.output_mode!r} pad "
                             f"them to one length first (keras.utils.pad_sequences)")
        out = [self.host_call(r[None, :])[0] if len(r) else None for r in rows]
        width = next((o.shape[-1] for o in out if o is not None), self._depth())
        return np.stack([np.zeros(width, np.float32) if o is None else o for o in out]).astype(np.float32)

    @property
    def idf_weights(self):
        """tf_idf: the IDF weight of each index (special ones first), or None."""
        return None if self._idf is None else self._idf.astype(np.float32)

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], Node):
            self._check_node(args[0])
            return super().__call__(*args, **kwargs)
        if args and isinstance(args[0], (list, tuple)) and not any(isinstance(v, Node) for v in args[0]):
            if ragged_rows(args[0]) is not None:
                return as_ops_result(self.host_call(args[0]))
            return as_ops_result(self.host_call(np.asarray(args[0])))      # Keras's eager call on a list
        return super().__call__(*args, **kwargs)

    def _check_node(self, node):
        want_strings = self._token_kind == "string" and not self.invert
        if want_strings and node.dtype != "string":
            raise TypeError(f"{type(self).__name__} takes strings: give its Input dtype='string' "
                            f"(got a {node.dtype} input)")
        if not want_strings and node.dtype == "string":
            raise TypeError(f"{type(self).__name__}{'(invert=True)' if self.invert else ''} takes integers, got a "
                            f"string input")

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        if self.output_mode == "int":
            return shape
        if not len(self._tokens) and not self.pad_to_max_tokens:
            raise RuntimeError(f"{type(self).__name__}: with output_mode={self.output_mode!r} the vocabulary must "
                               f"be set before the layer is called on inputs (pass vocabulary= or call adapt)")
        depth = self._depth()
        self._frozen_size = depth
        return encoded_shape(shape, self.output_mode, depth)

    def get_config(self):
        cfg = super().get_config()
        tf_idf = self.output_mode == "tf_idf" and self._idf is not None and len(self._tokens)
        cfg.update(invert=self.invert, max_tokens=self.max_tokens, num_oov_indices=self.num_oov_indices,
                   oov_token=self._to_python(self.oov_token) if self.oov_token is not None else None,
                   mask_token=self._to_python(self.mask_token) if self.mask_token is not None else None,
                   output_mode=self.output_mode, sparse=self.sparse, pad_to_max_tokens=self.pad_to_max_tokens,
                   # tf_idf: the special tokens too, so that their weights come back as they were
                   vocabulary=self.get_vocabulary(include_special_tokens=bool(tf_idf)) if len(self._tokens)
                   else None,
                   idf_weights=[float(w) for w in self._idf] if tf_idf else None,
                   has_input_vocabulary=self._has_input_vocabulary)
        return cfg
