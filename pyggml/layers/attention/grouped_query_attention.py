"""GroupedQueryAttention (Keras's ``keras.layers.GroupQueryAttention``).

Attention with fewer key/value heads than query heads (Ainslie et al. 2023):
``num_key_value_heads`` groups, each key/value head serving
``num_query_heads // num_key_value_heads`` consecutive query heads (query head
``i`` reads key/value head ``i // group``, as Keras repeats them).  One key/value
head is multi-query attention; as many as the query heads is multi-head attention.

Called as Keras's ``gqa(query, value, key=None, query_mask=None, value_mask=None,
key_mask=None, attention_mask=None, return_attention_scores=False,
training=None, use_causal_mask=False)``, as a list ``gqa([query, value(, key)])``,
or on one input for self-attention (``gqa(x)``: this form works in a
``Sequential``).  Inputs are ``(batch, steps, features)``; the query and the
value have the same features; the output is ``(batch, query_steps,
query_features)``; the scores ``(batch, num_query_heads, query_steps,
value_steps)`` (before dropout, as Keras).

Masks, all merged with a logical and (Keras's rule): the query's padding mask
(batch, query_steps), the value's and the key's (batch, value_steps), given as
call arguments or carried by the inputs (``Embedding(mask_zero=True)``,
``Masking``), ``attention_mask`` (batch, query_steps, value_steps) or (query_steps,
value_steps), and ``use_causal_mask``.  A blocked key gets -1e9 added to its
score before the softmax.  In a functional model a mask given as a call argument
is a node (a ``pg.Input``); on arrays, an array; inside a layer's call, a tensor
or an array.

Weights (``Hq`` query heads, ``Hkv`` key/value heads, ``d = head_dim``), each
a linear map in PyTorch's ``(out, in)`` layout, head ``h`` on rows ``[h*d,
(h+1)*d)``:

- ``q_proj.weight`` ``(Hq*d, query_features)``, ``q_proj.bias`` ``(Hq*d,)``
- ``k_proj.weight`` ``(Hkv*d, key_features)``, ``k_proj.bias`` ``(Hkv*d,)``
- ``v_proj.weight`` ``(Hkv*d, value_features)``, ``v_proj.bias`` ``(Hkv*d,)``
- ``out_proj.weight`` ``(query_features, Hq*d)``, ``out_proj.bias`` ``(query_features,)``

Keras's ``get_weights()``/``set_weights(list)`` and the regularizers and
constraints see Keras's EinsumDense layouts (``(in, heads, d)`` kernels, ``(heads,
d)`` biases, an ``(Hq, d, out)`` output kernel).  ``flash_attention`` is accepted
and has no effect here (the scores are always computed); as Keras, it cannot be
combined with ``dropout`` or ``return_attention_scores``.

Keras 3.15's ``use_gate=True`` adds ``gate_proj.weight`` ``(Hq*d, query_features)``
(and ``gate_proj.bias``), between the key's weights and the value's as Keras orders
them: the heads' outputs are multiplied by ``sigmoid(gate_proj(query))`` before the
output projection.  ``sliding_window=w`` lets query step i attend to value steps j with
``|i - j| < w`` only, and'ed with the other masks.  ``seed`` seeds the attention dropout.
A query row that may attend to no key is uniform over the keys (Keras's fused kernel),
all zeros where Keras computes the scores itself (``return_attention_scores=True`` or
``dropout > 0``).
"""

import math

import numpy as np

from pyggml import _scope, activations, ops
from pyggml._validation import check_fraction, check_positive_int
from pyggml.core import Tensor
from pyggml.layers._helpers import contiguous, fused, set_weight_options, weight_options_config
from pyggml.layers.core.quantize import QuantizedProjections
from pyggml.layers.attention.multi_head_attention import MultiHeadAttention, keras315_options
from pyggml.layers.layer import Layer
from pyggml.layers.node import Node
from pyggml.saving.object_registration import register_builtin
from pyggml.variables import Variable

__all__ = ["GroupedQueryAttention"]

_OPTIONS = ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint")
_MASK_NAMES = ("query_mask", "value_mask", "key_mask", "attention_mask")


def _check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"GroupedQueryAttention: {name} must be True or False, got {value!r}")
    return bool(value)


