"""Bidirectional(layer): a recurrent layer run forwards and a copy of it run
backwards, their outputs merged.

The copy is rebuilt from the layer's config with ``go_backwards`` flipped (or
is ``backward_layer``); their weights are named ``forward_layer.<weight>`` and
``backward_layer.<weight>``.  With ``return_sequences`` the backward layer's
outputs come in reversed time and are turned back (one get_rows) before the
merge, as Keras: ``merge_mode`` "concat" (the default: forward features first),
"sum", "mul", "ave", or None (a list of the two outputs).

``call(inputs, mask=...)`` passes a padding mask on to the wrapped layers when
their ``call`` takes one (LSTM and GRU do: the backward one then starts at each
row's last real step).  The output keeps the mask with ``return_sequences``.
"""

import numpy as np

from pyggml import ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.layers.wrappers.wrapping import build_sublayer, check_layer, serialize_layer, sublayer_output_shape
from pyggml.saving.object_registration import register_builtin

__all__ = ["Bidirectional", "reverse_steps", "join_features"]

_MERGE_MODES = ("concat", "sum", "mul", "ave", None)


def reverse_steps(x):
    """(N, steps, F) with its steps in reverse order (get_rows, which trains)."""
    n, steps, f = x.shape
    rows = (np.arange(n)[:, None] * steps + np.arange(steps - 1, -1, -1)[None, :]).reshape(-1)
    y = ops.get_rows(ops.reshape(contiguous(x), (n * steps, f)), ops.constant(rows, "int32"))
    return ops.reshape(y, (n, steps, f))


def join_features(a, b):
    """a and b joined along the last axis: ggml's concat on the CPU; elsewhere acc into
    zeros (which trains on every backend; cheaper than placement products)."""
    a, b = contiguous(a), contiguous(b)
    if fused():
        return ops.concat(a, b, 0)
    lead = tuple(a.shape[:-1])
    fa, fb = a.shape[-1], b.shape[-1]
    rows = int(np.prod(lead))
    width = fa + fb
    zeros = ops.constant(np.zeros((rows, width), dtype=np.float32))
    y = ops.acc(zeros, ops.reshape(a, (rows, fa)), nb=(width * 4, 4))
    y = ops.acc(y, ops.reshape(b, (rows, fb)), nb=(width * 4, 4), offset=fa * 4)
    return ops.reshape(y, lead + (width,))


def _copy(layer, **changes):
    cfg = dict(layer.get_config())
    cfg.update(changes)
    return type(layer).from_config(cfg)


@register_builtin
class Bidirectional(Layer):
    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, **kwargs):
        super().__init__(**kwargs)
        layer = check_layer("Bidirectional", layer)
        for attr in ("go_backwards", "return_sequences"):
            if not hasattr(layer, attr):
                raise ValueError(f"Bidirectional wraps a recurrent layer (with go_backwards and "
                                 f"return_sequences, as LSTM and GRU); {type(layer).__name__} has no {attr}")
        if merge_mode not in _MERGE_MODES:
            raise ValueError(f"Bidirectional: merge_mode must be one of {_MERGE_MODES}, got {merge_mode!r}")
        if weights is not None:
            raise ValueError("Bidirectional: weights= is not supported; set them with set_weights after building")
        self.merge_mode = merge_mode
        self._layer_spec = serialize_layer(layer)
        self._backward_spec = None
        name = layer.name
        self.forward_layer = _copy(layer, name=f"forward_{name}" if name else None)
        if backward_layer is None:
            backward = _copy(layer, name=f"backward_{name}" if name else None,
                             go_backwards=not layer.go_backwards)
        else:
            backward = check_layer("Bidirectional", backward_layer, "backward_layer")
            if not hasattr(backward, "go_backwards") or backward.go_backwards == layer.go_backwards:
                raise ValueError("Bidirectional: backward_layer must run the other way (go_backwards "
                                 f"{not layer.go_backwards})")
            if getattr(backward, "return_sequences", None) != layer.return_sequences:
                raise ValueError("Bidirectional: backward_layer must have the same return_sequences as layer")
            self._backward_spec = serialize_layer(backward)
        self.backward_layer = backward
        self.return_sequences = bool(layer.return_sequences)

    # --- shapes and masks ----------------------------------------------------------------
    def build(self, input_shape):
        build_sublayer(self.forward_layer, input_shape)
        build_sublayer(self.backward_layer, input_shape)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"Bidirectional expects inputs of shape (steps, features), "
                             f"got {tuple(input_shape[1:])}")
        f = tuple(sublayer_output_shape(self.forward_layer, input_shape))
        b = tuple(sublayer_output_shape(self.backward_layer, input_shape))
        if self.merge_mode is None:
            return [f, b]
        if self.merge_mode == "concat":
            return f[:-1] + (f[-1] + b[-1],)
        if f != b:
            raise ValueError(f"Bidirectional: merge_mode={self.merge_mode!r} needs outputs of one shape, "
                             f"got {f} and {b}")
        return f

    def compute_mask(self, inputs, mask=None):
        # the steps stay with return_sequences, and the mask with them
        if not self.return_sequences:
            return None
        return [mask, mask] if self.merge_mode is None else mask

    # --- the computation --------------------------------------------------------------------
    def call(self, inputs, training=None, mask=None):
        kw = {"training": training}
        if mask is not None:
            kw["mask"] = mask                 # given to the wrapped layers whose call takes it
        y_f = self.forward_layer(inputs, **kw)
        y_b = self.backward_layer(inputs, **kw)
        if self.return_sequences:
            y_b = reverse_steps(y_b)
        if self.merge_mode is None:
            return [y_f, y_b]
        if self.merge_mode == "concat":
            return join_features(y_f, y_b)
        if self.merge_mode == "sum":
            return ops.add(contiguous(y_f), y_b)
        if self.merge_mode == "mul":
            return ops.mul(contiguous(y_f), y_b)
        return ops.scale(ops.add(contiguous(y_f), y_b), 0.5)

    def get_config(self):
        cfg = super().get_config()
        cfg["layer"] = self._layer_spec
        cfg["merge_mode"] = self.merge_mode
        if self._backward_spec is not None:
            cfg["backward_layer"] = self._backward_spec
        return cfg
