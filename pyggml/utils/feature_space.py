"""``FeatureSpace``: Keras's one-stop preprocessing of structured data.

A dict of named features (numbers or strings, one value per row) becomes one
float32 vector per row (``output_mode="concat"``) or a dict of encoded features
(``"dict"``).  Each feature's kind says how: ``"float"`` (as it is),
``"float_rescaled"``, ``"float_normalized"``, ``"float_discretized"`` (bins,
one-hot), ``"integer_categorical"``, ``"string_categorical"`` (a vocabulary,
one-hot), ``"integer_hashed"``, ``"string_hashed"`` (hashed bins, one-hot); or a
``FeatureSpace.<kind>(...)`` spec with its own arguments.  ``crosses`` hash
value co-occurrences of categorical features into ``crossing_dim`` bins.

It is built from pyggml's preprocessing layers (Normalization, Rescaling,
Discretization, IntegerLookup, StringLookup, Hashing, HashedCrossing,
CategoryEncoding), which compute on the host in numpy:

- ``adapt(dataset)`` learns vocabularies, means and variances, bin boundaries
  from a dataset (or iterable) of dicts of feature batches, or one dict of arrays;
- ``feature_space(dict_of_arrays)`` encodes at once (a ``Dataset.map`` step);
- ``get_inputs()`` gives a dict of ``pg.Input`` nodes (one per feature, shape (1,)),
  ``get_encoded_features()`` the encoded node made from them: a model on the
  encoded features trains on preprocessed data, and ``pg.Model(get_inputs(), ...)``
  with the same layers takes raw feature dicts (the preprocessing runs before the
  graph, and is saved with the model).

As Keras, features are concatenated in the order of their sorted names, then
the crosses in the order of their sorted names (``"a_X_b"``).
"""

import numpy as np

from pyggml.saving import gguf_io

__all__ = ["FeatureSpace", "Feature", "Cross"]

_OUTPUT_MODES = ("int", "one_hot")


class Cross:
    """``FeatureSpace.cross(feature_names, crossing_dim, output_mode="one_hot")``."""

    def __init__(self, feature_names, crossing_dim, output_mode="one_hot"):
        if not isinstance(feature_names, (list, tuple)) or len(feature_names) < 2 or \
                not all(isinstance(n, str) for n in feature_names):
            raise ValueError(f"FeatureSpace.cross: feature_names must be two or more feature names, got "
                             f"{feature_names!r}")
        if output_mode not in _OUTPUT_MODES:
            raise ValueError(f"FeatureSpace.cross: output_mode must be one of {_OUTPUT_MODES}, got {output_mode!r}")
        self.feature_names = tuple(feature_names)
        self.crossing_dim = _positive("crossing_dim", crossing_dim)
        self.output_mode = output_mode

    @property
    def name(self):
        return "_X_".join(self.feature_names)

    def get_config(self):
        return {"feature_names": list(self.feature_names), "crossing_dim": self.crossing_dim,
                "output_mode": self.output_mode}


class Feature:
    """One feature's spec: its input dtype ("float32", "int32" or "string"), the kind and
    the arguments of its preprocessing, and its output mode."""

    def __init__(self, dtype, kind, args, output_mode, name=None):
        self.dtype = dtype
        self.kind = kind
        self.args = dict(args)
        self.output_mode = output_mode
        self.name = name

    def get_config(self):
        args = dict(self.args)
        if "preprocessor" in args:                  # FeatureSpace.feature's layer: its Keras config
            from pyggml.saving.serialization_lib import serialize_keras_object
            args["preprocessor"] = serialize_keras_object(args["preprocessor"])
        return {"kind": self.kind, "args": args, "output_mode": self.output_mode, "name": self.name,
                "dtype": self.dtype}

    @classmethod
    def from_config(cls, config):
        """The spec ``get_config`` gave (through the FeatureSpace kind that made it)."""
        if not isinstance(config, dict) or config.get("kind") not in FeatureSpace._BY_NAME + ("custom",) or \
                not isinstance(config.get("args", {}), dict):
            raise ValueError(f"FeatureSpace.from_config: a feature's config must be a dict with a known 'kind' and "
                             f"its 'args', got {config!r}")
        kind, args, name = config["kind"], dict(config.get("args") or {}), config.get("name")
        mode = config.get("output_mode")
        if kind == "custom":
            from pyggml.saving.serialization_lib import deserialize_keras_object
            pre = args.get("preprocessor")
            return FeatureSpace.feature(config.get("dtype", "float32"),
                                        deserialize_keras_object(pre) if isinstance(pre, dict) else pre, mode)
        if kind in ("float", "float_rescaled", "float_normalized"):
            return getattr(FeatureSpace, kind)(**args, name=name)
        return getattr(FeatureSpace, kind)(**args, output_mode=mode or "one_hot", name=name)


