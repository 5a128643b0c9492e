"""Attention (Luong-style, dot-product) and AdditiveAttention (Bahdanau-style), Keras's layers.

Called on ``[query, value]`` or ``[query, value, key]`` (the key defaults to the
value), each ``(batch, steps, dim)``; the output is ``(batch, query_steps,
value_dim)``: for each query step, the softmax over the key steps of the
scores, applied to the values.

- ``Attention(use_scale=False, score_mode="dot", dropout=0.0, seed=None)``:
  scores ``q . k`` ("dot") or ``sum(tanh(q + k))`` ("concat"), times a learned
  scalar ``scale`` (initially 1) when ``use_scale``; "concat" has a learned
  scalar ``concat_score_weight`` (initially 1) times the sum, and with
  ``use_scale`` the scale goes inside the tanh, as Keras.
- ``AdditiveAttention(use_scale=True, dropout=0.0)``: scores
  ``sum(scale * tanh(q + k))``, ``scale`` a learned vector of the query's dim
  (glorot-uniform), or ones without ``use_scale``.

Call arguments as Keras: ``mask=[query_mask, value_mask]`` ((batch, steps), true
for a real step; a padded value step gets no attention, a padded query step's
output is zero), ``return_attention_scores=True`` (then ``[output, scores]``,
the scores being the attention distribution, (batch, query_steps,
value_steps)), ``use_causal_mask=True`` (query step i attends to key steps
j <= i only), ``training``.  Masks reach the layer from a mask-making layer
(``Embedding(mask_zero=True)``) in a model, or are given: model nodes in a
functional model (``pg.Input((steps,))``, 1 or nonzero for a real step; they
become inputs of the call, after the data), arrays when the layer is called on
arrays, tensors inside another layer's ``call``.  The output's mask is the
query's.  A query step whose every key step is masked gets an unspecified
result, as in Keras.

Beyond Keras: a single input ``layer(x)`` is self-attention (query = value =
key = x), so the layers also work in a ``Sequential``.
"""

import numpy as np

from pyggml import activations, ops
from pyggml._validation import check_bool, check_fraction
from pyggml.core import Tensor
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.node import Node
from pyggml.saving.object_registration import register_builtin

__all__ = ["Attention", "AdditiveAttention"]

_BLOCKED = 1e9          # Keras's: the score of a masked position is lowered by this much
_CALL_ARGS = {"training", "mask", "return_attention_scores", "use_causal_mask", "_mask_inputs"}
_NOT_GIVEN = object()


