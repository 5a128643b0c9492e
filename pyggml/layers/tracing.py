"""Output shapes found by running a layer's call on shapes alone.

The layer is called on tensors of a scratch context that holds metadata only
(no memory is allocated, nothing is computed); its weights, constants and
masks get tensors of the right shapes there.  This also builds the layers it
uses inside its call.  A batch of ``_BATCH`` rows stands for the batch and
``_LENGTH`` for any variable length; output dims equal to those map back to None.
"""

import threading

from pyggml import _fold, _scope
from pyggml.core import Context
from pyggml.errors import ContextFullError

__all__ = ["on_shapes", "output_shapes", "output_mask_flags", "generalized", "nest_template", "flat_leaves", "rebuild"]

# a batch of _BATCH rows and variable lengths of _LENGTH: primes no real feature dimension is
# likely to equal by chance, so that a sublayer called on a tensor whose batch moved to another
# axis (ops.transpose) records that axis as variable, as Keras's symbolic None does
_BATCH = 97
_FOLDS = 2520           # lcm(1..10): a second stand-in batch of 97 * 2520 rows divides by any k up to 10
_LENGTH = 113
_LENGTH_2 = 127         # a second trace's variable length: output dims that change with it vary


class _Trace(threading.local):
    """The stand-ins of the trace running in this thread (a retry swaps them for its own run):
    per thread, so that two threads building models at once never see each other's."""
    batch = _BATCH
    length = _LENGTH


_now = _Trace()


class _ShapeOnly:
    """The builder protocol of pyggml._scope, over a metadata-only context."""

    training = False
    fused_ok = True        # shapes only: the fused ops make the fewest tensors (pyggml._scope.fused)
    shape_only = True      # Layer._build_once: a length of _LENGTH here is a variable one

    def __init__(self, n_tensors):
        self.ctx = Context(n_tensors=n_tensors, no_alloc=True)
        self.cache = {}
        self._vars = {}

    def tensor_of(self, variable):
        t = self._vars.get(id(variable))
        if t is None:
            t = self._vars[id(variable)] = (self.ctx.new_tensor(variable.store_shape), variable)
        return t[0]

    def constant(self, array, dtype="float32"):
        return self.ctx.new_tensor(array.shape or (1,), dtype="i32" if dtype == "int32" else "f32")

    def derived_input(self, source, fn, shape, dtype):
        if source.op != "NONE":
            raise ValueError("this op reads its labels or indices on the host, so they must be data fed to the graph "
                             "(a model input, y_true), not computed in it")
        return self.ctx.new_tensor(shape, dtype="i32" if dtype == "int32" else "f32")

    def random_keep_mask(self, shape, rate):
        return self.ctx.new_tensor(shape)

    def random_values(self, shape, draw, dtype="float32"):
        return self.ctx.new_tensor(shape, dtype="i32" if dtype == "int32" else "f32")

    def add_update(self, variable, tensor):
        pass

    def add_metric_update(self, metric, args, kwargs):
        pass                 # shapes only: nothing is computed

    def add_loss(self, tensor, layer=None):
        # noted, so that a model's eager call knows to compute its losses (model.losses)
        if layer is not None:
            layer.__dict__["_adds_losses"] = True

    def free(self):
        self.ctx.free()


def on_shapes(fn, n_tensors=4096):
    """``fn(builder)`` run in a metadata-only scope (nothing allocated or computed), for what
    it builds: the layers a call uses are built on their first call, before a graph holds
    their weights."""
    b = _ShapeOnly(n_tensors)
    try:
        with _scope.entered(b):
            return fn(b)
    finally:
        b.free()


def generalized(shape):
    """A shape met while tracing with _LENGTH (variable lengths) and _BATCH (the batch, moved off
    axis 0) written as None (a list
    or dict of shapes too), as a sublayer built there records it."""
    if isinstance(shape, dict):
        return {k: generalized(v) for k, v in shape.items()}
    if isinstance(shape, list):
        return [generalized(v) for v in shape]
    if isinstance(shape, tuple):
        return tuple(None if (i > 0 and d in (_LENGTH, _LENGTH_2, _now.batch)) else d for i, d in enumerate(shape))
    return shape