def _positive(what, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"FeatureSpace: {what} must be a positive int, got {v!r}")
    return int(v)


def _mode(kind, output_mode):
    if output_mode not in _OUTPUT_MODES:
        raise ValueError(f"FeatureSpace.{kind}: output_mode must be one of {_OUTPUT_MODES}, got {output_mode!r}")
    return output_mode


class FeatureSpace:
    """``FeatureSpace(features, output_mode="concat", crosses=None, crossing_dim=32,
    hashing_dim=32, num_discretization_bins=32, name=None)``"""

    # --- the feature kinds (Keras's class methods) ------------------------------------------------
    @classmethod
    def float(cls, name=None):
        return Feature("float32", "float", {}, "float", name)

    @classmethod
    def float_rescaled(cls, scale=1.0, offset=0.0, name=None):
        return Feature("float32", "float_rescaled", {"scale": float(scale), "offset": float(offset)}, "float", name)

    @classmethod
    def float_normalized(cls, name=None):
        return Feature("float32", "float_normalized", {}, "float", name)

    @classmethod
    def float_discretized(cls, num_bins, bin_boundaries=None, output_mode="one_hot", name=None):
        if bin_boundaries is not None:
            b = np.asarray(bin_boundaries, dtype=np.float64)
            if b.ndim != 1 or np.any(np.diff(b) <= 0):
                raise ValueError(f"FeatureSpace.float_discretized: bin_boundaries must be increasing numbers, got "
                                 f"{bin_boundaries!r}")
            bin_boundaries = [float(v) for v in b]
            num_bins = len(bin_boundaries) + 1
        return Feature("float32", "float_discretized", {"num_bins": _positive("num_bins", num_bins),
                                                        "bin_boundaries": bin_boundaries},
                       _mode("float_discretized", output_mode), name)

    @classmethod
    def integer_categorical(cls, max_tokens=None, num_oov_indices=1, output_mode="one_hot", name=None):
        return Feature("int32", "integer_categorical", {"max_tokens": max_tokens, "num_oov_indices": num_oov_indices},
                       _mode("integer_categorical", output_mode), name)

    @classmethod
    def string_categorical(cls, max_tokens=None, num_oov_indices=1, output_mode="one_hot", name=None):
        return Feature("string", "string_categorical", {"max_tokens": max_tokens, "num_oov_indices": num_oov_indices},
                       _mode("string_categorical", output_mode), name)

    @classmethod
    def string_hashed(cls, num_bins, output_mode="one_hot", name=None):
        return Feature("string", "string_hashed", {"num_bins": _positive("num_bins", num_bins)},
                       _mode("string_hashed", output_mode), name)

    @classmethod
    def integer_hashed(cls, num_bins, output_mode="one_hot", name=None):
        return Feature("int32", "integer_hashed", {"num_bins": _positive("num_bins", num_bins)},
                       _mode("integer_hashed", output_mode), name)

    @classmethod
    def feature(cls, dtype, preprocessor, output_mode):
        """Keras's: any preprocessing layer of your own for a feature (a ``TextVectorization`` with
        ``output_mode="tf_idf"``); adapted by ``adapt`` where it has an ``adapt``; ``output_mode``
        "float" or "int" (its output as it is) or "one_hot" (its integer output, one-hot)."""
        if not callable(preprocessor):
            raise TypeError(f"FeatureSpace.feature: preprocessor must be a layer, got {type(preprocessor).__name__}")
        if output_mode not in ("float", "int", "one_hot"):
            raise ValueError(f"FeatureSpace.feature: output_mode must be 'float', 'int' or 'one_hot', got "
                             f"{output_mode!r}")
        kind = str(getattr(dtype, "__name__", dtype))
        kind = "string" if kind in ("string", "str", "object") else "int32" if kind.startswith(("int", "uint")) \
            else "float32"
        return Feature(kind, "custom", {"preprocessor": preprocessor}, output_mode)

    @classmethod
    def cross(cls, feature_names, crossing_dim, output_mode="one_hot"):
        return Cross(feature_names, crossing_dim, output_mode)

    _BY_NAME = ("float", "float_rescaled", "float_normalized", "float_discretized", "integer_categorical",
                "string_categorical", "string_hashed", "integer_hashed")

    # --- construction ----------------------------------------------------------------------------
    def __init__(self, features, output_mode="concat", crosses=None, crossing_dim=32, hashing_dim=32,
                 num_discretization_bins=32, name=None):
        if not isinstance(features, dict) or not features:
            raise ValueError("FeatureSpace: features must be a non-empty dict {name: kind or FeatureSpace.<kind>()}")
        if output_mode not in ("concat", "dict"):
            raise ValueError(f"FeatureSpace: output_mode must be 'concat' or 'dict', got {output_mode!r}")
        self.output_mode = output_mode
        self.crossing_dim = _positive("crossing_dim", crossing_dim)
        self.hashing_dim = _positive("hashing_dim", hashing_dim)
        self.num_discretization_bins = _positive("num_discretization_bins", num_discretization_bins)
        self.name = name or "feature_space"
        self.features = {}
        for fname, spec in features.items():
            if not isinstance(fname, str) or not fname:
                raise ValueError(f"FeatureSpace: feature names must be non-empty strings, got {fname!r}")
            if isinstance(spec, str):
                if spec not in self._BY_NAME:
                    raise ValueError(f"FeatureSpace: unknown feature kind {spec!r} for {fname!r}; known: "
                                     f"{list(self._BY_NAME)}")
                if spec == "float_discretized":
                    spec = self.float_discretized(self.num_discretization_bins)
                elif spec in ("string_hashed", "integer_hashed"):
                    spec = getattr(self, spec)(self.hashing_dim)
                else:
                    spec = getattr(self, spec)()
            if not isinstance(spec, Feature):
                raise TypeError(f"FeatureSpace: feature {fname!r} must be a kind name or a FeatureSpace.<kind>() "
                                f"spec, got {type(spec).__name__}")
            self.features[fname] = spec
        self.crosses = []
        for c in crosses or ():
            if isinstance(c, (list, tuple)):
                c = Cross(c, self.crossing_dim)
            if not isinstance(c, Cross):
                raise TypeError(f"FeatureSpace: crosses must be tuples of feature names or FeatureSpace.cross(...), "
                                f"got {c!r}")
            for n in c.feature_names:
                if n not in self.features:
                    raise ValueError(f"FeatureSpace: the cross {c.name!r} names {n!r}, which is not a feature")
                if self.features[n].kind.startswith("float") and self.features[n].kind != "float_discretized":
                    raise ValueError(f"FeatureSpace: the cross {c.name!r} takes categorical features; {n!r} is "
                                     f"{self.features[n].kind}")
            self.crosses.append(c)
        self._make_layers()
        self._adapted = False
        self._inputs = None
        self._encoded = None

    def _make_layers(self):
        from pyggml import layers
        self.preprocessors, self.one_hot_encoders, self.crossers = {}, {}, {}
        for fname, f in self.features.items():
            a = f.args
            if f.kind == "float":
                p = None
            elif f.kind == "float_rescaled":
                p = layers.Rescaling(scale=a["scale"], offset=a["offset"])
            elif f.kind == "float_normalized":
                p = layers.Normalization(axis=-1)
            elif f.kind == "float_discretized":
                p = layers.Discretization(bin_boundaries=a["bin_boundaries"]) if a["bin_boundaries"] is not None \
                    else layers.Discretization(num_bins=a["num_bins"])
            elif f.kind == "integer_categorical":
                p = layers.IntegerLookup(max_tokens=a["max_tokens"], num_oov_indices=a["num_oov_indices"])
            elif f.kind == "string_categorical":
                p = layers.StringLookup(max_tokens=a["max_tokens"], num_oov_indices=a["num_oov_indices"])
            elif f.kind == "custom":
                p = a["preprocessor"]
            else:                                                    # hashed
                p = layers.Hashing(num_bins=a["num_bins"])
            self.preprocessors[fname] = p
        for c in self.crosses:
            self.crossers[c.name] = layers.HashedCrossing(num_bins=c.crossing_dim)

    def _make_encoders(self):
        """One-hot encoders, once the vocabularies' sizes are known (after adapt)."""
        from pyggml import layers
        for fname, f in self.features.items():
            if f.output_mode != "one_hot":
                continue
            p = self.preprocessors[fname]
            if f.kind == "float_discretized":
                n = f.args["num_bins"]
            elif f.kind in ("integer_categorical", "string_categorical"):
                n = p.vocabulary_size()
            elif f.kind == "custom":
                if not hasattr(p, "vocabulary_size"):
                    raise ValueError(f"FeatureSpace: feature {fname!r} is one-hot encoded, so its preprocessor "
                                     f"needs a vocabulary_size() (a lookup layer's)")
                n = p.vocabulary_size()
            else:
                n = f.args["num_bins"]
            self.one_hot_encoders[fname] = layers.CategoryEncoding(num_tokens=n, output_mode="one_hot")
        for c in self.crosses:
            if c.output_mode == "one_hot":
                self.one_hot_encoders[c.name] = layers.CategoryEncoding(num_tokens=c.crossing_dim,
                                                                        output_mode="one_hot")

    # --- adapt ----------------------------------------------------------------------------------
    def adapt(self, dataset):
        """Learn each feature's preprocessing from ``dataset``: batches that are dicts
        {feature name: values} (a ``Dataset`` mapped to its features, any iterable of dicts),
        or one such dict of arrays."""
        batches = [dataset] if isinstance(dataset, dict) else dataset
        columns = {n: [] for n in self.features}
        try:
            it = iter(batches)
        except TypeError:
            raise TypeError(f"FeatureSpace.adapt takes a dataset of dicts of features, got "
                            f"{type(dataset).__name__}") from None
        for batch in it:
            if isinstance(batch, tuple) and batch and isinstance(batch[0], dict):
                raise ValueError("FeatureSpace.adapt takes the features alone: map the dataset to x first "
                                 "(ds.map(lambda x, y: x))")
            if not isinstance(batch, dict):
                raise TypeError(f"FeatureSpace.adapt: each batch must be a dict of features, got "
                                f"{type(batch).__name__}")
            for n in self.features:
                if n not in batch:
                    raise ValueError(f"FeatureSpace.adapt: a batch lacks the feature {n!r}")
                columns[n].append(self._column(n, batch[n]))
        if not columns or not any(columns.values()) or not all(columns.values()):
            raise ValueError("FeatureSpace.adapt: the dataset is empty")
        for n, parts in columns.items():
            if self._learns(n):
                self.preprocessors[n].adapt(np.concatenate(parts))
        self._make_encoders()
        self._adapted = True
        self._inputs = self._encoded = None

    def _column(self, name, values):
        """A feature's batch as (n, 1) in its input dtype, checked."""
        f = self.features[name]
        a = np.asarray(values)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[1] != 1:
            raise ValueError(f"FeatureSpace: feature {name!r} takes one value a row, got shape {a.shape}")
        if f.dtype == "string":
            if a.dtype.kind in "SO":
                a = a.astype(str)
            if a.dtype.kind != "U":
                raise TypeError(f"FeatureSpace: feature {name!r} ({f.kind}) takes strings, got dtype {a.dtype}")
            return a
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"FeatureSpace: feature {name!r} ({f.kind}) takes numbers, got dtype {a.dtype}")
        if f.dtype == "int32":
            if a.dtype.kind == "f" and np.any(a != np.floor(a)):
                raise ValueError(f"FeatureSpace: feature {name!r} ({f.kind}) takes whole numbers")
            return a.astype(np.int64)
        return a.astype(np.float32)

    def _learns(self, name):
        """Whether the feature's preprocessing is learned by adapt."""
        f = self.features[name]
        if f.kind == "custom":
            return callable(getattr(f.args["preprocessor"], "adapt", None))
        if f.kind in ("float", "float_rescaled", "string_hashed", "integer_hashed"):
            return False
        return not (f.kind == "float_discretized" and f.args["bin_boundaries"] is not None)

    def _check_adapted(self):
        if not self._adapted:
            if any(self._learns(n) for n in self.features):
                raise ValueError("FeatureSpace: call adapt() on the training features first")
            self._make_encoders()
            self._adapted = True

    # --- encoding -----------------------------------------------------------------------------------
    def _encode(self, columns, merge):
        pre = {n: (p(columns[n]) if p is not None else columns[n]) for n, p in self.preprocessors.items()}
        crossed = {c.name: self.crossers[c.name]([pre[n] for n in c.feature_names]) for c in self.crosses}
        names = sorted(pre) + sorted(crossed)
        out = {}
        for n in names:
            v = pre[n] if n in pre else crossed[n]
            enc = self.one_hot_encoders.get(n)
            out[n] = enc(v) if enc is not None else v
        if self.output_mode == "dict":
            return out
        return merge([out[n] for n in names])

    def __call__(self, data):
        """Encode a dict {feature name: values} of arrays (or of ``get_inputs()``'s nodes)."""
        self._check_adapted()
        if not isinstance(data, dict):
            raise TypeError(f"FeatureSpace takes a dict of features, got {type(data).__name__}")
        missing = [n for n in self.features if n not in data]
        if missing:
            raise ValueError(f"FeatureSpace: the features {missing} are missing")
        from pyggml.layers.node import Node
        if any(isinstance(v, Node) for v in data.values()):
            if not all(isinstance(data[n], Node) for n in self.features):
                raise TypeError("FeatureSpace: give all features as arrays, or all as nodes (get_inputs())")
            return self._encode({n: data[n] for n in self.features}, self._merge_nodes)
        columns = {n: self._column(n, data[n]) for n in self.features}
        rows = {len(c) for c in columns.values()}
        if len(rows) != 1:
            raise ValueError(f"FeatureSpace: the features have different numbers of rows: "
                             f"{ {n: len(c) for n, c in columns.items()} }")
        out = self._encode(columns, lambda parts: np.concatenate(
            [np.asarray(p, dtype=np.float32).reshape(len(p), -1) for p in parts], axis=-1))
        # one sample given without a batch axis comes back without one, as Keras's
        single = all(np.ndim(data[n]) == 0 for n in self.features)
        from pyggml.utils.timeseries_utils import EagerArray

        def eager(v):         # answers TensorFlow's eager .numpy(), as the concatenated output does
            v = np.asarray(v)
            v = v[0] if single and v.ndim and len(v) == 1 else v
            return np.ascontiguousarray(v).view(EagerArray)
        if isinstance(out, dict):
            return {k: eager(v) for k, v in out.items()}
        return eager(np.asarray(out, dtype=np.float32))

    @staticmethod
    def _merge_nodes(parts):
        from pyggml import layers
        return parts[0] if len(parts) == 1 else layers.Concatenate(axis=-1)(parts)

    def get_inputs(self):
        """{feature name: pg.Input(shape=(1,), dtype=..., name=feature name)} (made once)."""
        self._check_adapted()
        if self._inputs is None:
            from pyggml.layers import Input
            self._inputs = {n: Input(shape=(1,), dtype=f.dtype, name=n) for n, f in self.features.items()}
        return self._inputs

    def get_encoded_features(self):
        """The encoded node made from get_inputs() (a dict of nodes in output_mode "dict")."""
        if self._encoded is None:
            self._encoded = self(self.get_inputs())
            for node in (self._encoded.values() if isinstance(self._encoded, dict) else [self._encoded]):
                node.model_input = True     # a training model takes it as its input, without a warning
        return self._encoded

    def save(self, filepath):
        """Keras's: the adapted FeatureSpace to a file (``.keras``; GGUF, as pyggml's models), read
        back by ``keras.saving.load_model``.  What is saved is the model of its encoding (the
        preprocessing layers with what adapt learned) and this config."""
        import json
        from pyggml.models import Model
        self._check_adapted()
        model = Model(self.get_inputs(), self.get_encoded_features(), name=self.name)
        model.__dict__["_saved_with"] = {"pyggml.feature_space": json.dumps(self.get_config())}
        model.save(filepath)

    def get_config(self):
        return {"features": {n: f.get_config() for n, f in self.features.items()}, "output_mode": self.output_mode,
                "crosses": [c.get_config() for c in self.crosses], "crossing_dim": self.crossing_dim,
                "hashing_dim": self.hashing_dim, "num_discretization_bins": self.num_discretization_bins,
                "name": self.name}

    @classmethod
    def from_config(cls, config):
        """Keras's: a FeatureSpace made again from ``get_config()``, not adapted (``adapt`` it
        again, or save the adapted one with ``save`` and read it with ``load_model``)."""
        if not isinstance(config, dict) or not isinstance(config.get("features"), dict):
            raise ValueError(f"FeatureSpace.from_config: expected the dict get_config() gives (with 'features'), "
                             f"got {type(config).__name__}")
        features = {n: f if isinstance(f, (str, Feature)) else Feature.from_config(f)
                    for n, f in config["features"].items()}
        crosses = []
        for c in config.get("crosses") or ():
            if isinstance(c, dict):
                try:
                    c = Cross(c["feature_names"], c["crossing_dim"], c.get("output_mode", "one_hot"))
                except KeyError as e:
                    raise ValueError(f"FeatureSpace.from_config: a cross's config lacks {e}") from None
            crosses.append(c)
        keys = ("output_mode", "crossing_dim", "hashing_dim", "num_discretization_bins", "name")
        return cls(features, crosses=crosses, **{k: config[k] for k in keys if k in config})


