"""Data in, checked batches out.

A model describes what it takes (``InputSpec``: shape, graph dtype, the index
range an Embedding reading it needs) and what it is trained against
(``TargetSpec``: shape, sparse class indices or values).  The functions here
turn numpy arrays, lists, dicts, generators, iterables and ``PyDataset``s into
those, with errors that say what was expected; ``Dataset.batches`` yields
``Batch(xs, ys, ws)`` for one epoch (a short last batch stays short: it runs
with its own batch size, so no padded row reaches any statistic).
"""

import math
import warnings

import numpy as np

from pyggml._validation import host, is_int, is_number

__all__ = ["InputSpec", "TargetSpec", "Batch", "OneBatch", "input_specs", "graph_specs", "target_specs", "prepare_inputs",
           "bucketed",
           "adapt_inputs", "adapt_targets", "adapt_weights",
           "Dataset", "ArrayDataset", "GeneratorDataset", "unpack_item", "is_generator_like"]


BUCKET = 16            # variable lengths round up to a multiple of this when padding is masked


class InputSpec:
    def __init__(self, name, feature_shape, dtype, index_limit=None, bucket=False, path=None):
        self.name = name
        self.path = path                        # its keys in the dict (of dicts) the model's inputs were given in
        self.feature_shape = tuple(feature_shape)
        self.dtype = dtype                      # "float32" or "int32" in the graph
        self.index_limit = index_limit          # integers must be in [0, limit)
        self.bucket = bucket                    # zeros appended to its variable length are masked out

    def describe(self):
        return "(n, " + ", ".join("None" if d is None else str(d) for d in self.feature_shape) + ")"


class TargetSpec:
    def __init__(self, name, feature_shape, sparse=False, has_loss=True, pads_labels=False, as_given=False,
                 ignore_class=None, broadcasts=False):
        self.name = name
        self.broadcasts = broadcasts            # y broadcast to the output (Keras's regression losses)
        self.ignore_class = ignore_class        # a label the loss skips (may lie outside the classes)
        self.feature_shape = tuple(feature_shape)
        self.sparse = sparse                    # class indices in [0, classes)
        self.has_loss = has_loss
        self.pads_labels = pads_labels          # label rows padded with 0 to the output's steps (CTC)
        self.as_given = as_given                # a user's loss: y of another shape goes to it as it is
        self.given = None                       # then (its shape without the rows, "int32"/"float32")
        self.labels_tail = None                 # sparse labels: their shape without the rows, as given

    @property
    def classes(self):
        return self.feature_shape[-1] if self.feature_shape else 1


class Batch:
    __slots__ = ("xs", "ys", "ws", "n")

    def __init__(self, xs, ys=None, ws=None):
        self.xs, self.ys, self.ws = xs, ys, ws
        self.n = len(xs[0])


def _index_limit(topology, node):
    """The range its readers take the node's integers in (an Embedding's input_dim, a
    CategoryEncoding's num_tokens: their ``index_limit``), the smallest, or None."""
    readers = [c.layer for c in topology.consumers(node)]
    return min((l.index_limit for l in readers if getattr(l, "index_limit", None) is not None), default=None)


def _bucketable(topology, node):
    """Zeros appended along the node's variable length change nothing: every reader is an
    Embedding(mask_zero=True), whose mask leaves them out."""
    from pyggml.layers.core.embedding import Embedding
    readers = [c.layer for c in topology.consumers(node)]
    return any(d is None for d in node.feature_shape) and bool(readers) and \
        all(isinstance(l, Embedding) and l.mask_zero for l in readers)


def input_specs(topology):
    specs = []
    paths = getattr(topology, "input_paths", None) or [None] * len(topology.inputs)
    for n, path in zip(topology.inputs, paths):
        limit = _index_limit(topology, n)
        specs.append(InputSpec(n.layer.name, n.feature_shape, "int32" if limit is not None else n.dtype, limit,
                               _bucketable(topology, n), path))
    return specs


def bucketed(xs, specs):
    """Variable-length arrays whose padding is masked, zero-padded to a multiple of BUCKET
    along their variable axes: a graph per bucket, not per length."""
    out = []
    for a, spec in zip(xs, specs):
        if spec.bucket:
            pad = [(0, 0)] + [(0, (-a.shape[i + 1]) % BUCKET if d is None else 0)
                              for i, d in enumerate(spec.feature_shape)]
            if any(p[1] for p in pad):
                a = np.pad(a, pad)
        out.append(a)
    return out


def graph_specs(topology, raw_specs):
    """The specs of the graph's inputs: model inputs, or preprocessing layers' outputs."""
    raw = {id(n): s for n, s in zip(topology.inputs, raw_specs)}
    return [raw.get(id(n)) or InputSpec(n.layer.name, n.feature_shape, n.dtype, _index_limit(topology, n),
                                        _bucketable(topology, n))
            for n in topology.graph_inputs]