class _BaseAttention(Layer):
    """What Attention and AdditiveAttention share: inputs, masks, softmax, dropout."""

    supports_masking = True
    float_inputs = True

    def __init__(self, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.dropout = check_fraction("dropout", dropout, high_open=True)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"{type(self).__name__}: seed must be an int or None, got {seed!r}")
        self.seed = None if seed is None else int(seed)

    # --- calling -------------------------------------------------------------------------
    def __call__(self, inputs, *args, **kwargs):
        name = type(self).__name__
        if args:
            raise TypeError(f"{name} is called on a list of inputs, [query, value] or [query, value, key]; "
                            f"other arguments go by keyword ({sorted(_CALL_ARGS)})")
        unknown = set(kwargs) - _CALL_ARGS
        if unknown:
            raise TypeError(f"{name}: unexpected call arguments {sorted(unknown)}; it takes {sorted(_CALL_ARGS)}")
        if isinstance(inputs, tuple):
            inputs = list(inputs)
        for k in ("return_attention_scores", "use_causal_mask"):
            if k in kwargs:
                kwargs[k] = check_bool(k, kwargs[k])
        mask = kwargs.get("mask")
        if mask is not None and not isinstance(inputs, list) and not isinstance(mask, (list, tuple)):
            pass                        # self-attention's one input and its mask (of query and value)
        elif mask is not None:
            if isinstance(mask, tuple):
                mask = kwargs["mask"] = list(mask)
            if not isinstance(mask, list) or not 2 <= len(mask) <= 3:
                raise ValueError(f"{name}: mask must be a list [query_mask, value_mask], got {type(mask).__name__}"
                                 f"{'' if not isinstance(mask, list) else f' of {len(mask)} entries'}")
            if any(isinstance(m, Node) for m in mask):
                # masks of a functional model (Input nodes, or layers' outputs) become inputs of
                # the call, after the data; _mask_inputs says which masks they are (0 query, 1 value)
                if not isinstance(inputs, list) or not all(isinstance(t, Node) for t in inputs) or \
                        not all(m is None or isinstance(m, Node) for m in mask):
                    raise TypeError(f"{name}: masks given as model nodes go with inputs that are model nodes "
                                    f"(and every mask a node or None)")
                slots = [i for i, m in enumerate(mask[:2]) if m is not None]
                inputs = inputs + [mask[i] for i in slots]
                del kwargs["mask"]
                kwargs["_mask_inputs"] = slots
        slots = kwargs.get("_mask_inputs") or []
        if not isinstance(slots, list) or any(i not in (0, 1) for i in slots) or \
                (slots and not isinstance(inputs, list)):
            raise ValueError(f"{name}: _mask_inputs={slots!r} must list the masks given as inputs (0 query, 1 value)")
        if isinstance(inputs, list) and not 2 <= len(inputs) - len(slots) <= 3:
            raise ValueError(f"{name} layer must be called on a list of inputs, namely [query, value] or "
                             f"[query, value, key]; got {len(inputs) - len(slots)} inputs")
        # build and compute_output_shape see which masks came as inputs, and whether the
        # scores are an output too
        self.__dict__["_call_flags"] = (tuple(slots), kwargs.get("return_attention_scores", False))
        try:
            return super().__call__(inputs, **kwargs)
        finally:
            self.__dict__["_call_flags"] = ((), False)

    def compute_output_shape(self, input_shape):
        """(batch, query_steps, value_dim); with return_attention_scores, also the scores'
        (batch, query_steps, value_steps)."""
        q, v, _ = self._split_shapes(self._data_shapes(input_shape))
        slots = self.__dict__.get("_call_flags", ((), False))[0]
        for slot, shape in zip(slots, input_shape[len(input_shape) - len(slots):] if slots else ()):
            steps = (q if slot == 0 else v)[1]
            if len(shape) != 2 or None not in (steps, shape[1]) and shape[1] != steps:
                what = "query" if slot == 0 else "value"
                raise ValueError(f"{type(self).__name__}: the {what} mask must have shape (batch, steps) = "
                                 f"(None, {steps}), got {tuple(shape)}")
        out = (q[0], q[1], v[2])
        if self.__dict__.get("_call_flags", ((), False))[1]:
            return [out, (q[0], q[1], v[1])]
        return out

    def _data_shapes(self, input_shape):
        """The shapes of the query, value and key, without those of masks given as inputs."""
        slots = self.__dict__.get("_call_flags", ((), False))[0]
        if slots and isinstance(input_shape, list):
            return input_shape[:len(input_shape) - len(slots)]
        return input_shape

    def _build_once(self, shape):
        # built for the data alone: a call with masks as inputs and one without agree
        super()._build_once(self._data_shapes(shape))

    def _split_shapes(self, input_shape):
        name = type(self).__name__
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        if not 1 <= len(shapes) <= 3:
            raise ValueError(f"{name} layer must be called on a list of inputs, namely [query, value] or "
                             f"[query, value, key]; got {len(shapes)} inputs")
        for s in shapes:
            if len(s) != 3:
                raise ValueError(f"{name} expects inputs of shape (batch, steps, dim), got {tuple(s)}")
        q = tuple(shapes[0])
        v = tuple(shapes[1]) if len(shapes) > 1 else q
        k = tuple(shapes[2]) if len(shapes) > 2 else v
        if None not in (k[1], v[1]) and k[1] != v[1]:
            raise ValueError(f"{name}: key and value must have the same number of steps, got key {k} and "
                             f"value {v}")
        if None in (q[2], k[2], v[2]):
            raise ValueError(f"{name} needs known last dimensions, got query {q}, value {v}, key {k}")
        if q[2] != k[2]:
            raise ValueError(f"{name}: the query's and the key's last dimensions must be equal (scores compare "
                             f"them), got query {q} and key {k}")
        return q, v, k

    def compute_mask(self, inputs, mask=None):
        """The query's mask (Keras's)."""
        given = self.__dict__.pop("_given_query_mask", _NOT_GIVEN)       # (not kept: it holds a graph)
        if given is not _NOT_GIVEN:
            return given
        return mask[0] if isinstance(mask, list) else mask

    # --- the graph -------------------------------------------------------------------------
    def _mask_tensor(self, m, shape, what):
        """A (batch, steps) float mask, 1 for a real step, as a tensor."""
        if m is None:
            return None
        if not isinstance(m, Tensor):
            a = np.asarray(m)
            if a.dtype == object or a.dtype.kind not in "biuf":
                raise TypeError(f"{type(self).__name__}: {what} must hold booleans or numbers, got dtype {a.dtype}")
            if a.shape != tuple(shape):
                raise ValueError(f"{type(self).__name__}: {what} must have shape {tuple(shape)} (batch, steps), "
                                 f"got {a.shape}")
            return ops.constant((a != 0).astype(np.float32))
        if tuple(m.shape) != tuple(shape):
            raise ValueError(f"{type(self).__name__}: {what} must have shape {tuple(shape)} (batch, steps), "
                             f"got {tuple(m.shape)}")
        return contiguous(ops.cast(m, "f32") if m.dtype != "f32" else m)

    def call(self, inputs, training=None, mask=None, return_attention_scores=False, use_causal_mask=False,
             _mask_inputs=None):
        xs = inputs if isinstance(inputs, list) else [inputs]
        if _mask_inputs:
            # masks that came as inputs (a functional model's mask nodes), after the data
            given = xs[len(xs) - len(_mask_inputs):]
            xs = xs[:len(xs) - len(_mask_inputs)]
            mask = [None, None]
            for slot, m in zip(_mask_inputs, given):
                mask[slot] = m
        # compute_mask, asked next for this call's output mask, gives this query mask
        self.__dict__["_given_query_mask"] = (mask[0] if mask else None) if _mask_inputs else _NOT_GIVEN
        q = contiguous(xs[0])
        v = contiguous(xs[1]) if len(xs) > 1 else q
        k = contiguous(xs[2]) if len(xs) > 2 else v
        self._split_shapes([tuple(t.shape) for t in (q, v, k)])
        batch = max(q.shape[0], v.shape[0], k.shape[0])
        if batch > 1:
            # a batch of 1 broadcasts, as Keras's matmul does (the Perceiver's learned latent query)
            q, v, k = (contiguous(ops.broadcast_to(t, (batch,) + tuple(t.shape[1:]))) if t.shape[0] == 1 else t
                       for t in (q, v, k))
        b, tq, tv = q.shape[0], q.shape[1], v.shape[1]
        if not b == v.shape[0] == k.shape[0]:
            raise ValueError(f"{type(self).__name__}: query, value and key must have the same batch size, got "
                             f"{b}, {v.shape[0]} and {k.shape[0]}")
        if isinstance(mask, tuple):
            mask = list(mask)
        if mask is not None and not isinstance(mask, list):
            mask = [mask] if len(xs) == 1 else None     # a single input's propagated mask: its own
        q_mask = v_mask = None
        if mask:
            q_mask = self._mask_tensor(mask[0], (b, tq), "the query mask")
            if len(xs) == 1:
                v_mask = q_mask
            elif len(mask) > 1:
                v_mask = self._mask_tensor(mask[1], (b, tv), "the value mask")
        scores = self._scores(q, k)                                   # (b, tq, tv)
        # 1 where a query step may attend to a key step: the value mask, and j <= i when causal
        allowed = None
        if v_mask is not None:
            allowed = ops.reshape(v_mask, (b, 1, tv))
        if use_causal_mask:
            causal = ops.constant(np.tril(np.ones((tq, tv), dtype=np.float32)))
            allowed = causal if allowed is None else allowed * causal   # (b, tq, tv)
        if allowed is not None:
            # scores - 1e9 where not allowed (as Keras), broadcast over what allowed lacks
            scores = scores + ops.scale_bias(contiguous(allowed), _BLOCKED, -_BLOCKED)
        weights = activations.softmax(scores)
        if self.dropout > 0:
            weights = ops.dropout(weights, self.dropout, training=training)
        weights = contiguous(weights)
        vt = ops.permute_axes(v, (0, 2, 1))                           # (b, dv, tv)
        out = ops.mul_mat(vt, weights)                                # (b, tq, dv)
        if q_mask is not None:
            out = out * ops.reshape(q_mask, (b, tq, 1))
        if return_attention_scores:
            return [out, weights]
        return out

    def _scores(self, q, k):
        raise NotImplementedError

    def _tanh_sum(self, q, k, inner_scale=None, outer=None):
        """sum over the dim of outer * tanh(inner_scale * (q_i + k_j)): (b, tq, tv)."""
        b, tq, d = q.shape
        tv = k.shape[1]
        summed = ops.reshape(q, (b, tq, 1, d)) + ops.reshape(k, (b, 1, tv, d))       # (b, tq, tv, d)
        if inner_scale is not None:
            summed = summed * inner_scale
        t = activations.tanh(contiguous(summed))
        if outer is not None:
            t = t * outer
        return ops.reshape(ops.sum_rows(contiguous(t)), (b, tq, tv))

    def get_config(self):
        cfg = super().get_config()
        cfg["dropout"] = self.dropout
        cfg["seed"] = self.seed
        return cfg