def _keras_concrete(node):
    """The node's shape with its batch (the model's fixed one, Input(batch_size=...), or _BATCH)
    and variable lengths made concrete."""
    return (node.batch_size or _now.batch,) + tuple(_now.length if d is None else d for d in node.feature_shape)


def _concrete(node):
    """The graph shape of a scratch tensor for ``node`` (a 5-D one folded: pyggml._fold)."""
    return _fold.graph_shape(_keras_concrete(node))


def _masks(b, nodes):
    """Scratch padding masks (batch, steps) for the nodes that carry one (Node.has_mask), so
    that a layer's call sees a mask at tracing time as it will in the graph; None if none do."""
    masks = [b.ctx.new_tensor(_concrete(n)[:2]) if getattr(n, "has_mask", False) and n.feature_shape else None
             for n in nodes]
    return masks if any(m is not None for m in masks) else None


def output_mask_flags(layer, inputs, kwargs, n_outputs):
    """Whether each output of ``layer(inputs)`` carries a padding mask (Layer.output_mask on
    scratch tensors: a layer's compute_mask, or masks passed through)."""
    nodes = inputs if isinstance(inputs, list) else [inputs]
    in_flags = [getattr(n, "has_mask", False) for n in nodes]
    # the class that first defines compute_mask (Layer's pass-through) against the layer's own
    root = next(c for c in reversed(type(layer).__mro__) if "compute_mask" in c.__dict__)
    spread = bool(kwargs.get("_spread")) and isinstance(inputs, list)
    if type(layer).compute_mask is root.compute_mask:
        # (several positional tensors: Keras passes the first one's mask on)
        return [bool(layer.supports_masking and (in_flags[0] if spread else any(in_flags)))] * n_outputs
    b = _ShapeOnly(4096)
    try:
        with _scope.entered(b):
            xs = [b.ctx.new_tensor(_concrete(n), dtype="i32" if n.dtype == "int32" else "f32") for n in nodes]
            masks = _masks(b, nodes)
            arg = xs if isinstance(inputs, list) else xs[0]
            m_arg = None if masks is None else (masks if isinstance(inputs, list) else masks[0])
            om = layer.output_mask(arg, m_arg, spread)
    except Exception:       # a compute_mask that needs more than shapes: no mask known here
        return [False] * n_outputs
    finally:
        b.free()
    oms = list(om) if isinstance(om, (list, tuple)) else [om] * n_outputs
    return [m is not None for m in oms][:n_outputs] + [False] * max(0, n_outputs - len(oms))


def output_shapes(layer, inputs, kwargs, with_masks=False):
    """(Keras output shape, or a list of them; [dtype, ...]) of ``layer(inputs, **kwargs)``;
    with_masks: also whether each output carries a padding mask.  With inputs of variable
    lengths, the call is traced a second time with another length: an output dim that changes
    with it varies (None), also where it is not the length itself (an upsampling's 2 * length)."""
    result = _output_shapes(layer, inputs, kwargs, with_masks)
    nodes = inputs if isinstance(inputs, list) else [inputs]
    if not any(d is None for n in nodes for d in n.feature_shape):
        return result
    _now.length = _LENGTH_2
    try:
        again = _output_shapes(layer, inputs, kwargs, with_masks)
    except Exception:                   # a call that takes only some lengths: the first trace's shapes
        return result
    finally:
        _now.length = _LENGTH

    def merge(a, b):
        if isinstance(a, list):
            return [merge(x, y) for x, y in zip(a, b)]
        if len(a) != len(b):
            return a
        return tuple(None if (x is None or y is None or x != y) else x for x, y in zip(a, b))
    return (merge(result[0], again[0]),) + tuple(result[1:])