def target_specs(names, outputs, losses):
    return [TargetSpec(nm, o.feature_shape, sparse=bool(l is not None and l.sparse), has_loss=l is not None,
                       pads_labels=bool(getattr(l, "pads_labels", False)),
                       as_given=bool(getattr(l, "takes_targets_as_given", False)),
                       ignore_class=getattr(l, "ignore_class", None),
                       broadcasts=bool(getattr(l, "broadcasts_targets", False)))
            for nm, o, l in zip(names, outputs, losses)]


def prepare_inputs(topology, raw_specs, graph_specs_, x, what="x", training=False, one_batch=False):
    """(the graph's input arrays, rows): x checked, then the preprocessing (host) layers applied
    (in training mode with ``training``: data augmentation).  ``one_batch``: x is one batch,
    whose inputs may have different row counts (rows None then; see adapt_inputs)."""
    xs, n = adapt_inputs(raw_specs, x, what, one_batch)
    if not topology.host_nodes and len(topology.graph_inputs) == len(topology.inputs):
        return xs, n
    vals = {id(node): a for node, a in zip(topology.inputs, xs)}
    for node in topology.host_nodes:
        args = [vals[id(p)] for p in node.inputs]
        out = node.layer.host_apply(args if node.list_input else args[0], training)
        vals[id(node)] = out[node.index] if isinstance(out, (list, tuple)) else out
    arrays = [vals[id(node)] for node in topology.graph_inputs]
    graph_xs, _ = adapt_inputs(graph_specs_, arrays if len(arrays) > 1 else arrays[0],
                               "the preprocessing layers' output", one_batch)
    return graph_xs, n


def as_real_array(x, what):
    if x is None:
        raise TypeError(f"{what} must be an array, got None")
    if type(x) is np.ndarray:
        a = x
    else:
        try:
            a = np.asarray(host(x))
        except Exception as e:          # (a torch tensor: detached, bfloat16 as float32)
            raise TypeError(f"{what} must be an array of numbers: {e}") from None
    if a.dtype == object and a.size and all(isinstance(v, (int, float, np.integer, np.floating)) and
                                            not isinstance(v, (bool, np.bool_)) for v in a.reshape(-1)):
        # numbers in an object array (a pandas column after replace({"positive": 1, ...})): as
        # TensorFlow's conversion takes them, ints as int64, any float making them float
        whole = all(isinstance(v, (int, np.integer)) for v in a.reshape(-1))
        a = a.astype(np.int64 if whole else np.float64)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what} must hold real numbers, got dtype {a.dtype}")
    return a


def _fits(shape, spec_shape):
    return len(shape) == len(spec_shape) and all(s is None or s == d for d, s in zip(shape, spec_shape))


_warned_keys = set()       # the sets of unknown keys warned about once


def _at_paths(x, paths, names, what):
    """x's values at the inputs' paths (a model made on a dict of inputs: its keys, as Keras matches
    them, nested dicts included), or None where x is keyed by the inputs' names instead."""
    found = []
    for path in paths:
        v = x
        for k in path:
            if isinstance(v, (list, tuple)) and isinstance(k, int) and 0 <= k < len(v):
                v = v[k]
                continue
            if not isinstance(v, dict) or k not in v:
                if set(names) <= set(x):
                    return None                    # by the Inputs' names
                shown = ["/".join(map(str, p)) for p in paths]
                raise ValueError(f"{what} lacks {'/'.join(map(str, path))!r}: the model takes a dict with the "
                                 f"keys {shown} (its inputs' names {names} are taken too)")
            v = v[k]
        found.append(v)
    _warn_unknown(what, set(x) - {p[0] for p in paths}, sorted({str(p[0]) for p in paths}), stacklevel=6)
    return found


def _warn_unknown(what, unknown, known, stacklevel):
    """Once per set of keys, as Keras: columns of a feature dict the model takes no input for (an
    id or a weight column kept in a CSV's features) are left out, with a warning."""
    if unknown and frozenset(unknown) not in _warned_keys:
        _warned_keys.add(frozenset(unknown))
        warnings.warn(f"{what} has keys {sorted(map(str, unknown))} that match no model input (it has "
                      f"{known}); they are ignored", stacklevel=stacklevel)