class SavedFeatureSpace(FeatureSpace):
    """A FeatureSpace read back by ``load_model``: its encoding is the saved model (the
    preprocessing layers as adapted), called on a dict of features or on ``get_inputs()``."""

    def __init__(self, model, config):
        self._model = model
        self._config = dict(config)
        self.output_mode = config.get("output_mode", "concat")
        self.name = config.get("name") or model.name
        self._adapted = True

    @property
    def features(self):
        """{feature name: its saved config}."""
        return dict(self._config.get("features", {}))

    def get_config(self):
        return dict(self._config)

    @classmethod
    def from_config(cls, config):
        """A FeatureSpace (not adapted) from the config, as FeatureSpace.from_config."""
        return FeatureSpace.from_config(config)

    def get_inputs(self):
        return {n.layer.name: n for n in self._model.inputs}

    def get_encoded_features(self):
        if self.output_mode == "dict":
            return dict(zip(self._model.output_names, self._model.outputs))
        return self._model.outputs[0]

    def save(self, filepath):
        self._model.__dict__["_saved_with"] = {"pyggml.feature_space": __import__("json").dumps(self._config)}
        self._model.save(filepath)

    def __call__(self, data):
        if not isinstance(data, dict):
            raise TypeError(f"FeatureSpace takes a dict of features, got {type(data).__name__}")
        from pyggml.layers.node import Node
        names = list(self.get_inputs())
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"FeatureSpace: the features {missing} are missing")
        if any(isinstance(data[n], Node) for n in names):
            return self._model({n: data[n] for n in names})
        single = all(np.ndim(data[n]) == 0 for n in names)
        columns = {n: np.asarray(data[n]).reshape(-1, 1) for n in names}
        out = self._model.predict(columns, verbose=0)
        from pyggml.utils.timeseries_utils import EagerArray

        def eager(v):
            v = np.asarray(v)
            v = v[0] if single and v.ndim and len(v) == 1 else v
            return np.ascontiguousarray(v).view(EagerArray)
        return {k: eager(v) for k, v in out.items()} if isinstance(out, dict) else eager(out)


gguf_io.RESTORERS["pyggml.feature_space"] = SavedFeatureSpace