@register_builtin
class GroupedQueryAttention(MultiHeadAttention):
    supports_masking = True

    def __init__(self, head_dim, num_query_heads, num_key_value_heads, dropout=0.0, use_bias=True,
                 sliding_window=None, flash_attention=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, use_gate=False, seed=None, **kwargs):
        if activity_regularizer is not None:
            kwargs["activity_regularizer"] = activity_regularizer
        QuantizedProjections.__init__(self, **kwargs)      # (skips MultiHeadAttention.__init__)
        set_weight_options(self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.head_dim = check_positive_int("head_dim", head_dim, 1 << 16)
        self.num_query_heads = check_positive_int("num_query_heads", num_query_heads, 1 << 12)
        self.num_key_value_heads = check_positive_int("num_key_value_heads", num_key_value_heads, 1 << 12)
        if self.num_query_heads % self.num_key_value_heads:
            raise ValueError(f"GroupedQueryAttention: num_query_heads ({self.num_query_heads}) must be divisible by "
                             f"num_key_value_heads ({self.num_key_value_heads})")
        self.num_repeats = self.num_query_heads // self.num_key_value_heads
        self.dropout = check_fraction("dropout", dropout, high_open=True)
        self.use_bias = bool(use_bias)
        keras315_options(self, sliding_window, flash_attention, use_gate, seed)
        from pyggml import initializers
        initializers.get(kernel_initializer)
        initializers.get(bias_initializer)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        # MultiHeadAttention's names, for the helpers shared with it
        self.num_heads, self.key_dim, self.value_dim, self._out_dim = self.num_query_heads, self.head_dim, \
            self.head_dim, None

    # --- calling ---------------------------------------------------------------------
    def __call__(self, query, value=None, key=None, query_mask=None, value_mask=None, key_mask=None,
                 attention_mask=None, return_attention_scores=False, training=None, use_causal_mask=False, **kwargs):
        given = kwargs.pop("_mask_inputs", None)
        if isinstance(query, (list, tuple)):
            if value is not None or key is not None:
                raise TypeError("GroupedQueryAttention: give either a list [query, value(, key)] or separate "
                                "inputs, not both")
            parts = list(query)
            if given:                               # a rebuilt graph: the masks are the last inputs
                names = given.split(",")
                if len(parts) <= len(names):
                    raise TypeError("GroupedQueryAttention: the inputs do not hold the masks named")
                masks = dict(zip(names, parts[len(parts) - len(names):]))
                parts = parts[:len(parts) - len(names)]
                passed = dict(zip(_MASK_NAMES, (query_mask, value_mask, key_mask, attention_mask)))
                for n in names:
                    if n not in passed:
                        raise TypeError(f"GroupedQueryAttention: unknown mask input {n!r}")
                    if passed[n] is not None:
                        raise TypeError(f"GroupedQueryAttention: {n} was given twice")
                query_mask, value_mask = masks.get("query_mask"), masks.get("value_mask")
                key_mask, attention_mask = masks.get("key_mask"), masks.get("attention_mask")
            if not 1 <= len(parts) <= 3:
                raise ValueError(f"GroupedQueryAttention takes 1 to 3 inputs (query, value, key), got {len(parts)}")
        else:
            parts = [query]
            if key is not None and value is None:
                raise ValueError("GroupedQueryAttention: a key needs a value: call gqa(query, value, key)")
            if value is not None:
                parts.append(value)
            if key is not None:
                parts.append(key)
        unsupported = set(kwargs) - {"mask"}
        if unsupported:
            raise TypeError(f"GroupedQueryAttention: unsupported call arguments {sorted(unsupported)}")
        use_causal_mask = _check_flag("use_causal_mask", use_causal_mask)
        return_attention_scores = _check_flag("return_attention_scores", return_attention_scores)
        if return_attention_scores and self.flash_attention:
            raise ValueError("GroupedQueryAttention: return_attention_scores=True is not supported with "
                             "flash_attention=True")
        if training is not None:
            kwargs["training"] = training
        if use_causal_mask:
            kwargs["use_causal_mask"] = True
        if return_attention_scores:
            kwargs["return_attention_scores"] = True
        self._return_scores = return_attention_scores
        extra = {n: m for n, m in zip(_MASK_NAMES, (query_mask, value_mask, key_mask, attention_mask))
                 if m is not None}
        self._mask_names = tuple(extra)
        if extra:
            parts = parts + [self._mask_input(n, m, parts[0]) for n, m in extra.items()]
            kwargs["_mask_inputs"] = ",".join(extra)
        return Layer.__call__(self, parts[0] if len(parts) == 1 else parts, **kwargs)

    @staticmethod
    def _mask_input(name, m, first):
        """A mask given as a call argument, in the form the inputs take (a node, a tensor, an array)."""
        if isinstance(first, Node):
            if not isinstance(m, Node):
                raise TypeError(f"GroupedQueryAttention: with symbolic inputs (pg.Input nodes) {name} must be a "
                                f"node too (e.g. a pg.Input), got {type(m).__name__}")
            return m
        if isinstance(m, Node):
            raise TypeError(f"GroupedQueryAttention: {name} is a symbolic node but the inputs are not")
        if isinstance(first, (Tensor, Variable)):
            if isinstance(m, (Tensor, Variable)):
                return m
            return ops.constant(GroupedQueryAttention._mask_array(name, m))
        if isinstance(m, (Tensor, Variable)):
            raise TypeError(f"GroupedQueryAttention: on arrays {name} must be an array too")
        return GroupedQueryAttention._mask_array(name, m)

    @staticmethod
    def _mask_array(name, m):
        arr = np.asarray(m)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise TypeError(f"GroupedQueryAttention: {name} must hold booleans or 0/1 numbers, got dtype {arr.dtype}")
        if arr.ndim > 3 or arr.ndim < 1:
            raise ValueError(f"GroupedQueryAttention: {name} has shape {arr.shape}; expected "
                             f"{'(batch, query steps, value steps)' if name == 'attention_mask' else '(batch, steps)'}")
        return (arr != 0).astype(np.float32)

    # --- shapes --------------------------------------------------------------------------
    def _split(self, input_shape, with_masks=True):
        """(query, value, key shapes, {mask name: shape}) of the call's inputs (without the masks'
        shapes when not ``with_masks``)."""
        shapes = list(input_shape) if isinstance(input_shape, list) else [input_shape]
        names = getattr(self, "_mask_names", ()) if with_masks else ()
        masks = {}
        if names and len(shapes) > len(names):
            masks = dict(zip(names, shapes[len(shapes) - len(names):]))
            shapes = shapes[:len(shapes) - len(names)]
        if not 1 <= len(shapes) <= 3:
            raise ValueError(f"GroupedQueryAttention takes 1 to 3 inputs (query, value, key), got {len(shapes)}")
        for s in shapes:
            if len(s) != 3:
                raise ValueError(f"GroupedQueryAttention expects inputs of shape (steps, features), "
                                 f"got {tuple(s[1:])}")
        q = tuple(shapes[0])
        v = tuple(shapes[1]) if len(shapes) > 1 else q
        k = tuple(shapes[2]) if len(shapes) > 2 else v
        if q[2] != v[2]:
            raise ValueError(f"GroupedQueryAttention: the query and the value must have the same last dimension, "
                             f"got {q[2]} and {v[2]}")
        if None not in (k[1], v[1]) and k[1] != v[1]:
            raise ValueError(f"GroupedQueryAttention: key and value must have the same number of steps, "
                             f"got {k[1]} and {v[1]}")
        return q, v, k, masks

    def _build_once(self, shape):
        # the weights depend on the query, value and key alone: a layer built without masks takes them later
        names = getattr(self, "_mask_names", ())
        if names and isinstance(shape, list) and len(shape) > len(names):
            shape = shape[:len(shape) - len(names)]
            shape = shape[0] if len(shape) == 1 else shape
        return super()._build_once(shape)

    def compute_output_shape(self, input_shape):
        q, v, _, masks = self._split(input_shape)
        for name, m in masks.items():
            m = tuple(m)
            want = (q[1], v[1]) if name == "attention_mask" else ((q[1],) if name == "query_mask" else (v[1],))
            ok = len(m) in ((2, 3) if name == "attention_mask" else (2,)) and all(
                a is None or b is None or a == b or (a == 1 and name == "attention_mask")
                for a, b in zip(m[len(m) - len(want):], want))
            if not ok:
                raise ValueError(f"GroupedQueryAttention: {name} must be of shape (batch, "
                                 f"{', '.join(str(w) for w in want)}), got {m}")
        out = (q[0], q[1], q[2])
        if getattr(self, "_return_scores", False):
            return [out, (q[0], self.num_query_heads, q[1], v[1])]
        return out

    def build(self, input_shape):
        q, v, k, _ = self._split(input_shape, with_masks=False)
        d, hq, hkv = self.head_dim, self.num_query_heads, self.num_key_value_heads
        gate = (("gate_proj", hq, q[2]),) if self.use_gate else ()
        for name, heads, cols in (("q_proj", hq, q[2]), ("k_proj", hkv, k[2])) + gate + (
                ("v_proj", hkv, v[2]), ("out_proj", None, hq * d)):
            rows = q[2] if heads is None else heads * d
            w = self.add_weight(f"{name}.weight", (rows, cols), self.kernel_initializer,
                                regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
            setattr(self, name.replace("proj", "w"), w)
            # Keras's EinsumDense kernels: (in, heads, d) for the projections, (Hq, d, out) for the output
            if heads is None:
                w.keras_shape, w.keras_axes = (rows, hq, d), (1, 2, 0)
            else:
                w.keras_shape, w.keras_axes = (heads, d, cols), (2, 0, 1)
            if self.use_bias:
                b = self.add_weight(f"{name}.bias", (rows,), self.bias_initializer,
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint)
                setattr(self, name.replace("proj", "b"), b)
                if heads is not None:
                    b.keras_shape = (heads, d)
        self._build_quantized()               # a loaded quantized layer's scales (its dtype policy's)

    # --- the graph ---------------------------------------------------------------------
    def _repeat_heads(self, t):
        """(b, Hkv, steps, d) -> (b, Hq, steps, d): each key/value head repeated for its group."""
        if self.num_repeats == 1:
            return t
        b, hkv, steps, d = t.shape
        flat = ops.reshape(contiguous(t), (b, hkv, 1, steps * d))
        like = _scope.require("GroupedQueryAttention").ctx.new_tensor((b, hkv, self.num_repeats, steps * d))
        return ops.reshape(ops.repeat(flat, like), (b, hkv * self.num_repeats, steps, d))

    def call(self, inputs, training=None, mask=None, use_causal_mask=False, return_attention_scores=False,
             _mask_inputs=None):
        xs = list(inputs) if isinstance(inputs, list) else [inputs]
        masks = list(mask) if isinstance(mask, list) else [mask] * len(xs)
        names = _mask_inputs.split(",") if _mask_inputs else []
        given = {}
        if names:
            given = dict(zip(names, xs[len(xs) - len(names):]))
            xs, masks = xs[:len(xs) - len(names)], masks[:len(xs) - len(names)]
        query = xs[0]
        value = xs[1] if len(xs) > 1 else query
        key = xs[2] if len(xs) > 2 else value
        # the inputs' own padding masks stand in for the masks not given (Keras's)
        qm = given.get("query_mask", masks[0])
        vm = given.get("value_mask", masks[1] if len(masks) > 1 else masks[0])
        km = given.get("key_mask", masks[2] if len(masks) > 2 else None)
        b, tq, _ = query.shape
        tv = value.shape[1]
        d, hq, hkv = self.head_dim, self.num_query_heads, self.num_key_value_heads
        gate = self._gate(query)
        q = ops.reshape(self._project(query, self.q_w, getattr(self, "q_b", None)), (b, tq, hq, d))
        k = ops.reshape(self._project(key, self.k_w, getattr(self, "k_b", None)), (b, tv, hkv, d))
        v = ops.reshape(self._project(value, self.v_w, getattr(self, "v_b", None)), (b, tv, hkv, d))
        q = ops.permute_axes(q, (0, 2, 1, 3))                            # (b, Hq, tq, d)
        k = self._repeat_heads(ops.permute_axes(k, (0, 2, 1, 3)))        # (b, Hq, tv, d)
        vt = self._repeat_heads(ops.permute_axes(v, (0, 2, 1, 3)))       # (b, Hq, tv, d)
        vt = ops.permute_axes(vt, (0, 1, 3, 2))                          # (b, Hq, d, tv)
        key_side = None
        for name, m in (("value_mask", vm), ("key_mask", km)):
            if m is not None:
                m = self._step_mask(m, b, tv, name)
                key_side = m if key_side is None else ops.mul(key_side, m)
        rows = None if qm is None else self._step_mask(qm, b, tq, "query_mask")
        allowed = self._allowed(b, tq, tv, key_side, given.get("attention_mask"), use_causal_mask, rows)
        scale = 1.0 / math.sqrt(d)
        if fused():
            blocked = None if allowed is None else ops.scale_bias(allowed, 1e9, -1e9)
            probs = ops.soft_max_ext(ops.mul_mat(k, q), blocked, scale)
        else:
            scores = ops.scale(ops.mul_mat(k, q), scale)                 # (b, Hq, tq, tv)
            if allowed is not None:
                scores = ops.add(scores, ops.scale_bias(allowed, 1e9, -1e9))
            probs = activations.softmax(scores)
        probs = self._zero_blocked(probs, allowed, return_attention_scores)
        out = self._attend(probs, vt, b, tq, hq, d, training, gate)
        if return_attention_scores:
            return [out, probs]
        return out

    def get_config(self):
        cfg = Layer.get_config(self)
        cfg.update(head_dim=self.head_dim, num_query_heads=self.num_query_heads,
                   num_key_value_heads=self.num_key_value_heads, use_bias=self.use_bias, dropout=self.dropout,
                   seed=self.seed, use_gate=self.use_gate, sliding_window=self.sliding_window)
        if self.flash_attention is not None:          # (Keras's config names it only when set)
            cfg["flash_attention"] = self.flash_attention
        cfg.update(weight_options_config(self, _OPTIONS))
        from pyggml.initializers import config_value
        for k in ("kernel_initializer", "bias_initializer"):
            v = config_value(getattr(self, k))
            if v is not None:
                cfg[k] = v
        self._quant_config(cfg)
        return cfg