def _split(x, names, what, paths=None):
    """A list of per-input (or per-output) values from a single value, a list or a dict; a
    list holding dicts (a model made on ``[image, {"ids": ..., "mask": ...}]``) gives its dicts'
    entries by name and its other items to the other inputs, in order.  ``paths``: the inputs'
    keys in the dict (of dicts) the model was made on, which a dict x is matched by first."""
    if isinstance(x, dict) and paths is not None and all(p is not None for p in paths):
        found = _at_paths(x, paths, names, what)
        if found is not None:
            return found
    if isinstance(x, (list, tuple)) and any(isinstance(e, dict) for e in x):
        by_key = {k: v for e in x if isinstance(e, dict) for k, v in e.items()}
        rest = iter(e for e in x if not isinstance(e, dict))
        x = {n: (by_key[n] if n in by_key else next(rest, None)) for n in names}
        x = {n: v for n, v in x.items() if v is not None}
    if isinstance(x, dict):
        unknown = set(x) - set(names)
        if unknown and what == "y":
            raise ValueError(f"{what} names {sorted(unknown)}, which the model does not have; it has {names}")
        _warn_unknown(what, unknown, names, stacklevel=5)
        missing = [n for n in names if n not in x]
        if missing:
            raise ValueError(f"{what} lacks {missing}")
        return [x[n] for n in names]
    if len(names) == 1:
        if isinstance(x, (list, tuple)) and len(x) == 1 and isinstance(x[0], np.ndarray):
            return [x[0]]
        return [x]
    if not isinstance(x, (list, tuple)) or len(x) != len(names):
        raise ValueError(f"the model has {len(names)} {'inputs' if what == 'x' else 'outputs'} ({names}): "
                         f"give {what} as a list or a dict of {len(names)} arrays")
    return list(x)


def adapt_inputs(specs, x, what="x", one_batch=False):
    """(arrays, n): one array per input, float32 or int32, checked against the specs.

    The inputs have the same number of rows n, except in ``one_batch`` (a batch a generator
    yields, train_on_batch's, a model called on arrays), where they may differ: a batch of
    disjoint graphs has a row per node in one input, per edge in another (Keras's batches
    from a dataset); n is None then."""
    xs = _split(x, [s.name for s in specs], what, [getattr(s, "path", None) for s in specs])
    out = []
    for a, spec in zip(xs, specs):
        if type(a) is np.ndarray and a.flags.c_contiguous and a.dtype == (np.int32 if spec.dtype == "int32"
                                                                           else np.float32) \
                and spec.index_limit is None and _fits(a.shape[1:], spec.feature_shape):
            out.append(a)
            continue
        if spec.dtype == "string":
            a = np.asarray(a)
            if a.ndim == len(spec.feature_shape) and spec.feature_shape[-1:] == (1,):
                a = a[..., None]       # as for numbers below
            if a.dtype.kind not in "USO":
                raise TypeError(f"{what} for input {spec.name!r} holds strings, got dtype {a.dtype}")
            if not _fits(a.shape[1:], spec.feature_shape):
                raise ValueError(f"{what} for input {spec.name!r} must have shape {spec.describe()}, got {a.shape}")
            out.append(a.astype(object) if a.dtype.kind != "O" else a)
            continue
        a = as_real_array(a, what)
        if a.ndim == len(spec.feature_shape) and spec.feature_shape[-1:] == (1,):
            a = a[..., None]           # as Keras: an input of shape (..., 1) takes arrays without that axis
        elif a.ndim == len(spec.feature_shape) + 2 and a.shape[-1] == 1 and spec.feature_shape[-1:] != (1,) and \
                _fits(a.shape[1:-1], spec.feature_shape):
            a = a[..., 0]              # and arrays with a trailing axis of 1 more than it has (Keras's)
        if a.ndim == len(spec.feature_shape) and _fits(a.shape, spec.feature_shape):
            raise ValueError(f"{what} for input {spec.name!r} must have shape {spec.describe()}, got {a.shape}: "
                             f"add the batch axis (x[None])")
        if not _fits(a.shape[1:], spec.feature_shape):
            raise ValueError(f"{what} for input {spec.name!r} must have shape {spec.describe()}, got {a.shape}")
        if spec.dtype == "int32":
            if a.dtype.kind == "f":
                # Keras's Embedding casts its input to int32: floats are truncated (NaN or inf have no index)
                if not np.all(np.isfinite(a)) or (a.size and np.abs(a).max() >= 2 ** 62):
                    raise ValueError(f"{what} for input {spec.name!r} holds indices: finite numbers expected")
            ai = a.astype(np.int64)
            if spec.index_limit is not None:            # it feeds an Embedding (a lookup)
                lim = spec.index_limit
                if ai.size and (ai.min() < 0 or ai.max() >= lim):
                    raise ValueError(f"indices for input {spec.name!r} must be in [0, {lim}), got values from "
                                     f"{ai.min()} to {ai.max()}")
            elif ai.size and (ai.min() < -2 ** 31 or ai.max() >= 2 ** 31):
                raise ValueError(f"integers for input {spec.name!r} must fit in int32, got values from "
                                 f"{ai.min()} to {ai.max()}")
            a = np.ascontiguousarray(ai, dtype=np.int32)
        else:
            if a.dtype.kind == "f" and a.dtype.itemsize > 4 and a.size and \
                    not np.all(np.abs(a[np.isfinite(a)]) <= np.finfo(np.float32).max):
                raise ValueError(f"{what} for input {spec.name!r} holds values too large for float32")
            a = np.ascontiguousarray(a, dtype=np.float32)
        out.append(a)
    n = out[0].shape[0]
    if any(a.shape[0] != n for a in out):
        if one_batch:
            return out, None
        raise ValueError(f"all inputs must have the same number of rows, got {[a.shape[0] for a in out]} (inputs "
                         f"whose rows differ, such as a batch of disjoint graphs, go as whole batches: a "
                         f"generator or PyDataset yielding them, train_on_batch, test_on_batch, predict_on_batch, "
                         f"or the model called on them)")
    return out, n


