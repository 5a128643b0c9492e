"""MultiHeadAttention, Keras' layer with PyTorch-like weight names.

Called as ``mha([query, value])``, ``mha([query, value, key])`` (the key
defaults to the value, as Keras), ``mha(query, value)`` / ``mha(query, value,
key)`` in Keras' positional style, or on a single node ``mha(x)`` for
self-attention (query = value = key = x; this form also works in a
``Sequential``).  Inputs are ``(batch, steps, features)``; the output is
``(batch, query_steps, output_shape)``, ``output_shape`` defaulting to the
query's last dim.

Weights (``H = num_heads``, ``k = key_dim``, ``v = value_dim``, default k),
each a linear map in PyTorch's ``(out, in)`` layout:

- ``q_proj.weight`` ``(H*k, query_dim)``, ``q_proj.bias`` ``(H*k,)``
- ``k_proj.weight`` ``(H*k, key_dim_in)``, ``k_proj.bias`` ``(H*k,)``
- ``v_proj.weight`` ``(H*v, value_dim_in)``, ``v_proj.bias`` ``(H*v,)``
- ``out_proj.weight`` ``(output_shape, H*v)``, ``out_proj.bias`` ``(output_shape,)``

Head h uses rows ``[h*k, (h+1)*k)`` of the q/k projections (rows ``[h*v,
(h+1)*v)`` of the value's), as PyTorch's ``nn.MultiheadAttention`` splits its
``in_proj_weight``; with equal dims, ``in_proj_weight`` is the three
projection weights stacked (q, k, v) and ``in_proj_bias`` the biases.
Scores are ``q . k / sqrt(key_dim)``, softmax over the keys (on the CPU with
a padding mask: one ``soft_max_ext`` applies the scale and the mask).  Kernels are
glorot-uniform over ``(out, in)``, biases zero.  ``dropout`` drops attention
probabilities while training (drawn from the layer's own generator when ``seed`` is
given, so a seeded layer repeats its masks).

Keras 3.15's options: ``use_gate=True`` adds ``gate_proj.weight`` ``(H*v, query_dim)``
(and ``gate_proj.bias`` ``(H*v,)``, between the key's weights and the value's, as Keras
orders them): the heads' outputs are multiplied by ``sigmoid(gate_proj(query))`` before
the output projection.  ``sliding_window=w`` lets query step i attend to value steps j
with ``|i - j| < w`` only (and'ed with the other masks, ``use_causal_mask`` included;
inputs of shape (steps, features) only).  ``flash_attention`` changes nothing here
(one kernel), but as Keras, True refuses ``dropout`` and ``return_attention_scores``.

Masks as Keras's: the padding masks the inputs carry (``Embedding(mask_zero=True)``,
``Masking``) block the query's padded rows and the value's and the key's padded
columns; ``value_mask``/``key_mask`` call arguments block columns; a ``query_mask``
argument is checked but, as in Keras (which reads the query's own mask instead),
changes nothing.  A query row that may attend to no key is uniform over the keys, as
Keras's fused kernel gives; it is all zeros where Keras computes the scores itself
(``return_attention_scores=True`` or ``dropout > 0``).

Keras's ``kernel_/bias_regularizer`` and ``kernel_/bias_constraint`` see the
weights in Keras's layouts: the query/key/value kernels ``(in, H, k)`` and
biases ``(H, k)``, the output kernel ``(H, v, out)`` and bias ``(out,)``.
"""

import math

import numpy as np

from pyggml import _scope, activations, ops
from pyggml.core import Tensor
from pyggml._validation import check_fraction, check_positive_int, is_int
from pyggml.layers._helpers import contiguous, fused, set_weight_options, weight_options_config
from pyggml.layers.core.quantize import QuantizedProjections
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin
from pyggml.variables import Variable

__all__ = ["MultiHeadAttention"]

_OPTIONS = ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint")


