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
Scores are ``q . k / sqrt(key_dim)``, softmax over the keys.  Kernels are
glorot-uniform over ``(out, in)``, biases zero.  ``dropout`` drops attention
probabilities while training.
"""

import math

from pyggml.core import ops
from pyggml.layers.base import Layer
from pyggml.layers.core import _positive_int, _cont, permute_numpy

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(Layer):
    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.num_heads = _positive_int("num_heads", num_heads, 1 << 12)
        self.key_dim = _positive_int("key_dim", key_dim, 1 << 16)
        self.value_dim = self.key_dim if value_dim is None else _positive_int("value_dim", value_dim, 1 << 16)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        if output_shape is not None:
            if isinstance(output_shape, (tuple, list)):
                if len(output_shape) != 1:
                    raise ValueError(f"output_shape must be an int (the last dim), got {output_shape!r}")
                output_shape = output_shape[0]
            output_shape = _positive_int("output_shape", output_shape, 1 << 20)
        self._out_dim = output_shape
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    # --- calling ---------------------------------------------------------------------
    def __call__(self, query, value=None, key=None, **kwargs):
        if kwargs:
            raise TypeError("MultiHeadAttention takes (query, value=None, key=None) or a list of nodes; "
                            f"unsupported arguments: {sorted(kwargs)}")
        if isinstance(query, (list, tuple)):
            if value is not None or key is not None:
                raise TypeError("give either a list [query, value(, key)] or separate nodes, not both")
            if not 1 <= len(query) <= 3:
                raise ValueError(f"MultiHeadAttention takes 1 to 3 inputs (query, value, key), got {len(query)}")
            nodes = list(query)
        else:
            nodes = [query]
            if key is not None and value is None:
                raise ValueError("a key needs a value: call mha(query, value, key)")
            if value is not None:
                nodes.append(value)
            if key is not None:
                nodes.append(key)
        if len(nodes) == 1:
            return super().__call__(nodes[0])
        return super().__call__(nodes)

    def _split_shapes(self, input_shape):
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        if not 1 <= len(shapes) <= 3:
            raise ValueError(f"MultiHeadAttention takes 1 to 3 inputs (query, value, key), got {len(shapes)}")
        for s in shapes:
            if len(s) != 2:
                raise ValueError(f"MultiHeadAttention expects inputs of shape (steps, features), got {tuple(s)}")
        q = shapes[0]
        v = shapes[1] if len(shapes) > 1 else q
        k = shapes[2] if len(shapes) > 2 else v
        if k[0] != v[0]:
            raise ValueError(f"MultiHeadAttention: key and value must have the same number of steps, "
                             f"got {k[0]} and {v[0]}")
        return tuple(q), tuple(v), tuple(k)

    def compute_output_shape(self, input_shape):
        q, _, _ = self._split_shapes(input_shape)
        return (q[0], self._out_dim or q[1])

    def build(self, input_shape):
        q, v, k = self._split_shapes(input_shape)
        hk, hv = self.num_heads * self.key_dim, self.num_heads * self.value_dim
        out = self._out_dim or q[1]
        for name, rows, cols in (("q_proj", hk, q[1]), ("k_proj", hk, k[1]), ("v_proj", hv, v[1]),
                                 ("out_proj", out, hv)):
            self.add_weight(f"{name}.weight", (rows, cols), self.kernel_initializer)
            if self.use_bias:
                self.add_weight(f"{name}.bias", (rows,), self.bias_initializer)

    # --- the graph ---------------------------------------------------------------------
    def _project(self, g, x, name, steps, feats):
        """(batch, steps, feats) -> (batch * steps, rows) through ``name``'s linear map."""
        y = ops.mul_mat(g.weight(self, f"{name}.weight"),
                        ops.reshape(_cont(x, g), (g.batch * steps, feats), ctx=g.ctx), ctx=g.ctx)
        if self.use_bias:
            y = ops.add(y, g.weight(self, f"{name}.bias"), ctx=g.ctx)
        return y

    def call(self, g, xs, training):
        xs = xs if isinstance(xs, list) else [xs]
        query = xs[0]
        value = xs[1] if len(xs) > 1 else query
        key = xs[2] if len(xs) > 2 else value
        (tq, dq), (tv, dv), (_, dk) = self._split_shapes(self.input_shape)
        h, kd, vd, b = self.num_heads, self.key_dim, self.value_dim, g.batch
        ctx = g.ctx
        q = ops.reshape(self._project(g, query, "q_proj", tq, dq), (b, tq, h, kd), ctx=ctx)
        k = ops.reshape(self._project(g, key, "k_proj", tv, dk), (b, tv, h, kd), ctx=ctx)
        v = ops.reshape(self._project(g, value, "v_proj", tv, dv), (b, tv, h, vd), ctx=ctx)
        q = permute_numpy(q, (0, 2, 1, 3), g)                # (b, h, tq, kd)
        k = permute_numpy(k, (0, 2, 1, 3), g)                # (b, h, tv, kd)
        vt = permute_numpy(v, (0, 2, 3, 1), g)               # (b, h, vd, tv)
        # scores[b, h, i, j] = q_i . k_j / sqrt(kd); softmax over the keys j
        scores = ops.scale(ops.mul_mat(k, q, ctx=ctx), 1.0 / math.sqrt(kd), ctx=ctx)   # (b, h, tq, tv)
        probs = ops.soft_max(scores, ctx=ctx)
        if training and self.dropout > 0:
            probs = ops.mul(probs, g.dropout_mask(probs.shape, self.dropout), ctx=ctx)
        att = ops.mul_mat(vt, probs, ctx=ctx)                 # (b, h, tq, vd)
        att = permute_numpy(att, (0, 2, 1, 3), g)             # (b, tq, h, vd)
        att = ops.reshape(att, (b * tq, h * vd), ctx=ctx)
        y = ops.mul_mat(g.weight(self, "out_proj.weight"), att, ctx=ctx)
        if self.use_bias:
            y = ops.add(y, g.weight(self, "out_proj.bias"), ctx=ctx)
        return ops.reshape(y, (b, tq, self.output_shape[-1]), ctx=ctx)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                   dropout=self.dropout, use_bias=self.use_bias, output_shape=self._out_dim)
        for k in ("kernel_initializer", "bias_initializer"):
            v = getattr(self, k)
            if isinstance(v, str):
                cfg[k] = v
        return cfg