def unpack_validation_data(validation_data):
    """fit's ``validation_data`` of arrays as (x, y, sample_weight): Keras's ``(x,)`` (a model
    trained on its add_loss alone), ``(x, y)`` or ``(x, y, sample_weight)``."""
    if not isinstance(validation_data, (list, tuple)) or len(validation_data) not in (1, 2, 3):
        raise ValueError("validation_data must be (x,), (x, y) or (x, y, sample_weight), or a dataset")
    return (tuple(validation_data) + (None, None))[:3]


def adapt_targets(specs, y, n):
    """One array per output: float32 of the output's shape, or int32 class indices (n,).
    n None: a batch whose inputs' rows differ; each target has the rows it has (the graph
    checks them against its output's)."""
    with_loss = [i for i, s in enumerate(specs) if s.has_loss]
    if len(specs) > 1 and len(with_loss) == 1 and y is not None and not isinstance(y, (list, tuple, dict)):
        # as Keras: one target array for a model whose only trained output is one of several
        # (the others compiled with the loss None) goes to that output
        ys = [None] * len(specs)
        ys[with_loss[0]] = y
    else:
        if isinstance(y, dict):          # as Keras: an output without a loss needs no targets
            y = dict({s.name: None for s in specs if not s.has_loss}, **y)
        ys = _split(y, [s.name for s in specs], "y")
    out = []
    for a, spec in zip(ys, specs):
        if a is None:
            if spec.has_loss:
                raise ValueError(f"no targets for output {spec.name!r}, which has a loss")
            out.append(None)
            continue
        if not spec.has_loss:
            # no loss, so the graph takes no targets; kept on the host for the output's compiled
            # metrics (Keras computes them from the targets given)
            try:
                a = as_real_array(a, "y")
            except TypeError:                  # not numbers: nothing a metric could read, as before
                a = None
            out.append(a if a is not None and a.ndim >= 1 and (n is None or a.shape[0] == n) else None)
            continue
        a = as_real_array(a, "y")
        if a.ndim == 0:
            raise ValueError(f"y for output {spec.name!r} must have a batch axis, got a scalar")
        if n is not None and a.shape[0] != n:
            raise ValueError(f"y for output {spec.name!r} has {a.shape[0]} rows, x has {n}")
        rows = a.shape[0]
        if spec.sparse and spec.pads_labels:
            if len(spec.feature_shape) == 2 and spec.feature_shape[0] is None and a.ndim == 2:
                # an output of variable steps (Input((None, features))): the labels go as they are,
                # (n, max_label_length), to a graph made for each batch's steps
                out.append(_as_given(a.astype(np.int64), spec))
                continue
            a = _padded_labels(a, spec)
        if spec.sparse:
            # one class index per row of the output's last axis
            lead = spec.feature_shape[:-1]
            if any(d is None for d in lead):
                want_size = None
            else:
                want_size = rows * (int(np.prod(lead)) if lead else 1)
            if (want_size is not None and a.size != want_size) or (want_size is None and a.ndim < 1 + len(lead)):
                raise ValueError(f"sparse_categorical_crossentropy takes integer labels of shape "
                                 f"(n{''.join(', ' + str(d) for d in lead)}), got {a.shape} "
                                 f"(one-hot rows need categorical_crossentropy)")
            k = spec.classes
            if a.dtype.kind == "f" and np.all(np.isfinite(a)):
                a = np.trunc(a)            # Keras casts float labels to int (a mask resized bilinearly)
            c = a if spec.ignore_class is None else a[a != spec.ignore_class]
            if not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c >= k) or np.any(c != np.floor(c)):
                raise ValueError(f"labels for output {spec.name!r} must be integers in [0, {k})")
            shape = (rows,) + lead if want_size is not None else a.shape[:1 + len(lead)]
            spec.labels_tail = tuple(a.shape[1:])      # a metric of the user's gets them so (Keras's y_true)
            out.append(np.ascontiguousarray(a.reshape(shape), dtype=np.int32))
            continue
        shape = spec.feature_shape
        if spec.as_given and not _fits_output(a, shape):
            out.append(_as_given(a, spec))
            continue
        if any(d is None for d in shape):
            if a.ndim != len(shape) + 1:
                raise ValueError(f"y for output {spec.name!r} must have {len(shape) + 1} dims, got {a.shape}")
        else:
            cells = int(np.prod(shape)) if shape else 1
            if a.size != rows * cells and spec.broadcasts:
                b = _broadcast_targets(a, shape, spec)
                if b is None:
                    # y wider than the output ((n, 10) against (n, 1)): the loss broadcasts the
                    # output to it, as Keras's; the graph takes y as it is
                    out.append(_as_given(a, spec))
                    continue
                a = b
            if a.size != rows * cells:
                raise ValueError(f"y for output {spec.name!r} must have shape (n, {', '.join(map(str, shape))}), "
                                 f"got {a.shape}")
            a = a.reshape((rows,) + shape)
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise ValueError(f"y for output {spec.name!r} holds NaN or inf")
        out.append(np.ascontiguousarray(a, dtype=np.float32))
    return out