def _merge_masks(query, value, query_mask, value_mask, key_mask, attention_mask):
    """Keras's masks of the query's steps (batch, T), the value's and the key's (batch, S) as one
    attention mask (batch, T, S): a query step attends a value step where all of them hold it,
    and the attention mask too if one is given."""
    from pyggml.layers.node import Node
    symbolic = any(isinstance(m, (Node, Tensor, Variable)) for m in (query, value, query_mask, value_mask, key_mask))
    if symbolic:
        as_float = lambda m: ops.cast(m, "float32")
        expand, mul = ops.expand_dims, ops.multiply
    else:
        def as_float(m):
            a = np.asarray(m)
            if a.dtype == object or a.dtype.kind not in "biuf":
                raise TypeError(f"MultiHeadAttention: masks must hold booleans or 0/1 numbers, got dtype {a.dtype}")
            return (a != 0).astype(np.float32)
        expand, mul = np.expand_dims, np.multiply
    rows = None if query_mask is None else as_float(query_mask)
    ones_rows = (lambda m: ops.ones_like(m)) if symbolic else (lambda m: np.ones_like(m))
    cols = None
    for m in (value_mask, key_mask):
        if m is not None:
            cols = as_float(m) if cols is None else mul(cols, as_float(m))
    if rows is None:
        rows = ops.ones_like(query[..., 0]) if symbolic else np.ones(np.shape(query)[:-1], np.float32)
    if cols is None:
        cols = ops.ones_like(value[..., 0]) if symbolic else np.ones(np.shape(value)[:-1], np.float32)
    for what, m, ref in (("query_mask", rows, query), ("value_mask or key_mask", cols, value)):
        if len(m.shape) != 2 or len(ref.shape) != 3:
            raise ValueError(f"MultiHeadAttention: {what} must be of shape (batch, steps) for inputs of shape "
                             f"(batch, steps, features), got {tuple(m.shape)} for {tuple(ref.shape)}")
    # Keras's layer reads the query's own (carried) mask, never this argument: it is checked alone
    merged = mul(expand(ones_rows(rows), -1), expand(cols, -2))
    if attention_mask is not None:
        merged = mul(merged, as_float(attention_mask))
    return merged


def keras315_options(layer, sliding_window, flash_attention, use_gate, seed):
    """Checks and keeps Keras 3.15's sliding_window, flash_attention, use_gate and seed."""
    what = type(layer).__name__
    if sliding_window is not None and (not is_int(sliding_window) or sliding_window <= 0):
        raise ValueError(f"{what}: sliding_window must be None or a positive int, got {sliding_window!r}")
    layer.sliding_window = None if sliding_window is None else int(sliding_window)
    for name, v in (("flash_attention", flash_attention), ("use_gate", use_gate)):
        if not (v is None and name == "flash_attention") and not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{what}: {name} must be {'None, ' if name == 'flash_attention' else ''}"
                            f"True or False, got {v!r}")
    layer.flash_attention = None if flash_attention is None else bool(flash_attention)
    layer.use_gate = bool(use_gate)
    if layer.flash_attention and layer.dropout > 0:
        raise ValueError(f"{what}: dropout is not supported with flash_attention=True (set dropout=0.0)")
    if seed is not None and not is_int(seed):
        raise TypeError(f"{what}: seed must be an int or None, got {seed!r}")
    if seed is not None and seed < 0:
        raise ValueError(f"{what}: seed must be a non-negative int, got {seed}")
    layer.seed = None if seed is None else int(seed)
    # a seeded layer draws its dropout masks from its own generator
    layer._generator = None if seed is None else np.random.default_rng(layer.seed)


