"""TextVectorization: text to integer token sequences (or multi-hot, count,
TF-IDF vectors), on the host before the graph (Keras's layer).

Each string goes through Keras's steps: standardize (ASCII lowercasing and
stripping ASCII punctuation, as TensorFlow's string ops do), split (on ASCII
whitespace, or into Unicode characters), ngrams (joined by a space, each width
in turn), then a ``StringLookup`` with ``""`` as its mask token: in ``"int"``
mode index 0 is the padding and 1 the OOV token ``"[UNK]"``; rows are padded
with 0 to the longest row of the batch, or padded or cut to
``output_sequence_length``.

The vocabulary (and TF-IDF weights) are in the layer's config, so they are
saved in the model's file.  A callable ``standardize`` or ``split`` is saved by
its registered name (``@pg.saving.register_serializable()``), as Keras does.

Callables see numpy, not tensors: ``standardize`` gets the batch as a numpy
array of str (the input's shape) and returns an array-like of strings of that
shape; ``split`` gets a 1-D numpy array of str and returns one sequence of
tokens per string."""

import re
from contextlib import contextmanager

import numpy as np

from pyggml._validation import check_int, is_int
from pyggml.layers.node import Node
from pyggml.layers.preprocessing._adapt import adapt_batches
from pyggml.layers.preprocessing._encoding import check_output_mode
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.layers.preprocessing.string_lookup import StringLookup
from pyggml.saving.object_registration import get_registered_name, get_registered_object, register_builtin

__all__ = ["TextVectorization"]