@register_builtin
class Attention(_BaseAttention):
    """``Attention(use_scale=False, score_mode="dot", dropout=0.0, seed=None)``: Keras's
    dot-product (Luong-style) attention; weights ``scale`` (with ``use_scale``) and
    ``concat_score_weight`` (score_mode "concat"), each of shape (1,)."""

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, **kwargs):
        super().__init__(dropout=dropout, seed=seed, **kwargs)
        self.use_scale = check_bool("use_scale", use_scale)
        if score_mode not in ("dot", "concat"):
            raise ValueError(f"Attention: invalid score_mode {score_mode!r}; expected one of ['dot', 'concat']")
        self.score_mode = score_mode

    def build(self, input_shape):
        self._split_shapes(input_shape)
        self.scale = self.add_weight("scale", (1,), "ones") if self.use_scale else None
        self.concat_score_weight = self.add_weight("concat_score_weight", (1,), "ones") \
            if self.score_mode == "concat" else None

    def _scores(self, q, k):
        if self.score_mode == "dot":
            scores = ops.mul_mat(k, q)                                # (b, tq, tv) = q @ k^T
            return scores * self.scale.graph_tensor() if self.use_scale else scores
        return self._tanh_sum(q, k, self.scale.graph_tensor() if self.use_scale else None,
                              None) * self.concat_score_weight.graph_tensor()

    def get_config(self):
        cfg = super().get_config()
        cfg.update(use_scale=self.use_scale, score_mode=self.score_mode)
        return cfg


@register_builtin
class AdditiveAttention(_BaseAttention):
    """``AdditiveAttention(use_scale=True, dropout=0.0)``: Keras's additive (Bahdanau-style)
    attention; weight ``scale`` of shape (query dim,) with ``use_scale``."""

    def __init__(self, use_scale=True, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        self.use_scale = check_bool("use_scale", use_scale)

    def build(self, input_shape):
        q, _, _ = self._split_shapes(input_shape)
        self.scale = self.add_weight("scale", (q[2],), "glorot_uniform") if self.use_scale else None

    def _scores(self, q, k):
        return self._tanh_sum(q, k, None, self.scale.graph_tensor() if self.use_scale else None)

    def get_config(self):
        cfg = super().get_config()
        cfg["use_scale"] = self.use_scale
        return cfg