def _broadcast_targets(a, shape, spec):
    """Keras's regression losses first bring y to the output's rank (a last axis added or
    dropped), then broadcast one against the other: y (n,) or (n, 1) against an output
    (n, k) is each row's one value against all k; None where the output broadcasts to y."""
    want = (a.shape[0],) + tuple(shape)
    if a.ndim == len(want) - 1:
        a = a[..., None]
    elif a.ndim == len(want) + 1 and a.shape[-1] == 1:
        a = a[..., 0]
    try:
        return np.broadcast_to(a, want)
    except ValueError:
        pass
    try:
        np.broadcast_shapes(a.shape, want)
        return None                       # the output broadcasts to y instead
    except ValueError:
        raise ValueError(f"y for output {spec.name!r} of shape {a.shape} does not broadcast with the "
                         f"output's {want}") from None


def _fits_output(a, shape):
    """y goes to the output's shape: as many values per row (Keras's losses squeeze or expand a
    rank, (n,) labels for an (n, 1) output), or the same rank where lengths vary."""
    if any(d is None for d in shape):
        return a.ndim == len(shape) + 1 and all(d is None or d == e for d, e in zip(shape, a.shape[1:]))
    return a.size == len(a) * (int(np.prod(shape)) if shape else 1)


def _as_given(a, spec):
    """y for a user's loss, as the data has it: integers stay integers (class indices), the
    rest float32; every batch must have the first one's shape (the graph is made for it)."""
    if a.ndim > 4:
        raise ValueError(f"y for output {spec.name!r}: at most 4 dimensions, got {a.shape}")
    whole = a.dtype.kind in "biu"
    if whole and a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
        raise ValueError(f"y for output {spec.name!r}: integers beyond int32")
    given = (tuple(a.shape[1:]), "int32" if whole else "float32")
    if spec.given is not None and (len(spec.given[0]) != len(given[0]) or spec.given[1] != given[1]):
        raise ValueError(f"y for output {spec.name!r} has shape {a.shape} ({given[1]}), where the first batch had "
                         f"(n, {', '.join(map(str, spec.given[0]))}) ({spec.given[1]})")
    # the lengths may change from batch to batch (padded batches, whose inputs change with them:
    # the graph for a batch's input shapes is made with that batch's targets)
    spec.given = given
    if given[1] == "float32" and not np.all(np.isfinite(a)):
        raise ValueError(f"y for output {spec.name!r} holds NaN or inf")
    return np.ascontiguousarray(a, dtype=np.int32 if whole else np.float32)


def _padded_labels(a, spec):
    """(n, width) label rows of a loss that pads them (CTC: 0 is the blank and the padding)
    as (n, steps): zeros added, or trailing zeros cut."""
    steps = spec.feature_shape[0] if len(spec.feature_shape) == 2 else None
    if steps is None or a.ndim != 2:
        raise ValueError(f"{spec.name!r}: this loss takes labels of shape (n, max_label_length) for an output "
                         f"of shape (n, steps, classes), got labels {a.shape} for an output (n, {spec.feature_shape})")
    if a.shape[1] < steps:
        return np.pad(a, ((0, 0), (0, steps - a.shape[1])))
    if a.shape[1] > steps and np.any(a[:, steps:]):
        raise ValueError(f"labels for output {spec.name!r} have more than {steps} (the output's steps) entries "
                         "before their padding")
    return a[:, :steps]


def _class_of_rows(y, spec):
    if spec.sparse:
        return y.astype(np.int64)
    y2 = y.reshape(len(y), -1)
    return np.argmax(y2, axis=1) if y2.shape[1] > 1 else (y2[:, 0] > 0.5).astype(np.int64)