def nest_template(out):
    """A nest of outputs as a template of leaf indices (models.functional's form: an int, or
    {"list": [...], "tuple": bool} / {"dict": [[key, ...], ...]}; {"none": True} for a None in
    it, a call's ``return logits, None``)."""
    counter = [0]

    def walk(v):
        if v is None:
            return {"none": True}
        if isinstance(v, dict):
            return {"dict": [[k, walk(x)] for k, x in v.items()]}
        if isinstance(v, (list, tuple)):
            return {"list": [walk(x) for x in v], "tuple": isinstance(v, tuple)}
        counter[0] += 1
        return counter[0] - 1
    return walk(out)


def flat_leaves(out):
    """The leaves of a nest of outputs, in the template's order."""
    if isinstance(out, dict):
        return [leaf for v in out.values() for leaf in flat_leaves(v)]
    if isinstance(out, (list, tuple)):
        return [leaf for v in out for leaf in flat_leaves(v)]
    return [] if out is None else [out]


def rebuild(template, values):
    """The nest of ``template`` with its leaves taken from ``values``."""
    if isinstance(template, int):
        return values[template]
    if template.get("none"):
        return None
    if "dict" in template:
        return {k: rebuild(v, values) for k, v in template["dict"]}
    items = [rebuild(v, values) for v in template["list"]]
    return tuple(items) if template.get("tuple") else items


def _refuse_leaked_volume(layer, out, nodes, before):
    """A call on 4-D (or smaller) inputs that made a volume inside (a Reshape to 5-D) and returns
    a tensor computed from it: its rows are the batch times the volume's depth, which no output
    shape can say; refused, where the result would silently have the wrong batch."""
    reg = _fold._registry()
    if not reg or len(reg) <= before:
        return False
    batch = nodes[0].batch_size or _now.batch
    for t in (out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else [out]):
        if hasattr(t, "shape") and t not in reg and len(t.shape) >= 1 and t.shape[0] > batch and \
                t.shape[0] % batch == 0:
            raise ValueError(f"{type(layer).__name__}'s call made a 5-D tensor (a volume) and returns a tensor computed "
                             f"from it: pyggml keeps volumes folded into the batch (ggml has four dimensions), so "
                             f"ops on one in a call see (batch * depth) rows; return the volume layer's own output, "
                             f"or reshape back to at most 4 dimensions (batch included) with a layer (Reshape) first")
    return True


def _mismatch_off_the_batch(message, batch):
    """True for a broadcast error whose mismatched axes do not hold the stand-in batch: the
    batch size is not its cause (the shapes disagree elsewhere)."""
    import re
    m = re.search(r"shapes \(([^)]*)\) and \(([^)]*)\) do not broadcast", message)
    if m is None:
        return False
    a, b = ([int(v) for v in g.replace(" ", "").split(",") if v] for g in m.groups())
    bad = [(x, y) for x, y in zip(reversed(a), reversed(b)) if x != y and 1 not in (x, y)]
    return bool(bad) and all(batch not in pair for pair in bad)