_STANDARDIZE = ("lower_and_strip_punctuation", "lower", "strip_punctuation")
_SPLIT = ("whitespace", "character")
_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}        # TensorFlow lowercases ASCII only
_PUNCTUATION = dict.fromkeys(map(ord, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"))
_WHITESPACE = re.compile(r"[ \t\n\v\f\r]+")                        # the ASCII whitespace TensorFlow splits on
_WHO = "TextVectorization"


def _text(v, encoding):
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode(encoding, errors="replace")
    raise TypeError(f"{_WHO} takes strings, got {type(v).__name__} {v!r}")


@contextmanager
def _named_errors():
    """The inner StringLookup's errors, named as this layer's."""
    try:
        yield
    except (TypeError, ValueError, RuntimeError) as e:
        msg = str(e)
        if msg.startswith("StringLookup"):
            raise type(e)(_WHO + msg[len("StringLookup"):]) from None
        raise


def _check_step(value, what, names):
    """standardize / split: None, one of the names, or a callable."""
    if value is None or callable(value):
        return value
    if isinstance(value, str) and value in names:
        return value
    raise ValueError(f"{_WHO}: {what} must be None, a callable or one of {', '.join(map(repr, names))}, "
                     f"got {value!r}")


def _serialize_callable(fn, what):
    name = get_registered_name(fn)
    qual = getattr(fn, "__qualname__", "")
    try:
        found = get_registered_object(name)
    except ValueError:
        found = None
    if found is not fn and (not isinstance(name, str) or "<" in name or "<" in qual):
        raise ValueError(f"{_WHO}: the {what} callable {fn!r} cannot be saved: define it at module level and "
                         f"register it with @pyggml.saving.register_serializable() (a lambda or a local "
                         f"function has no name to load it by)")
    return {"class_name": "function", "config": name, "registered_name": name}


def _deserialize_callable(value, what):
    if not isinstance(value, dict):
        return value
    name = value.get("registered_name") or value.get("config")
    if not isinstance(name, str):
        raise ValueError(f"{_WHO}: cannot read the saved {what} {value!r}")
    try:
        fn = get_registered_object(name)
    except ValueError:
        raise ValueError(f"{_WHO}: the saved {what} function {name!r} is unknown: register it with "
                         f"@pyggml.saving.register_serializable() or pass it in custom_objects when "
                         f"loading") from None
    if not callable(fn):
        raise ValueError(f"{_WHO}: the saved {what} {name!r} is not callable")
    return fn


MAX_NGRAM = 4096           # tokens in one n-gram: ngrams=10**9 built a billion-entry tuple


def _ngram_widths(ngrams):
    if ngrams is None:
        return None
    if is_int(ngrams):
        n = check_int("ngrams", ngrams)
        if n < 1:
            raise ValueError(f"{_WHO}: ngrams must be at least 1, got {ngrams}")
        if n > MAX_NGRAM:
            raise ValueError(f"{_WHO}: ngrams={n} is too large (at most {MAX_NGRAM} tokens per n-gram)")
        return tuple(range(1, n + 1))
    if isinstance(ngrams, (tuple, list)) and ngrams and all(is_int(w) for w in ngrams):
        widths = tuple(int(w) for w in ngrams)
        if min(widths) < 1:
            raise ValueError(f"{_WHO}: ngrams widths must be at least 1, got {ngrams}")
        if max(widths) > MAX_NGRAM or len(widths) > MAX_NGRAM:
            raise ValueError(f"{_WHO}: ngrams {ngrams!r} asks for too much (widths and their number at most "
                             f"{MAX_NGRAM})")
        return widths
    raise ValueError(f"{_WHO}: ngrams must be None, an integer or a tuple of integers, got {ngrams!r}")


@register_builtin
class TextVectorization(HostLayer):
    """``TextVectorization(max_tokens=None, standardize="lower_and_strip_punctuation",
    split="whitespace", ngrams=None, output_mode="int", output_sequence_length=None,
    pad_to_max_tokens=False, vocabulary=None, idf_weights=None, sparse=False,
    ragged=False, encoding="utf-8", name=None)``; ``adapt(data)``,
    ``get_vocabulary()``, ``set_vocabulary(vocabulary, idf_weights=None)``,
    ``vocabulary_size()``."""

    def __init__(self, max_tokens=None, standardize="lower_and_strip_punctuation", split="whitespace", ngrams=None,
                 output_mode="int", output_sequence_length=None, pad_to_max_tokens=False, vocabulary=None,
                 idf_weights=None, sparse=False, ragged=False, encoding="utf-8", name=None, **kwargs):
        has_input_vocabulary = kwargs.pop("has_input_vocabulary", None)
        kwargs.pop("vocabulary_size", None)
        kwargs.pop("dtype", None)
        super().__init__(name=name, **kwargs)
        self.standardize = _check_step(_deserialize_callable(standardize, "standardize"), "standardize",
                                       _STANDARDIZE)
        self.split = _check_step(_deserialize_callable(split, "split"), "split", _SPLIT)
        self.ngrams = tuple(ngrams) if isinstance(ngrams, list) else ngrams
        self._widths = _ngram_widths(ngrams)
        self.output_mode = check_output_mode(output_mode, _WHO, ("int", "one_hot", "multi_hot", "count",
                                                                 "tf_idf"))
        if self.output_mode == "one_hot" and self.split is not None:
            raise ValueError(f"{_WHO}: output_mode='one_hot' encodes each input string as one token: it needs "
                             f"split=None (use 'multi_hot' or 'count' for split text)")
        if output_sequence_length is not None:
            if self.output_mode != "int":
                raise ValueError(f"{_WHO}: output_sequence_length is only for output_mode='int', got output_mode="
                                 f"{self.output_mode!r}")
            output_sequence_length = check_int("output_sequence_length", output_sequence_length, 1, 1 << 24)
        self.output_sequence_length = output_sequence_length
        if sparse:
            raise ValueError(f"{_WHO}: sparse=True gives TensorFlow sparse tensors, which pyggml does not have; "
                             f"use sparse=False (dense outputs)")
        if ragged:
            raise ValueError(f"{_WHO}: ragged=True gives TensorFlow ragged tensors, which pyggml does not have; "
                             f"use ragged=False (rows padded with 0)")
        self.sparse = False
        self.ragged = False
        if not isinstance(encoding, str):
            raise TypeError(f"{_WHO}: encoding must be a str, got {encoding!r}")
        try:
            "".encode(encoding)
        except LookupError:
            raise ValueError(f"{_WHO}: unknown encoding {encoding!r}") from None
        self.encoding = encoding
        with _named_errors():
            self._lookup = StringLookup(max_tokens=max_tokens, mask_token="", vocabulary=vocabulary,
                                        idf_weights=idf_weights, output_mode=self.output_mode,
                                        pad_to_max_tokens=pad_to_max_tokens, encoding=encoding,
                                        has_input_vocabulary=has_input_vocabulary)

    @property
    def max_tokens(self):
        return self._lookup.max_tokens

    @property
    def pad_to_max_tokens(self):
        return self._lookup.pad_to_max_tokens

    @property
    def output_dtype(self):
        return "int32" if self.output_mode == "int" else "float32"

    # --- the vocabulary -----------------------------------------------------------------------------
    def get_vocabulary(self, include_special_tokens=True):
        """The token of each index: ``""`` (padding, "int" mode) and ``"[UNK]"`` first,
        unless excluded."""
        return self._lookup.get_vocabulary(include_special_tokens)

    def vocabulary_size(self):
        """The number of indices, the padding and OOV ones included."""
        return self._lookup.vocabulary_size()

    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Use this vocabulary (a list, an array or a path to a file of one token a line)."""
        with _named_errors():
            self._lookup.set_vocabulary(vocabulary, idf_weights)

    @property
    def idf_weights(self):
        return self._lookup.idf_weights

    # --- text to tokens -------------------------------------------------------------------------------
    def _texts(self, inputs):
        try:
            a = np.asarray(inputs)
        except ValueError as e:
            raise ValueError(f"{_WHO}: inputs must be a rectangular array of strings: {e}") from None
        if a.dtype.kind == "U":
            return a.astype(object)
        if a.dtype.kind in "SO":
            out = np.empty(a.shape, dtype=object)
            out.reshape(-1)[:] = [_text(v, self.encoding) for v in a.reshape(-1)] if a.size else []
            return out
        raise TypeError(f"{_WHO} takes strings, got an array of dtype {a.dtype}")

    def _standardized(self, texts):
        if self.standardize in ("lower", "lower_and_strip_punctuation"):
            texts = np.array([t.translate(_LOWER) for t in texts.reshape(-1)], dtype=object).reshape(texts.shape)
        if self.standardize in ("strip_punctuation", "lower_and_strip_punctuation"):
            texts = np.array([t.translate(_PUNCTUATION) for t in texts.reshape(-1)],
                             dtype=object).reshape(texts.shape)
        if callable(self.standardize):
            given = texts.astype(np.str_) if texts.size else np.zeros(texts.shape, np.str_)
            out = self.standardize(given)
            try:
                out = np.asarray(out)
            except ValueError as e:
                raise ValueError(f"{_WHO}: standardize must return an array of strings: {e}") from None
            if out.shape != texts.shape:
                raise ValueError(f"{_WHO}: standardize must return an array of its input's shape {texts.shape}, "
                                 f"got shape {out.shape}")
            texts = self._texts(out)
        return texts

    def _split_rows(self, texts):
        """One list of tokens per row."""
        if self.split is None:
            if texts.ndim > 2:
                raise ValueError(f"{_WHO}: with split=None the inputs must be of shape (batch,) or (batch, k), "
                                 f"got {texts.shape}")
            return [list(r) for r in (texts if texts.ndim == 2 else texts[:, None])]
        if texts.ndim == 2 and texts.shape[1] == 1:
            texts = texts[:, 0]
        elif texts.ndim != 1:
            raise ValueError(f"{_WHO}: to split text the inputs must be of shape (batch,) or (batch, 1), got "
                             f"{texts.shape}")
        if self.split == "whitespace":
            return [[t for t in _WHITESPACE.split(s) if t] for s in texts]
        if self.split == "character":
            return [list(s) for s in texts]
        out = self.split(texts.astype(np.str_) if texts.size else np.zeros(texts.shape, np.str_))
        if isinstance(out, np.ndarray) and out.dtype != object:
            out = list(out)
        try:
            rows = [[_text(t, self.encoding) for t in (list(r) if not isinstance(r, (str, bytes)) else [r])]
                    for r in out]
        except TypeError as e:
            raise TypeError(f"{_WHO}: split must return one sequence of strings per input string: {e}") from None
        if len(rows) != len(texts):
            raise ValueError(f"{_WHO}: split must return one sequence of tokens per input string ({len(texts)}), "
                             f"got {len(rows)}")
        return rows

    def _with_ngrams(self, tokens):
        if self._widths is None:
            return tokens
        out = []
        for w in self._widths:
            out.extend(" ".join(tokens[i:i + w]) for i in range(len(tokens) - w + 1))
        return out

    def _token_rows(self, inputs):
        texts = self._texts(inputs)
        if texts.ndim == 0:
            texts = texts.reshape(1)
        return [self._with_ngrams(r) for r in self._split_rows(self._standardized(texts))]

    def _padded(self, rows, length):
        """The rows as a (batch, length) array of str, cut or padded with the mask token ""."""
        longest = max((len(t) for r in rows for t in r[:length]), default=1)
        out = np.full((len(rows), length), "", dtype=f"<U{max(longest, 1)}")
        for i, r in enumerate(rows):
            r = r[:length]
            if r:
                out[i, :len(r)] = r
        return out

    # --- the call -------------------------------------------------------------------------------------
    def host_call(self, inputs):
        scalar = np.ndim(inputs) == 0 if not isinstance(inputs, (list, tuple)) else False
        rows = self._token_rows(inputs)
        if self.output_sequence_length is not None:
            length = self.output_sequence_length
        else:
            # at least one column: an empty batch never gives a zero-length array to the graph
            length = max(max((len(r) for r in rows), default=0), 1)
        with _named_errors():
            out = self._lookup.host_call(self._padded(rows, length))
        return out[0] if scalar else out

    def _static_length(self, feature_shape):
        if self.output_sequence_length is not None:
            return self.output_sequence_length
        if self.split is not None or feature_shape[-1] is None:
            return None
        k = feature_shape[-1]
        return k if self._widths is None else max(sum(max(k - w + 1, 0) for w in self._widths), 1)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        feature = shape[1:]
        if self.split is not None and feature == ():
            feature = (1,)                       # a (batch,) array of texts: one string a row too
        if self.split is not None and feature != (1,):
            raise ValueError(f"{_WHO}: to split text the input must be of shape (1,) (one string a row), got "
                             f"{feature}")
        if self.split is None and len(feature) != 1:
            raise ValueError(f"{_WHO}: with split=None the input must be of shape (k,), got {feature}")
        length = self._static_length(feature)
        if self.output_mode == "int":
            return (shape[0], length)
        with _named_errors():
            return self._lookup.compute_output_shape((shape[0], length))

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], Node):
            if args[0].dtype != "string":
                raise TypeError(f"{_WHO} takes strings: give its Input dtype='string' (got a {args[0].dtype} "
                                f"input)")
            return super().__call__(*args, **kwargs)
        if args and isinstance(args[0], (list, tuple)) and not any(isinstance(v, Node) for v in args[0]):
            out = self.host_call(args[0])                        # Keras's eager call on a list
        else:
            out = super().__call__(*args, **kwargs)
        if isinstance(out, np.ndarray):
            # eager results answer .numpy() as Keras's tensors do (keras-io scripts call it)
            from pyggml.utils.timeseries_utils import EagerArray
            out = out.view(EagerArray)
        return out

    # --- adapt ----------------------------------------------------------------------------------------
    def adapt(self, data, batch_size=None, steps=None):
        """Learn the vocabulary from text: a list or array of strings (shape (n,) or (n, 1),
        each string a document) or a dataset of such batches.  The most frequent tokens
        come first, ties the larger token first, up to ``max_tokens`` indices; with
        ``output_mode="tf_idf"`` also each token's inverse document frequency."""
        if self._lookup._has_input_vocabulary:
            raise ValueError(f"{_WHO}: cannot adapt a layer given a vocabulary (vocabulary= or set_vocabulary)")
        if steps is not None:
            steps = check_int("steps", steps, 1)
        counts, documents, n_docs = {}, {}, 0
        tf_idf = self.output_mode == "tf_idf"
        for k, batch in enumerate(adapt_batches(data, _WHO, steps)):
            if steps is not None and k >= steps:
                break
            for row in self._token_rows(batch):
                for t in row:
                    counts[t] = counts.get(t, 0) + 1
                if tf_idf:
                    n_docs += 1
                    for t in set(row):
                        documents[t] = documents.get(t, 0) + 1
        with _named_errors():
            self._lookup._install_adapted(counts, documents, n_docs)

    # --- config ---------------------------------------------------------------------------------------
    def get_config(self):
        cfg = super().get_config()
        lookup = self._lookup.get_config()
        cfg.update(max_tokens=self.max_tokens,
                   standardize=_serialize_callable(self.standardize, "standardize") if callable(self.standardize)
                   else self.standardize,
                   split=_serialize_callable(self.split, "split") if callable(self.split) else self.split,
                   ngrams=list(self.ngrams) if isinstance(self.ngrams, tuple) else self.ngrams,
                   output_mode=self.output_mode, output_sequence_length=self.output_sequence_length,
                   pad_to_max_tokens=self.pad_to_max_tokens, sparse=False, ragged=False,
                   vocabulary=lookup["vocabulary"], idf_weights=lookup["idf_weights"], encoding=self.encoding,
                   vocabulary_size=self.vocabulary_size(), has_input_vocabulary=lookup["has_input_vocabulary"])
        return cfg