def adapt_weights(specs, losses, sample_weight, class_weight, ys, n):
    """Per-output weights (n, 1) or (n, cells), or None when none are given."""
    if sample_weight is None and class_weight is None:
        return None
    names = [s.name for s in specs]
    if isinstance(sample_weight, dict):
        sws = [sample_weight.get(nm) for nm in names]
    elif isinstance(sample_weight, (list, tuple)) and len(specs) > 1:
        if len(sample_weight) != len(specs):
            raise ValueError(f"sample_weight has {len(sample_weight)} entries for {len(specs)} outputs")
        sws = list(sample_weight)
    else:
        sws = [sample_weight] * len(specs)
    if class_weight is not None:
        if not isinstance(class_weight, dict):
            raise TypeError("class_weight must be a dict {class index: weight}")
        # 0-d arrays and tensors as the numbers they hold (dict(enumerate(torch.tensor([1., 2.]))))
        class_weight = {_item(k): _item(v) for k, v in class_weight.items()}
        for k, v in class_weight.items():
            if not is_int(k) and not (isinstance(k, (float, np.floating)) and float(k).is_integer()):
                raise TypeError(f"class_weight keys must be class indices, got {k!r}")
            if not is_number(v) or not math.isfinite(v) or v < 0:
                raise ValueError(f"class_weight values must be finite and >= 0, got {v!r} for class {k}")
    out = []
    given_n = n
    for spec, loss, sw, y in zip(specs, losses, sws, ys):
        if y is None or loss is None:          # (an output without a loss: its targets feed metrics only)
            out.append(None)
            continue
        n = len(y) if given_n is None else given_n      # a batch whose inputs' rows differ: the target's
        if sw is None:
            w = np.ones((n, 1), dtype=np.float32)
        else:
            w = as_real_array(sw, "sample_weight").astype(np.float64)
            cells = int(np.prod(y.shape[1:])) if y.ndim > 1 and not spec.sparse else 1
            # the losses of one sample for a loss per row (cross-entropy): one per step of a sequence
            steps = (y.size // max(n, 1) if spec.sparse else
                     int(np.prod(y.shape[1:-1])) if y.ndim > 2 else 1)
            given = int(np.prod(w.shape[1:])) if w.ndim >= 2 else 1
            if w.ndim == 1 or (w.ndim == 2 and w.shape[1] == 1):
                if w.shape[0] != n:
                    raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
                w = w.reshape(n, 1)
            elif not loss.elementwise and w.shape[0] == n and steps > 1 and given == steps:
                # a weight per step (Keras's temporal weights: padded tokens weighted 0) of a loss per
                # row, as each step's loss is weighted
                w = w.reshape(n, steps)
            elif loss.elementwise and w.shape[0] == n and 1 < given < cells and cells % given == 0 and \
                    tuple(w.shape[1:]) == tuple(y.shape[1:w.ndim]):
                # a weight per step of an element-wise loss: each step's values weighted by it (Keras
                # broadcasts the weights over the trailing axes)
                w = np.repeat(w.reshape(n, given), cells // given, axis=1)
            elif w.ndim == 2 and w.shape == (n, cells) and cells > 1:
                if not loss.elementwise:
                    raise ValueError(f"per-cell sample_weight needs an element-wise loss (mse, mae, huber, "
                                     f"binary_crossentropy), not {loss.name}")
            else:
                shapes = f"({n},) or ({n}, {cells})" if loss.elementwise else \
                    f"({n},)" + (f" or ({n}, {steps}) (one per step)" if steps > 1 else "")
                raise ValueError(f"sample_weight must have shape {shapes}, got {w.shape}")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError("sample_weight must be finite and non-negative")
            if np.any(np.abs(w) > np.finfo(np.float32).max):
                raise ValueError("sample_weight values are too large for float32")
        if class_weight is not None:
            cls = _class_of_rows(y, spec)
            cw = np.array([float(class_weight.get(int(c), 1.0)) for c in cls], dtype=np.float64)
            w = w * cw.reshape(n, 1)
        out.append(np.ascontiguousarray(w, dtype=np.float32))
    return out


# --- datasets ----------------------------------------------------------------------------

def epoch_rows(holder, n, batch_size, steps, new_order):
    """The rows of each batch of one epoch over ``n`` rows, at most ``steps`` batches: a slice,
    or indices into the permutation ``new_order()`` gives (None: the rows in order).  With
    ``holder.go_on`` an epoch goes on where the last one stopped (``holder._cursor``: the order
    and the next batch), as Keras's epoch iterator does with steps_per_epoch, and a new pass
    (a new order) starts once every batch has been given."""
    total = -(-n // batch_size)
    order, first = holder._cursor if holder.go_on and holder._cursor is not None else (None, 0)
    if first == 0:
        order = new_order()
    for i in range(first, min(total, first + steps)):
        if holder.go_on:
            holder._cursor = (order, 0 if i + 1 >= total else i + 1)
        lo, hi = i * batch_size, (i + 1) * batch_size
        yield slice(lo, hi) if order is None else order[lo:hi]


class Dataset:
    """One pass over the data per epoch: ``batches(...)`` yields Batch objects;
    ``steps`` is the number of batches per epoch when it is known.  With ``go_on``, an epoch
    of fewer steps than the data has goes on where the last one stopped (Keras's training
    data with steps_per_epoch; its validation data starts again each time)."""

    steps = None
    go_on = False

    def batches(self, epoch, shuffle, rng):
        raise NotImplementedError


class OneBatch(Dataset):
    """One batch as it is (inputs whose rows differ: a batch of disjoint graphs)."""

    steps = 1

    def __init__(self, batch):
        self.batch = batch

    def batches(self, epoch=0, shuffle=False, rng=None):
        yield self.batch


class ArrayDataset(Dataset):
    """Arrays already adapted: xs, ys (or None), ws (or None); batch_size rows a batch.
    With ``stage(xs, training)``, xs are the model's raw inputs and each batch's go through
    it (the host layers that augment in training: new draws each batch); ``training`` says
    in which mode (a validation split's part runs in inference mode)."""

    def __init__(self, xs, ys, ws, n, batch_size, stage=None, training=True):
        self.xs, self.ys, self.ws, self.n = xs, ys, ws, n
        self.stage, self.training = stage, training
        self.batch_size = max(1, min(batch_size, n)) if n else batch_size
        self.steps = -(-n // self.batch_size) if n else 0
        self.go_on = False              # whether an epoch goes on where the last stopped, see limit_steps
        self._cursor = None             # (order, next batch) where the last epoch stopped

    def limit_steps(self, steps):
        """At most ``steps`` batches an epoch (steps_per_epoch, validation_steps).  As Keras's epoch
        iterator does, each epoch then goes on from where the last one stopped, and the data starts
        again (newly shuffled) once every batch has been given; an epoch that reaches the end of the
        data is cut short there."""
        if steps is not None:
            self.steps = min(self.steps, steps)
            self.go_on = True

    def split(self, fraction, tail_batch_size=None):
        """(training part, validation part): the last rows are held out (before shuffling);
        ``tail_batch_size`` is the held-out part's batch size (validation_batch_size)."""
        nv = int(self.n * fraction)
        if nv < 1 or nv >= self.n:
            raise ValueError(f"validation_split={fraction} leaves no rows for training or validation")
        cut = self.n - nv

        def part(arrs, sl):
            return None if arrs is None else [None if a is None else a[sl] for a in arrs]
        head = ArrayDataset(part(self.xs, slice(None, cut)), part(self.ys, slice(None, cut)),
                            part(self.ws, slice(None, cut)), cut, self.batch_size, self.stage, self.training)
        tail = ArrayDataset(part(self.xs, slice(cut, None)), part(self.ys, slice(cut, None)),
                            part(self.ws, slice(cut, None)), nv, tail_batch_size or self.batch_size, self.stage,
                            False)
        return head, tail

    def batches(self, epoch=0, shuffle=False, rng=None):
        if self.stage is None:
            yield from self._batches(shuffle, rng)
            return
        for batch in self._batches(shuffle, rng):
            batch.xs = self.stage(batch.xs, self.training)
            yield batch

    def _batches(self, shuffle, rng):
        for sel in epoch_rows(self, self.n, self.batch_size, self.steps,
                              lambda: rng.permutation(self.n) if shuffle else None):
            yield Batch([a[sel] for a in self.xs],
                        None if self.ys is None else [None if a is None else a[sel] for a in self.ys],
                        None if self.ws is None else [None if a is None else a[sel] for a in self.ws])


class GeneratorDataset(Dataset):
    """Batches from a generator, an iterable (re-iterated each epoch when it can be),
    or a PyDataset / Sequence (``len`` and ``__getitem__``)."""

    def __init__(self, source, adapt, steps=None, with_targets=True):
        self.source = source
        self.adapt = adapt              # item -> Batch
        self.with_targets = with_targets
        self.order = None
        self._it = None
        # with steps given, an epoch goes on where the last stopped (see batches): the iterator and
        # how many items of its pass it has given
        self.go_on = steps is not None
        self._cont = None
        if steps is not None:
            self.steps = steps
        elif _passes_vary(source):
            self.steps = None             # each epoch reads its own pass to its end
        else:
            try:
                self.steps = len(source)
            except TypeError:
                self.steps = None

    def _iterator(self):
        """An iterator over this epoch's items (a generator continues where it stopped;
        a re-iterable source starts again).  Never a wrapping generator: closing one
        would close the user's generator with it."""
        src = self.source
        if hasattr(src, "__getitem__") and hasattr(src, "__len__") and not isinstance(src, (list, tuple)) and \
                _sized(src):
            return _SequenceEpoch(src, self.order)
        if (iter(src) is src or not _sized(src)) and not _torch_loader(src):
            # a generator, or a dataset repeating forever: go on (a torch DataLoader, even over an
            # IterableDataset with no length, starts a new pass each epoch, as Keras's adapter)
            if self._it is None:
                self._it = iter(src)
            return self._it
        return iter(src)

    def batches(self, epoch=0, shuffle=False, rng=None):
        # a PyDataset's batches come in a new order each epoch when shuffling (Keras's fit)
        # a pg.utils.Dataset keeps its own order, as tf.data's does in Keras (it shuffles itself)
        # With steps given, an epoch goes on in the iterator the last one stopped in (Keras's epoch
        # iterator), until the source is used up: a new pass then starts (newly shuffled)
        from pyggml.utils.dataset_utils import Dataset as DataPipeline
        resumed = self._cont is not None
        if resumed:
            it, given = self._cont
            if isinstance(it, _SequenceEpoch):
                it.begin()
        else:
            self.order = rng.permutation(len(self.source)) if shuffle and rng is not None and \
                hasattr(self.source, "__getitem__") and hasattr(self.source, "__len__") and \
                not isinstance(self.source, DataPipeline) else None
            it, given = self._iterator(), 0
        total = self._pass_length(it)
        count = 0
        self._cont = None
        try:
            while self.steps is None or count < self.steps:
                if total is not None and given >= total:
                    break
                try:
                    item = next(it)
                except StopIteration:
                    if resumed and count == 0:      # the pass it went on in had ended: a new one
                        resumed, it, given = False, self._iterator(), 0
                        total = self._pass_length(it)
                        continue
                    self._cont = None
                    break
                count += 1
                given += 1
                if self.go_on and (total is None or given < total) and it is not self._it:
                    self._cont = (it, given)
                else:
                    self._cont = None
                yield self.adapt(item)
        finally:
            if isinstance(it, _SequenceEpoch):
                it.end()

    def _pass_length(self, it):
        """The batches in one pass of ``it`` when known (a sized, re-iterable source), else None."""
        if isinstance(it, _SequenceEpoch):
            return it.n
        if it is self._it:
            return None
        try:
            return len(self.source)
        except TypeError:
            return None


def _passes_vary(source):
    """Whether a pg.utils.Dataset's passes may differ in length (a filter's random draws,
    rejection_resample): an epoch is then its own pass, however long."""
    from pyggml.utils.dataset_utils import Dataset as DataPipeline
    return isinstance(source, DataPipeline) and source._varies()


def _torch_loader(source):
    return any(c.__name__ == "DataLoader" and c.__module__.startswith("torch.utils.data") for c in type(source).__mro__)


def _sized(source):
    """Whether len(source) works (a pg.utils.Dataset that repeats forever has none; one whose
    generator has not ended is read as a stream: its length is not asked for)."""
    if not hasattr(source, "__len__"):
        return True                  # a plain iterable: read until it stops
    from pyggml.utils.dataset_utils import Dataset as DataPipeline
    if isinstance(source, DataPipeline):
        # whether it ends, without reading a pass for its length (a filter's would be drawn twice)
        return source._length is not None and not source._open()
    try:
        len(source)
    except TypeError:
        return False
    return True


class _SequenceEpoch:
    """One epoch over a PyDataset / Sequence: items by index, then its on_epoch_end."""

    def __init__(self, seq, order=None):
        self.seq, self.i, self.order = seq, 0, order
        self.begin()
        self.n = len(seq)        # after on_epoch_begin: this pass's length (a filter's may differ)

    def begin(self):
        if hasattr(self.seq, "on_epoch_begin"):
            self.seq.on_epoch_begin()

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.seq[int(self.order[self.i - 1]) if self.order is not None else self.i - 1]

    def end(self):
        if hasattr(self.seq, "on_epoch_end"):
            self.seq.on_epoch_end()


def _item(v):
    """A 0-d array or tensor (numpy's, torch's) as its Python number; anything else as it is."""
    v = host(v)
    return v.item() if not isinstance(v, (bool, int, float)) and hasattr(v, "item") and np.ndim(v) == 0 else v


def unpack_item(item, with_targets=True):
    """(x, y, sample_weight) of a batch a generator yields; for predict (no targets)
    a bare array or dict is the inputs.  A list is a tuple, as Keras unpacks a batch (a torch
    DataLoader's ``[x, y]``: predict takes its x)."""
    if isinstance(item, list):
        item = tuple(item)
    if isinstance(item, dict) or (not with_targets and not isinstance(item, tuple)):
        return item, None, None
    if not isinstance(item, (list, tuple)) or not 1 <= len(item) <= 3:
        raise ValueError("a data generator must yield (x, y) or (x, y, sample_weight) batches")
    if len(item) == 1:
        return item[0], None, None
    return item[0], item[1], item[2] if len(item) == 3 else None


def is_generator_like(x):
    """A generator, an iterator, a PyDataset/Sequence, or an iterable of batches (not an array)."""
    if x is None or isinstance(x, (np.ndarray, list, tuple, dict)) or np.isscalar(x):
        return False
    if hasattr(x, "__array__") and hasattr(x, "shape"):
        return False                # another library's array (a torch tensor, a DataFrame): one array
    return hasattr(x, "__iter__") or hasattr(x, "__getitem__") and hasattr(x, "__len__")