def _output_shapes(layer, inputs, kwargs, with_masks=False):
    nodes = inputs if isinstance(inputs, list) else [inputs]
    variable = any(d is None for n in nodes for d in n.feature_shape)
    n_tensors = 4096
    while True:
        b = _ShapeOnly(n_tensors)
        try:
            with _scope.entered(b):
                xs = [b.ctx.new_tensor(_concrete(n), dtype="i32" if n.dtype in ("int32", "string") else "f32")
                      for n in nodes]
                for t, n in zip(xs, nodes):
                    if n.dtype == "string":
                        _scope.mark_strings(b, t)
                arg = xs if isinstance(inputs, list) else xs[0]
                masks = _masks(b, nodes)
                m_arg = None if masks is None else (masks if isinstance(inputs, list) else masks[0])
                call_kwargs = dict(kwargs)
                if m_arg is not None and "mask" not in call_kwargs:
                    call_kwargs["mask"] = m_arg
                five = next((n for n in nodes if len(n.feature_shape) >= 4), None)
                known = None
                volumes_before = len(_fold._registry() or ())
                if five is not None:
                    with _fold.pending([_keras_concrete(n) for n in nodes]):
                        out = layer(arg, **call_kwargs)
                    # the Keras shapes of the volumes it gives, as the layers that made them said
                    known = _fold.noted(out if isinstance(out, (list, tuple)) else [out])
                else:
                    out = layer(arg, **call_kwargs)
                    if _refuse_leaked_volume(layer, out, nodes, volumes_before):
                        known = _fold.noted(out if isinstance(out, (list, tuple)) else [out])
                flags = None
                if with_masks:
                    n_out = len(out) if isinstance(out, (list, tuple)) else 1
                    try:
                        om = layer.output_mask(arg, m_arg, bool(call_kwargs.get("_spread")))
                        oms = list(om) if isinstance(om, (list, tuple)) else [om] * n_out
                        flags = [m is not None for m in oms][:n_out] + [False] * max(0, n_out - len(oms))
                    except Exception:     # a compute_mask that needs more than shapes
                        flags = [False] * n_out
            if isinstance(out, (list, tuple)) and any(isinstance(o, (list, tuple, dict)) or o is None for o in out):
                # a nest of outputs (CaiT's (logits, {"block_0_att": attn})): its leaves are the
                # outputs, its shape kept for the nodes and the graph's values (Layer.nest_outputs)
                object.__setattr__(layer, "_nested_outputs", nest_template(out))
                out = flat_leaves(out)
            elif isinstance(out, dict):
                # a call returning a dict (Keras's): its values are the outputs, its keys kept for
                # the nodes (Layer._call_symbolic gives them back as a dict)
                object.__setattr__(layer, "_dict_output_keys", list(out))
                out = list(out.values())
            outs = out if isinstance(out, (list, tuple)) else [out]
            shapes = []
            for t, k in zip(outs, known or [None] * len(outs)):
                s = list(t.shape)
                if _fold.folds(k):
                    s = list(k)                                                 # a volume, as its layer said
                elif five is not None and len(s) == 4 and s[0] == _now.batch * _fold.depth(_keras_concrete(five)) and \
                        not layer.sees_whole_volumes():
                    s = list(_fold.unfold_shape(s, _keras_concrete(five)))     # still 5-D
                if not s:
                    raise ValueError(f"{type(layer).__name__}'s call returns a value without a batch axis "
                                     f"({type(t).__name__} of shape ()): a layer's output in a model has one row "
                                     f"per sample")
                s[0] = None
                if variable:
                    s = [None if (i > 0 and d == _now.length) else d for i, d in enumerate(s)]
                shapes.append(tuple(s))
            dtypes = ["int32" if t.dtype == "int32" else "float32" for t in outs]
            result = (shapes if isinstance(out, (list, tuple)) else shapes[0]), dtypes
            return result + (flags,) if with_masks else result
        except ContextFullError:
            if n_tensors >= 1 << 22:
                raise
            n_tensors *= 8
        except (ValueError, TypeError) as e:
            if _now.batch == _BATCH and all(n.batch_size is None for n in nodes) and str(_BATCH) in str(e) and \
                    isinstance(e, ValueError):
                # a call that folds k items into (out of) the batch (ops.reshape(x, (-1, k, n))): found again
                # on a stand-in batch that many k divide, as Keras's symbolic batch allows any
                _now.batch = _BATCH * _FOLDS
                try:
                    return _output_shapes(layer, inputs, kwargs, with_masks)
                except (ValueError, TypeError, ContextFullError):
                    pass                                  # the first error says more
                finally:
                    _now.batch = _BATCH
            if all(n.batch_size is None for n in nodes) and hasattr(e, "add_note") and str(_now.batch) in str(e) \
                    and "volume" not in str(e) and "at most 4 dimensions" not in str(e) and \
                    not _mismatch_off_the_batch(str(e), _now.batch):
                e.add_note(f"(pyggml met this running {type(layer).__name__}'s call on a stand-in batch of {_now.batch} "
                           f"rows to find its output shape, where Keras's batch is symbolic: a call whose shapes "
                           f"depend on the batch size needs it fixed, keras.Input(shape, batch_size=N))")
            raise
        finally:
            b.free()
