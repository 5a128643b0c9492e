"""Calling a layer on arrays (Keras's eager call): ``Dense(3)(np.ones((2, 4)))``
computes it at once, in inference mode unless ``training=True``, on the CPU."""

import numpy as np

from pyggml import _eager, _fold, _wide
from pyggml.core import Tensor
from pyggml.layers import tracing
from pyggml._tensor_arrays import as_ops_result, no_rows_call

__all__ = ["run_layer"]


def run_layer(layer, inputs, kwargs):
    many = isinstance(inputs, (list, tuple))
    arrays = [np.asarray(a) for a in (inputs if many else [inputs])]
    for a in arrays:
        if a.dtype.kind not in "biufUSO" or (a.dtype == object and not _all_strings(a)):
            raise TypeError(f"{type(layer).__name__}: inputs must be arrays of numbers or strings, got dtype "
                            f"{a.dtype}")
    kwargs = dict(kwargs)
    training = bool(kwargs.pop("training", False))
    if not training and not kwargs:
        # a batch of no rows: outputs of no rows, as Keras's (the call on one row of zeros, cut)
        empty = no_rows_call(inputs, lambda one: run_layer(layer, one, {}))
        if empty is not None:
            return empty

    five = any(a.ndim >= 5 for a in arrays)
    given = arrays
    if five:
        # volumes go in folded, (batch * D, H, W, C), their Keras shapes beside them (pyggml._fold)
        arrays = [a.reshape(_fold.graph_shape(a.shape)) for a in arrays]

    nest = []
    plain = []

    def flat(out):
        # Python values beside the tensors (focal modulation's x, height, width, channels): as they are
        if isinstance(out, (list, tuple)) and any(_python_value(o) for o in out) and \
                not all(_python_value(o) for o in out):
            plain.append((type(out), [(i, o) for i, o in enumerate(out) if _python_value(o)], len(out)))
            out = type(out)(o for o in out if not _python_value(o))
            if len(out) == 1:
                return flat(out[0])
        # a nest of outputs (a dict; a tuple holding a dict: CaiT's attention maps): its leaves, rebuilt after
        if isinstance(out, dict) or \
                (isinstance(out, (list, tuple)) and any(isinstance(o, (list, tuple, dict)) for o in out)):
            nest.append(tracing.nest_template(out))
            return tracing.flat_leaves(out)
        known = layer.__dict__.get("_nested_outputs")      # (flattened already: traced on nodes before)
        if known is not None and isinstance(out, (list, tuple)):
            nest.append(known)
        return out

    def graph(*tensors):
        if five:
            # folded volumes (pyggml._fold): their Keras shapes go with them
            with _fold.pending([a.shape for a in given]):
                out = flat(_made_volumes(layer(list(tensors) if many else tensors[0], training=training,
                                               **kwargs)))
        else:
            out = flat(_made_volumes(layer(list(tensors) if many else tensors[0], training=training, **kwargs)))
        from pyggml import _scope
        b = _scope.current()
        b.kept = tensor_attributes(layer, (b.ctx, b.in_ctx))
        return out
    losses = []
    out = _eager.evaluate(graph, arrays, training=training, losses=losses)
    if five or layer.takes_5d is not False:
        out = _unfolded(layer, given, out)
    if nest:
        out = tracing.rebuild(nest[-1], [as_ops_result(o) for o in out])
    if plain:
        kind, values, n = plain[-1]
        tensors = iter(out if isinstance(out, (list, tuple)) and n - len(values) > 1 else [out])
        given = dict(values)
        out = kind(given[i] if i in given else as_ops_result(next(tensors)) for i in range(n))
    # Keras's layer.losses after a call: this call's losses, by the layer that added them
    from pyggml.layers.weight_rules import record_call_losses
    record_call_losses(layer, losses)
    return as_ops_result(out)       # TensorFlow's eager .numpy() answers, as the ops' results


def tensor_attributes(layer, contexts, closed_too=False):
    """[(object, attribute, tensor)]: the tensors of this graph (in ``contexts``; None: of any) that ``layer``
    and the layers in it keep as attributes (FocalNet's ``self.gates`` set in call, read after
    an eager call to plot them): the eager call gives them their values, as Keras's does."""
    found, seen = [], set()

    def visit(obj):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for k, v in list(obj.__dict__.items()):
            t = v.t if type(v) is _wide.Wide else v
            if isinstance(t, Tensor) and not k.startswith("__") and (closed_too or not t.closed) and \
                    (contexts is None or any(t.ctx is c for c in contexts)):
                found.append((obj, k, v))
        subs = list(obj.__dict__.get("_sublayers", {}).values())
        if "_topology" in obj.__dict__ or "_stack" in obj.__dict__:
            try:
                subs += list(obj.layers)           # a Sequential's or functional model's
            except Exception:
                pass
        for sub in subs:
            if hasattr(sub, "__dict__"):
                visit(sub)
    visit(layer)
    return found


def _all_strings(a):
    """An object array of str and bytes only (the strings a StringLookup inside the call reads)."""
    return all(isinstance(v, (str, bytes)) for v in a.reshape(-1))


def _python_value(v):
    return v is None or isinstance(v, (bool, int, float, str, np.integer, np.floating))


def _made_volumes(out):
    """A call that made volumes (a custom call's 5-D result, folded and noted: pyggml._fold):
    those come back in their 5-D shapes (as wide tensors)."""
    return _wide.volumes_of(out, _fold.noted)


def _unfolded(layer, given, out):
    """The results of a layer on volumes (they come back folded) in their Keras shapes: the
    layer's output shapes where it says them, else a folded result stays 5-D."""
    batch = given[0].shape[0]
    vol = next((a.shape for a in given if a.ndim >= 5), None)
    depth = None if vol is None else _fold.depth(vol)
    outs = out if isinstance(out, list) else [out]
    said = _fold.said_shapes(layer, [a.shape for a in given]) or []
    shapes = list(said[:len(outs)]) + [None] * (len(outs) - len(said))
    done = []
    for o, s in zip(outs, shapes):
        if s is not None and None not in s[1:] and o.size == batch * int(np.prod(s[1:])):
            o = o.reshape((batch,) + tuple(s[1:]))       # (another number of rows: Concatenate(axis=0))
        elif depth is not None and o.ndim == 4 and o.shape[0] == batch * depth and \
                not layer.sees_whole_volumes():
            # (a custom call's volumes are noted where made: a result of batch * depth rows there is
            # 4-D, its items folded into the batch, as Keras's ops.reshape(x, (-1, h, w, c)))
            o = o.reshape((batch,) + tuple(vol[1:-3]) + o.shape[1:])
        done.append(o)
    return done if isinstance(out, list) else done[0]
