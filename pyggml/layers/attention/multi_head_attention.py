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
probabilities while training.

Keras's ``kernel_/bias_regularizer`` and ``kernel_/bias_constraint`` see the
weights in Keras's layouts: the query/key/value kernels ``(in, H, k)`` and
biases ``(H, k)``, the output kernel ``(H, v, out)`` and bias ``(out,)``.
"""

import math

from pyggml import _scope, activations, ops
from pyggml._validation import check_fraction, check_positive_int
from pyggml.layers._helpers import contiguous, fused, set_weight_options, weight_options_config
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["MultiHeadAttention"]

_OPTIONS = ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint")


@register_builtin
class MultiHeadAttention(Layer):
    supports_masking = True
    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", kernel_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        set_weight_options(self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.num_heads = check_positive_int("num_heads", num_heads, 1 << 12)
        self.key_dim = check_positive_int("key_dim", key_dim, 1 << 16)
        self.value_dim = self.key_dim if value_dim is None else check_positive_int("value_dim", value_dim, 1 << 16)
        self.dropout = check_fraction("dropout", dropout, high_open=True)
        self.use_bias = bool(use_bias)
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
    def __call__(self, query, value=None, key=None, **kwargs):
        if isinstance(query, (list, tuple)):
            if value is not None or key is not None:
                raise TypeError("give either a list [query, value(, key)] or separate inputs, not both")
            if not 1 <= len(query) <= 3:
                raise ValueError(f"MultiHeadAttention takes 1 to 3 inputs (query, value, key), got {len(query)}")
            parts = list(query)
        else:
            parts = [query]
            if key is not None and value is None:
                raise ValueError("a key needs a value: call mha(query, value, key)")
            if value is not None:
                parts.append(value)
            if key is not None:
                parts.append(key)
        unsupported = set(kwargs) - {"training", "mask"}
        if unsupported:
            raise TypeError(f"MultiHeadAttention: unsupported call arguments {sorted(unsupported)}")
        return super().__call__(parts[0] if len(parts) == 1 else parts, **kwargs)

    def _split_shapes(self, input_shape):
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        if not 1 <= len(shapes) <= 3:
            raise ValueError(f"MultiHeadAttention takes 1 to 3 inputs (query, value, key), got {len(shapes)}")
        for s in shapes:
            if len(s) != 3:
                raise ValueError(f"MultiHeadAttention expects inputs of shape (steps, features), "
                                 f"got {tuple(s[1:])}")
        q = tuple(shapes[0])
        v = tuple(shapes[1]) if len(shapes) > 1 else q
        k = tuple(shapes[2]) if len(shapes) > 2 else v
        if None not in (k[1], v[1]) and k[1] != v[1]:
            raise ValueError(f"MultiHeadAttention: key and value must have the same number of steps, "
                             f"got {k[1]} and {v[1]}")
        return q, v, k

    def compute_output_shape(self, input_shape):
        q, _, _ = self._split_shapes(input_shape)
        return (q[0], q[1], self._out_dim or q[2])

    def build(self, input_shape):
        q, v, k = self._split_shapes(input_shape)
        hk, hv = self.num_heads * self.key_dim, self.num_heads * self.value_dim
        out = self._out_dim or q[2]
        h, vd = self.num_heads, self.value_dim
        for name, rows, cols in (("q_proj", hk, q[2]), ("k_proj", hk, k[2]), ("v_proj", hv, v[2]),
                                 ("out_proj", out, hv)):
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

    # --- the graph ---------------------------------------------------------------------
    def _project(self, x, w, b):
        """(batch, steps, feats) -> (batch * steps, rows) through a linear map."""
        y = ops.mul_mat(w, ops.flatten_rows(x))
        return ops.add(y, b) if self.use_bias else y

    def compute_mask(self, inputs, mask=None):
        """The query's mask."""
        return mask[0] if isinstance(mask, list) else mask

    def call(self, inputs, training=None, mask=None):
        """A padding mask on the value (or key) keeps padded steps from being attended to."""
        xs = inputs if isinstance(inputs, list) else [inputs]
        masks = mask if isinstance(mask, list) else [mask] * len(xs)
        key_mask = masks[2] if len(masks) > 2 else (masks[1] if len(masks) > 1 else masks[0])
        query = xs[0]
        value = xs[1] if len(xs) > 1 else query
        key = xs[2] if len(xs) > 2 else value
        b, tq, _ = query.shape
        tv = value.shape[1]
        h, kd, vd = self.num_heads, self.key_dim, self.value_dim
        q = ops.reshape(self._project(query, self.q_w, getattr(self, "q_b", None)), (b, tq, h, kd))
        k = ops.reshape(self._project(key, self.k_w, getattr(self, "k_b", None)), (b, tv, h, kd))
        v = ops.reshape(self._project(value, self.v_w, getattr(self, "v_b", None)), (b, tv, h, vd))
        q = ops.permute_axes(q, (0, 2, 1, 3))                 # (b, h, tq, kd)
        k = ops.permute_axes(k, (0, 2, 1, 3))                 # (b, h, tv, kd)
        vt = ops.permute_axes(v, (0, 2, 3, 1))                # (b, h, vd, tv)
        # scores[b, h, i, j] = q_i . k_j / sqrt(kd); softmax over the keys j
        if fused():
            # the scale and the mask (0 for a real key, -1e9 for a padded one, one row per
            # query: soft_max_ext's mask broadcasts over the heads, not over the queries) in one op
            blocked = None
            if key_mask is not None:
                blocked = ops.scale_bias(ops.reshape(contiguous(ops.as_tensor(key_mask)), (b, 1, 1, tv)), 1e9, -1e9)
                blocked = ops.repeat(blocked, _scope.require("MultiHeadAttention").ctx.new_tensor((b, 1, tq, tv)))
            probs = ops.soft_max_ext(ops.mul_mat(k, q), blocked, 1.0 / math.sqrt(kd))
            return self._attend(probs, vt, b, tq, h, vd, training)
        scores = ops.scale(ops.mul_mat(k, q), 1.0 / math.sqrt(kd))   # (b, h, tq, tv)
        if key_mask is not None:
            # 0 for a real key, -1e9 for a padded one, added to every head's and query's scores
            blocked = ops.scale_bias(ops.reshape(ops.as_tensor(key_mask), (b, 1, 1, tv)), 1e9, -1e9)
            scores = ops.add(scores, blocked)
        probs = activations.softmax(scores)
        return self._attend(probs, vt, b, tq, h, vd, training)

    def _attend(self, probs, vt, b, tq, h, vd, training):
        if self.dropout > 0:
            probs = ops.dropout(probs, self.dropout, training=training)
        att = ops.mul_mat(vt, contiguous(probs))              # (b, h, tq, vd)
        att = ops.reshape(ops.permute_axes(att, (0, 2, 1, 3)), (b * tq, h * vd))
        y = ops.mul_mat(self.out_w, att)
        if self.use_bias:
            y = ops.add(y, self.out_b)
        return ops.reshape(y, (b, tq, y.shape[-1]))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                   dropout=self.dropout, use_bias=self.use_bias, output_shape=self._out_dim)
        cfg.update(weight_options_config(self, _OPTIONS))
        for k in ("kernel_initializer", "bias_initializer"):
            v = getattr(self, k)
            if isinstance(v, str):
                cfg[k] = v
        return cfg