@register_builtin
class MultiHeadAttention(QuantizedProjections, Layer):
    _config_activity_regularizer = True      # (Keras's config names it, None included)
    build_shape_rule = "last"        # a later call may have other lengths (Layer._fits_built)
    supports_masking = True

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 attention_axes=None, sliding_window=None, flash_attention=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, use_gate=False, seed=None, **kwargs):
        if activity_regularizer is not None:
            kwargs["activity_regularizer"] = activity_regularizer
        super().__init__(**kwargs)
        # Keras's attention_axes for inputs (batch, a, b, features): None, every axis between the
        # batch and the features (attention over a * b steps); or the last of them alone (each
        # index of ``a`` attends over ``b``); an int or a tuple
        if attention_axes is not None:
            axes = (attention_axes,) if isinstance(attention_axes, (int, np.integer)) else tuple(attention_axes)
            if not axes or any(isinstance(a, bool) or not isinstance(a, (int, np.integer)) for a in axes):
                raise TypeError(f"attention_axes must be None, an int or a tuple of ints, got {attention_axes!r}")
            attention_axes = tuple(int(a) for a in axes)
        self.attention_axes = attention_axes
        set_weight_options(self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.num_heads = check_positive_int("num_heads", num_heads, 1 << 12)
        self.key_dim = check_positive_int("key_dim", key_dim, 1 << 16)
        self.value_dim = self.key_dim if value_dim is None else check_positive_int("value_dim", value_dim, 1 << 16)
        self.dropout = check_fraction("dropout", dropout, high_open=True)
        self.use_bias = bool(use_bias)
        keras315_options(self, sliding_window, flash_attention, use_gate, seed)
        if output_shape is not None:
            if isinstance(output_shape, (tuple, list)):
                if len(output_shape) != 1:
                    raise ValueError(f"output_shape must be an int (the last dim), got {output_shape!r}")
                output_shape = output_shape[0]
            output_shape = check_positive_int("output_shape", output_shape, 1 << 20)
        self._out_dim = output_shape
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    # --- calling ---------------------------------------------------------------------
    def __call__(self, query, value=None, key=None, attention_mask=None, use_causal_mask=False,
                 return_attention_scores=False, **kwargs):
        given_mask = bool(kwargs.pop("_attention_mask_input", False))
        side_masks = [kwargs.pop(k, None) for k in ("query_mask", "value_mask", "key_mask")]
        if any(m is not None for m in side_masks):
            if isinstance(query, (list, tuple)):
                raise TypeError("MultiHeadAttention: query_mask, value_mask and key_mask go with separate "
                                "inputs (query=..., value=...), not a list")
            attention_mask = _merge_masks(query, query if value is None else value, *side_masks, attention_mask)
        if isinstance(query, (list, tuple)):
            if value is not None or key is not None:
                raise TypeError("give either a list [query, value(, key)] or separate inputs, not both")
            parts = list(query)
            if given_mask:                        # a rebuilt graph: the mask is the last input
                if attention_mask is not None or len(parts) < 2:
                    raise TypeError("MultiHeadAttention: the attention mask was given twice")
                attention_mask = parts.pop()
            if not 1 <= len(parts) <= 3:
                raise ValueError(f"MultiHeadAttention takes 1 to 3 inputs (query, value, key), got {len(parts)}")
        else:
            parts = [query]
            if key is not None and value is None:
                raise ValueError("a key needs a value: call mha(query, value, key)")
            if value is not None:
                parts.append(value)
            if key is not None:
                parts.append(key)
        unsupported = set(kwargs) - {"training", "mask", "_constant_mask"}
        if unsupported:
            raise TypeError(f"MultiHeadAttention: unsupported call arguments {sorted(unsupported)}")
        if not isinstance(use_causal_mask, (bool, np.bool_)):
            raise TypeError(f"MultiHeadAttention: use_causal_mask must be True or False, got {use_causal_mask!r}")
        if not isinstance(return_attention_scores, (bool, np.bool_)):
            raise TypeError(f"MultiHeadAttention: return_attention_scores must be True or False, got "
                            f"{return_attention_scores!r}")
        if return_attention_scores and self.flash_attention:
            raise ValueError("MultiHeadAttention: return_attention_scores=True is not supported with "
                             "flash_attention=True")
        if use_causal_mask:
            kwargs["use_causal_mask"] = True
        if return_attention_scores:
            kwargs["return_attention_scores"] = True
        # compute_output_shape reads it: one output, or (output, scores)
        self._return_scores = bool(return_attention_scores)
        self._masked = attention_mask is not None
        if attention_mask is not None:
            from pyggml.layers.node import Node
            if isinstance(parts[0], Node) and not isinstance(attention_mask, Node):
                # a mask made of numbers (vit_small_ds's diagonal mask): a constant of the model's
                # graph, kept in the call's arguments (its config) as 0/1 lists
                arr = np.asarray(attention_mask)
                if arr.dtype == object or arr.dtype.kind not in "biuf":
                    raise TypeError(f"MultiHeadAttention: attention_mask must hold booleans or 0/1 numbers, got "
                                    f"{type(attention_mask).__name__} of dtype {arr.dtype}")
                if not 2 <= arr.ndim <= 3:
                    raise ValueError(f"MultiHeadAttention: attention_mask must be of shape ([batch,] query steps, "
                                     f"value steps), got {arr.shape}")
                tq, tv = parts[0].feature_shape[0], parts[min(1, len(parts) - 1)].feature_shape[0]
                if (tq is not None and arr.shape[-2] != tq) or (tv is not None and arr.shape[-1] != tv):
                    raise ValueError(f"MultiHeadAttention: attention_mask must be of shape (batch, query steps, "
                                     f"value steps) = (1, {tq}, {tv}), got {(1,) * (3 - arr.ndim) + arr.shape}")
                self._masked = False
                kwargs["_constant_mask"] = (arr != 0).astype(int).tolist()
                return super().__call__(parts[0] if len(parts) == 1 else parts, **kwargs)
            if not isinstance(parts[0], (Node, Tensor, Variable)) and isinstance(attention_mask, (Tensor, Variable)):
                raise TypeError("MultiHeadAttention: on arrays the attention_mask must be an array too")
            if isinstance(parts[0], (Tensor, Variable)) and not isinstance(attention_mask, (Tensor, Variable)):
                # an array made in a layer's call (keras-io's causal masks): a constant of the graph
                arr = np.asarray(attention_mask)
                if arr.dtype == object or arr.dtype.kind not in "biuf":
                    raise TypeError(f"MultiHeadAttention: attention_mask must hold booleans or 0/1 numbers, "
                                    f"got dtype {arr.dtype}")
                if arr.ndim > 4:
                    raise ValueError(f"MultiHeadAttention: attention_mask must be of shape (batch, query steps, "
                                     f"value steps), got {arr.shape}")
                attention_mask = ops.constant((arr != 0).astype(np.float32))
            elif not isinstance(parts[0], Node) and not isinstance(attention_mask, (Tensor, Variable)):
                attention_mask = np.asarray(attention_mask)
                if attention_mask.dtype == object or attention_mask.dtype.kind not in "biuf":
                    raise TypeError(f"MultiHeadAttention: attention_mask must hold booleans or 0/1 numbers, "
                                    f"got dtype {attention_mask.dtype}")
                attention_mask = attention_mask.astype(np.float32)
            if len(parts) == 1:
                parts.append(parts[0])            # [query, value(=query), mask]: the mask stays last
            parts.append(attention_mask)
            kwargs["_attention_mask_input"] = True
            return super().__call__(parts, **kwargs)
        return super().__call__(parts[0] if len(parts) == 1 else parts, **kwargs)

    def _split_shapes(self, input_shape, masked=False):
        shapes = list(input_shape) if isinstance(input_shape, list) else [input_shape]
        if masked:
            shapes = shapes[:-1]
        if not 1 <= len(shapes) <= 3:
            raise ValueError(f"MultiHeadAttention takes 1 to 3 inputs (query, value, key), got {len(shapes)}")
        rank = len(shapes[0])
        for s in shapes:
            if len(s) not in (3, 4) or len(s) != rank:
                raise ValueError(f"MultiHeadAttention expects inputs of shape (steps, features) or (a, b, "
                                 f"features), all of one rank, got {[tuple(x[1:]) for x in shapes]}")
        if rank == 4:
            if masked:
                raise ValueError("MultiHeadAttention: an attention_mask goes with inputs of shape (steps, "
                                 "features) only")
            if self.sliding_window is not None:
                raise ValueError("MultiHeadAttention: sliding_window goes with inputs of shape (steps, "
                                 "features) only")
            self._fold_mode(4)
        elif self.attention_axes not in (None, (1,), (-2,)):
            raise ValueError(f"MultiHeadAttention: attention_axes={self.attention_axes} for inputs of shape "
                             f"(steps, features): the steps are axis 1")
        q = tuple(shapes[0])
        v = tuple(shapes[1]) if len(shapes) > 1 else q
        k = tuple(shapes[2]) if len(shapes) > 2 else v
        if k[1:-1] != v[1:-1] and None not in k[1:-1] + v[1:-1]:
            raise ValueError(f"MultiHeadAttention: key and value must have the same number of steps, "
                             f"got {k[1:-1]} and {v[1:-1]}")
        return q, v, k

    def _fits_built(self, built, shape):
        # the weights are made for the query's and the value's features: other lengths fit, a key
        # given or left out (it is the value then), and an attention mask of any lengths
        b = built if isinstance(built, list) else [built]
        s = shape if isinstance(shape, list) else [shape]
        if len(b[0]) != len(s[0]) or b[0][-1] != s[0][-1]:
            return False
        bv, sv = (b[1] if len(b) > 1 else b[0]), (s[1] if len(s) > 1 else s[0])
        return len(bv) == len(sv) and bv[-1] == sv[-1]

    def _fold_mode(self, rank):
        """For 4-D inputs: "joint" (attention over both middle axes) or "last" (over the last)."""
        axes = self.attention_axes
        norm = None if axes is None else tuple(sorted(a % rank for a in axes))
        if norm is None or norm == (1, 2):
            return "joint"
        if norm == (2,):
            return "last"
        raise ValueError(f"MultiHeadAttention: attention_axes={axes} for 4-D inputs: pyggml attends over both "
                         f"middle axes (None or (1, 2)) or the last of them ((2,))")

    def _mask_shape_checked(self, input_shape):
        """The attention mask's shape (the last input), checked against (query_steps, value_steps);
        (0, 0, 0) when there is none."""
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        if not getattr(self, "_masked", False) or len(shapes) < 3:
            return None
        q, v, _ = self._split_shapes(shapes, masked=True)
        m = tuple(shapes[-1])
        want = (q[1], v[1])
        if len(m) not in (2, 3) or any(a is not None and b is not None and a != b and a != 1
                                       for a, b in zip(m[-2:], want)):
            raise ValueError(f"MultiHeadAttention: attention_mask must be of shape (batch, {want[0]}, {want[1]}) "
                             f"(batch, query steps, value steps), got {m}")
        return m

    def compute_output_shape(self, input_shape):
        masked = getattr(self, "_masked", False)
        self._mask_shape_checked(input_shape)
        q, v, _ = self._split_shapes(input_shape, masked)
        out = tuple(q[:-1]) + (self._out_dim or q[-1],)
        if getattr(self, "_return_scores", False):
            if len(q) == 4:
                if self._fold_mode(4) == "joint":
                    return [out, (q[0], self.num_heads, q[1], q[2], v[1], v[2])]
                return [out, (q[0], q[1], self.num_heads, q[2], v[2])]
            return [out, (q[0], self.num_heads, q[1], v[1])]
        return out

    def build(self, input_shape):
        q, v, k = self._split_shapes(input_shape, getattr(self, "_masked", False))
        hk, hv = self.num_heads * self.key_dim, self.num_heads * self.value_dim
        out = self._out_dim or q[-1]
        h, vd = self.num_heads, self.value_dim
        gate = (("gate_proj", hv, q[-1]),) if self.use_gate else ()
        for name, rows, cols in (("q_proj", hk, q[-1]), ("k_proj", hk, k[-1])) + gate + (
                ("v_proj", hv, v[-1]), ("out_proj", out, hv)):
            w = self.add_weight(f"{name}.weight", (rows, cols), self.kernel_initializer,
                                regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
            setattr(self, name.replace("proj", "w"), w)
            # Keras's EinsumDense kernels: (in, H, k) for the projections, (H, v, out) for the output
            if name == "out_proj":
                w.keras_shape, w.keras_axes = (rows, h, vd), (1, 2, 0)
            else:
                w.keras_shape, w.keras_axes = (h, rows // h, cols), (2, 0, 1)
            if self.use_bias:
                b = self.add_weight(f"{name}.bias", (rows,), self.bias_initializer,
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint)
                setattr(self, name.replace("proj", "b"), b)
                if name != "out_proj":
                    b.keras_shape = (h, rows // h)
        self._build_quantized()               # a loaded quantized layer's scales (its dtype policy's)

    _quant_attrs = (("q_w", "q_proj"), ("k_w", "k_proj"), ("gate_w", "gate_proj"), ("v_w", "v_proj"),
                    ("out_w", "out_proj"))

    # --- the graph ---------------------------------------------------------------------
    def _project(self, x, w, b):
        """(batch, steps, feats) -> (batch * steps, rows) through a linear map."""
        y = ops.mul_mat(self._quantized_view(w), ops.flatten_rows(x))
        return ops.add(y, b) if self.use_bias else y

    def compute_mask(self, inputs, mask=None):
        """The query's mask."""
        return mask[0] if isinstance(mask, list) else mask

    def call(self, inputs, training=None, mask=None, use_causal_mask=False, return_attention_scores=False,
             _attention_mask_input=False, _constant_mask=None):
        """A padding mask on the value (or key) keeps padded steps from being attended to, as do
        the zeros of ``attention_mask`` (batch, query steps, value steps) and, with
        ``use_causal_mask``, the later steps (query i sees value steps j <= i)."""
        xs = list(inputs) if isinstance(inputs, list) else [inputs]
        if len(xs[0].shape) == 4:
            # (batch, a, b, features): the attended axes become the steps, the others the batch
            b0, a, n, _ = (int(d) for d in xs[0].shape)
            joint = self._fold_mode(4) == "joint"
            flat = [ops.reshape(contiguous(x), (int(x.shape[0]), int(x.shape[1]) * int(x.shape[2]), int(x.shape[3]))
                                if joint else (int(x.shape[0]) * int(x.shape[1]), int(x.shape[2]), int(x.shape[3])))
                    for x in xs]
            res = self.call(flat if len(flat) > 1 else flat[0], training=training,
                            return_attention_scores=return_attention_scores)
            out, scores = (res[0], res[1]) if return_attention_scores else (res, None)
            out = ops.reshape(out, (b0, a, n, int(out.shape[-1])))
            if scores is None:
                return out
            h, tv = self.num_heads, int(scores.shape[-1])
            # Keras's scores: (batch, a, heads, n, m) attending one axis, (batch, heads, a, n, a', m)
            # both (a', m: the value's own axes)
            val = xs[1] if len(xs) > 1 else xs[0]
            scores = ops.reshape(scores, (b0, h, a, n, int(val.shape[1]), int(val.shape[2])) if joint
                                 else (b0, a, h, n, tv))
            return [out, scores]
        masks = list(mask) if isinstance(mask, list) else [mask] * len(xs)
        attention_mask = None
        if _attention_mask_input:
            attention_mask = xs.pop()
            masks = masks[:len(xs)]
        elif _constant_mask is not None:
            m = np.asarray(_constant_mask, np.float32)
            attention_mask = ops.constant(m if m.ndim == 3 else m[None])
        query = xs[0]
        value = xs[1] if len(xs) > 1 else query
        key = xs[2] if len(xs) > 2 else value
        b, tq, _ = query.shape
        tv = value.shape[1]
        # the masks the inputs carry, as Keras's: the query's rows, the value's and the key's columns
        rows = None if masks[0] is None else self._step_mask(masks[0], b, tq, "the query's mask")
        key_mask = None
        for what, m in (("the value's mask", masks[1] if len(masks) > 1 else masks[0]),
                        ("the key's mask", masks[2] if len(masks) > 2 else None)):
            if m is not None:
                m = self._step_mask(m, b, tv, what)
                key_mask = m if key_mask is None else ops.mul(key_mask, m)
        if _constant_mask is not None and (tuple(attention_mask.shape[-2:]) != (tq, tv) or
                                           attention_mask.shape[0] not in (1, b)):
            raise ValueError(f"MultiHeadAttention: attention_mask must be of shape (batch, query steps, value steps) "
                             f"= ({b}, {tq}, {tv}) or (1, {tq}, {tv}), got {tuple(attention_mask.shape)}")
        h, kd, vd = self.num_heads, self.key_dim, self.value_dim
        gate = self._gate(query)
        q = ops.reshape(self._project(query, self.q_w, getattr(self, "q_b", None)), (b, tq, h, kd))
        k = ops.reshape(self._project(key, self.k_w, getattr(self, "k_b", None)), (b, tv, h, kd))
        v = ops.reshape(self._project(value, self.v_w, getattr(self, "v_b", None)), (b, tv, h, vd))
        if type(self)._compute_attention is not MultiHeadAttention._compute_attention:
            # a subclass's own attention (keras-io's locality self-attention, a learned temperature):
            # Keras's hook, on the projections (batch, steps, heads, dim) and the mask (b, tq, tv)
            allowed = self._allowed(b, tq, tv, key_mask, attention_mask, use_causal_mask, rows)
            mask3 = None if allowed is None else ops.reshape(contiguous(allowed), (b, tq, tv))
            att, scores = self._compute_attention(q, k, v, attention_mask=mask3, training=training)
            if tuple(att.shape) != (b, tq, h, vd):
                raise ValueError(f"{type(self).__name__}._compute_attention must give attention of shape "
                                 f"(batch, query steps, heads, value dim) = {(b, tq, h, vd)}, got {tuple(att.shape)}")
            att = ops.reshape(contiguous(att), (b * tq, h * vd))
            out = self._project_out(att if gate is None else ops.mul(att, gate), b, tq)
            return [out, scores] if return_attention_scores else out
        q = ops.permute_axes(q, (0, 2, 1, 3))                 # (b, h, tq, kd)
        k = ops.permute_axes(k, (0, 2, 1, 3))                 # (b, h, tv, kd)
        vt = ops.permute_axes(v, (0, 2, 3, 1))                # (b, h, vd, tv)
        allowed = self._allowed(b, tq, tv, key_mask, attention_mask, use_causal_mask, rows)
        # scores[b, h, i, j] = q_i . k_j / sqrt(kd); softmax over the keys j
        if fused():
            # the scale and the mask (0 for an allowed key, -1e9 for a blocked one, one row per
            # query: soft_max_ext's mask broadcasts over the heads) in one op
            blocked = None if allowed is None else ops.scale_bias(allowed, 1e9, -1e9)
            probs = ops.soft_max_ext(ops.mul_mat(k, q), blocked, 1.0 / math.sqrt(kd))
        else:
            scores = ops.scale(ops.mul_mat(k, q), 1.0 / math.sqrt(kd))   # (b, h, tq, tv)
            if allowed is not None:
                # 0 for an allowed key, -1e9 for a blocked one, added to every head's scores
                scores = ops.add(scores, ops.scale_bias(allowed, 1e9, -1e9))
            probs = activations.softmax(scores)
        probs = self._zero_blocked(probs, allowed, return_attention_scores)
        out = self._attend(probs, vt, b, tq, h, vd, training, gate)
        if return_attention_scores:
            return [out, probs]
        return out

    def _zero_blocked(self, probs, allowed, scores_wanted):
        """Keras computes the scores itself (its softmax zeroes the blocked keys, so a row with
        none allowed is all zeros) when they are returned or dropped out; its fused kernel,
        used otherwise, leaves such a row uniform, as the -1e9 here does."""
        if allowed is None or not (scores_wanted or self.dropout > 0):
            return probs
        return ops.mul(probs, allowed)

    def _gate(self, query):
        """use_gate's sigmoid(gate_proj(query)), (batch * query steps, heads * value dim); None without."""
        if not self.use_gate:
            return None
        return activations.sigmoid(self._project(query, self.gate_w, getattr(self, "gate_b", None)))

    @staticmethod
    def _as_float_mask(m):
        t = ops.as_tensor(m)
        if t.dtype != "f32":
            t = ops.cast(t, "f32")
        return ops.step(ops.abs(contiguous(t)))          # as Keras's bool: true where not 0

    def _step_mask(self, m, b, steps, name):
        """A padding mask (batch, steps) as floats 1 (kept) / 0 (padded)."""
        t = self._as_float_mask(m)
        if tuple(t.shape) not in ((b, steps), (b, steps, 1)):
            raise ValueError(f"{type(self).__name__}: {name} must have shape (batch, steps) = {(b, steps)}, got "
                             f"{tuple(t.shape)}")
        return ops.reshape(contiguous(t), (b, steps))

    def _allowed(self, b, tq, tv, key_mask, attention_mask, causal, rows=None):
        """A (b, 1, tq, tv) float tensor: 1 where query i may attend to key j, 0 where not
        (the padding masks of the keys (b, tv) and of the query's rows (b, tq), the attention
        mask, the causal mask and the sliding window, all and'ed); None when nothing is masked."""
        parts = []
        if attention_mask is not None:
            am = attention_mask
            if isinstance(am, (Tensor, Variable)):
                am = ops.as_tensor(am)
                if am.dtype != "f32":
                    am = ops.cast(am, "f32")
                am = ops.step(ops.abs(contiguous(am)))          # as Keras's bool: attend where not 0
            else:
                arr = np.asarray(am)
                if arr.dtype == object or arr.dtype.kind not in "biuf":
                    raise TypeError(f"MultiHeadAttention: attention_mask must hold booleans or 0/1 numbers, got "
                                    f"dtype {arr.dtype}")
                am = ops.constant((arr != 0).astype(np.float32))
            shape = tuple(am.shape)
            if len(shape) == 2:
                shape = (1,) + shape
            # as Keras: broadcast over the axes of length 1 ((batch, 1, value steps): a padding mask)
            if len(shape) != 3 or any(d not in (1, want) for d, want in zip(shape, (b, tq, tv))):
                raise ValueError(f"MultiHeadAttention: attention_mask must be of shape ({b}, {tq}, {tv}) "
                                 f"(batch, query steps, value steps; 1 to broadcast) or ({tq}, {tv}), got "
                                 f"{tuple(am.shape)}")
            parts.append(ops.reshape(contiguous(am), (shape[0], 1, shape[1], shape[2])))
        if key_mask is not None:
            parts.append(ops.reshape(contiguous(ops.as_tensor(key_mask)), (b, 1, 1, tv)))
        if rows is not None:
            parts.append(ops.reshape(contiguous(ops.as_tensor(rows)), (b, 1, tq, 1)))
        i, j = np.arange(tq)[:, None], np.arange(tv)[None, :]
        if causal:
            parts.append(ops.constant((i >= j).astype(np.float32).reshape(1, 1, tq, tv)))
        if getattr(self, "sliding_window", None) is not None:
            # Keras's band: query step i sees value steps j with |i - j| < sliding_window
            parts.append(ops.constant((np.abs(i - j) < self.sliding_window).astype(np.float32).reshape(1, 1, tq, tv)))
        if not parts:
            return None
        full = ops.repeat(parts[0], _scope.require("MultiHeadAttention").ctx.new_tensor((b, 1, tq, tv)))
        for p in parts[1:]:
            full = ops.mul(full, p)
        return full

    def _drop(self, probs, training):
        """The attention dropout: the library's generator, or the layer's own with a seed."""
        if self.dropout <= 0:
            return probs
        own = getattr(self, "_generator", None)
        if own is None:
            return ops.dropout(probs, self.dropout, training=training)
        from pyggml import _random
        b = _scope.require(type(self).__name__)
        if not (b.training if training is None else training):
            return probs
        rate = self.dropout
        keep = b.random_values(tuple(int(d) for d in probs.shape), lambda rng, s: _random.draw_values(own, s, rate))
        return ops.mul(contiguous(probs), keep)

    def _attend(self, probs, vt, b, tq, h, vd, training, gate=None):
        probs = self._drop(probs, training)
        att = ops.mul_mat(vt, contiguous(probs))              # (b, h, tq, vd)
        att = ops.reshape(ops.permute_axes(att, (0, 2, 1, 3)), (b * tq, h * vd))
        if gate is not None:
            att = ops.mul(att, gate)                          # use_gate: the heads' outputs, gated
        return self._project_out(att, b, tq)

    def _project_out(self, att, b, tq):
        """The heads' outputs (b * tq, heads * value dim) through the output projection."""
        y = ops.mul_mat(self._quantized_view(self.out_w), att)
        if self.use_bias:
            y = ops.add(y, self.out_b)
        return ops.reshape(y, (b, tq, y.shape[-1]))

    # --- Keras's hooks for subclasses (keras-io's MultiHeadAttentionLSA overrides the first) ------
    def _compute_attention(self, query, key, value, attention_mask=None, training=None):
        """Keras's: (attention output (b, tq, heads, vd), scores (b, heads, tq, tv)) from the
        projections (b, steps, heads, dim); a subclass may override it (called in the graph)."""
        query = ops.multiply(query, self._inverse_sqrt_key_dim)
        scores = ops.einsum(self._dot_product_equation, key, query)
        scores = self._masked_softmax(scores, attention_mask)
        dropped = self._dropout_layer(scores, training=training)
        return ops.einsum(self._combine_equation, dropped, value), scores

    def _masked_softmax(self, attention_scores, attention_mask=None):
        """Softmax over the keys of scores (b, heads, tq, tv), 0 where the mask (b, tq, tv) is 0."""
        if attention_mask is not None:
            m = ops.as_tensor(attention_mask)
            m = ops.reshape(contiguous(m), (int(m.shape[0]), 1) + tuple(int(d) for d in m.shape[1:]))
            m = ops.step(ops.abs(ops.cast(m, "f32") if m.dtype != "f32" else m))
            attention_scores = ops.add(attention_scores, ops.scale_bias(m, 1e9, -1e9))
            # as Keras's Softmax: blocked keys exactly 0 (a row with none allowed is all zeros)
            return ops.mul(activations.softmax(attention_scores), m)
        return activations.softmax(attention_scores)

    _dot_product_equation = "aecd,abcd->acbe"      # key, query -> scores (b, heads, tq, tv)
    _combine_equation = "acbe,aecd->abcd"          # scores, value -> (b, tq, heads, vd)
    _key_dim = property(lambda self: self.key_dim)
    _value_dim = property(lambda self: self.value_dim)
    _num_heads = property(lambda self: self.num_heads)
    _inverse_sqrt_key_dim = property(lambda self: 1.0 / math.sqrt(float(self.key_dim)))

    @property
    def _dropout_layer(self):
        def drop(x, training=None):
            return self._drop(x, bool(training))
        return drop

    def get_config(self):
        cfg = super().get_config()
        cfg.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                   dropout=self.dropout, use_bias=self.use_bias, output_shape=self._out_dim,
                   attention_axes=None if self.attention_axes is None else list(self.attention_axes),
                   sliding_window=self.sliding_window, use_gate=self.use_gate, seed=self.seed)
        if self.flash_attention is not None:          # (Keras's config names it only when set)
            cfg["flash_attention"] = self.flash_attention
        cfg.update(weight_options_config(self, _OPTIONS))
        self._quant_config(cfg)
        for k in ("kernel_initializer", "bias_initializer"):
            v = getattr(self, k)
            if isinstance(v, str):
                cfg[k] = v
        return cfg
