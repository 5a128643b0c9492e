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

A wrapped layer with ``return_state`` makes the call return ``[output,
*forward states, *backward states]``, and ``initial_state=[...]`` (the forward
layer's states, then the backward one's) starts both from given states, as Keras.
"""

import numpy as np

from pyggml import ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.layers.recurrent.base_rnn import TakesInitialState
from pyggml.layers.wrappers.wrapping import build_sublayer, check_layer, serialize_layer, sublayer_output_shape
from pyggml.saving.object_registration import register_builtin

__all__ = ["Bidirectional", "reverse_steps", "join_features"]

_MERGE_MODES = ("concat", "sum", "mul", "ave", None)


def reverse_steps(x):
    """(N, steps, ...) with its steps in reverse order (get_rows, which trains)."""
    n, steps = x.shape[:2]
    f = int(np.prod(x.shape[2:]))
    rows = (np.arange(n)[:, None] * steps + np.arange(steps - 1, -1, -1)[None, :]).reshape(-1)
    y = ops.get_rows(ops.reshape(contiguous(x), (n * steps, f)), ops.constant(rows, "int32"))
    return ops.reshape(y, tuple(x.shape))


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
class Bidirectional(TakesInitialState, Layer):
    build_shape_rule = "last"        # a later call may have other lengths (Layer._fits_built)

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
            if bool(getattr(backward, "stateful", False)) != bool(getattr(layer, "stateful", False)):
                raise ValueError("Bidirectional: backward_layer must have the same stateful as layer")
            self._backward_spec = serialize_layer(backward)
        self.backward_layer = backward
        self.return_sequences = bool(layer.return_sequences)
        self.return_state = bool(getattr(layer, "return_state", False))
        self.n_states = getattr(layer, "n_states", 1)
        self.stateful = bool(getattr(layer, "stateful", False))

    # --- stateful=True (Keras's: both directions keep their states) ----------------------------
    def _call_symbolic(self, inputs, nodes, kwargs):
        batch = next((n.batch_size for n in nodes if n.batch_size is not None), None)
        for l in (self.forward_layer, self.backward_layer):
            declare = getattr(l, "declare_batch_size", None)
            if declare is not None:
                declare(batch)
        return super()._call_symbolic(inputs, nodes, kwargs)

    @property
    def states(self):
        """The forward layer's states, then the backward one's (stateful layers), or None."""
        f, b = getattr(self.forward_layer, "states", None), getattr(self.backward_layer, "states", None)
        return None if f is None and b is None else list(f or []) + list(b or [])

    def reset_states(self, states=None):
        """Zeros (or the given arrays: the forward layer's states, then the backward one's) in
        both directions' states."""
        if states is None:
            for l in (self.forward_layer, self.backward_layer):
                if hasattr(l, "reset_states"):
                    l.reset_states()
            return
        values = list(states) if isinstance(states, (list, tuple)) else [states]
        n = self.n_states
        if len(values) != 2 * n:
            raise ValueError(f"Bidirectional.reset_states takes {2 * n} states (the forward layer's {n}, then "
                             f"the backward one's), got {len(values)}")
        self.forward_layer.reset_states(values[:n])
        self.backward_layer.reset_states(values[n:])

    reset_state = reset_states

    # --- initial and final states ----------------------------------------------------------
    def _split(self, inputs):
        """(x, forward states, backward states) from x or [x, *states] (tensors or shapes)."""
        if not isinstance(inputs, (list, tuple)) or not inputs or isinstance(inputs[0], (int, type(None))):
            return inputs, None, None
        n = self.n_states
        if len(inputs) != 1 + 2 * n:
            raise ValueError(f"Bidirectional takes {2 * n} initial states (the forward layer's {n}, then the "
                             f"backward one's), got {len(inputs) - 1}")
        return inputs[0], list(inputs[1:1 + n]), list(inputs[1 + n:])

    # --- shapes and masks ----------------------------------------------------------------
    # Keras's list of the pair: the forward layer's list, then the backward's (an LSTM's three
    # arrays each, where pyggml keeps PyTorch's four weights)
    def _keras_list(self):
        fs, bs = self.forward_layer._keras_list(), self.backward_layer._keras_list()
        if fs is None or bs is None:
            return None
        n_f, pf, pb = fs[2], "forward_layer.", "backward_layer."

        def part(weights, prefix):
            return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}

        def to_list(weights):
            return fs[0](part(weights, pf)) + bs[0](part(weights, pb))

        def from_list(arrays):
            arrays = list(arrays)
            out = {pf + k: v for k, v in fs[1](arrays[:n_f]).items()}
            out.update({pb + k: v for k, v in bs[1](arrays[n_f:]).items()})
            return out
        return to_list, from_list, n_f + bs[2]

    def get_weights(self):
        spec = self._keras_list()
        if spec is None:
            return super().get_weights()
        from pyggml.layers._keras_weights import LayerWeights
        return LayerWeights(self.named_variables(), keras_list=spec[:2])

    def set_weights(self, weights):
        """As Layer.set_weights; also Keras's list: the forward layer's arrays, then the backward's."""
        spec = self._keras_list() if isinstance(weights, (list, tuple)) and self.built else None
        if spec is not None and len(weights) == spec[2] != len(self.named_variables()):
            weights = spec[1](weights)
        super().set_weights(weights)

    def build(self, input_shape):
        build_sublayer(self.forward_layer, input_shape)        # x's shape (TakesInitialState)
        build_sublayer(self.backward_layer, input_shape)

    def compute_output_shape(self, input_shape):
        x_shape, _, _ = self._split(input_shape)
        if len(x_shape) < 3:            # (steps, features); ConvLSTM1D's (time, steps, channels) too
            raise ValueError(f"Bidirectional expects inputs of shape (steps, features), "
                             f"got {tuple(x_shape[1:])}")
        f = sublayer_output_shape(self.forward_layer, x_shape)
        b = sublayer_output_shape(self.backward_layer, x_shape)
        states = []
        if self.return_state:
            states = [tuple(s) for s in list(f[1:]) + list(b[1:])]
            f, b = f[0], b[0]
        f, b = tuple(f), tuple(b)
        if self.merge_mode is None:
            return [f, b] + states
        if self.merge_mode == "concat":
            out = f[:-1] + (f[-1] + b[-1],)
        elif f != b:
            raise ValueError(f"Bidirectional: merge_mode={self.merge_mode!r} needs outputs of one shape, "
                             f"got {f} and {b}")
        else:
            out = f
        return [out] + states if self.return_state else out

    def compute_mask(self, inputs, mask=None):
        # the steps stay with return_sequences, and the mask with them; the states have none
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        seq = mask if self.return_sequences else None
        outs = [seq, seq] if self.merge_mode is None else [seq]
        if self.return_state:
            return outs + [None] * (2 * self.n_states)
        return outs if self.merge_mode is None else seq

    # --- the computation --------------------------------------------------------------------
    def call(self, inputs, training=None, mask=None):
        x, f_st, b_st = self._split(inputs)
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        kw = {"training": training}
        if mask is not None:
            kw["mask"] = mask                 # given to the wrapped layers whose call takes it
        y_f = self.forward_layer(x if f_st is None else [x] + f_st, **kw)
        y_b = self.backward_layer(x if b_st is None else [x] + b_st, **kw)
        states = []
        if self.return_state:
            states = list(y_f[1:]) + list(y_b[1:])
            y_f, y_b = y_f[0], y_b[0]
        if self.return_sequences:
            y_b = reverse_steps(y_b)
        if self.merge_mode is None:
            return [y_f, y_b] + states
        if self.merge_mode == "concat":
            out = join_features(y_f, y_b)
        elif self.merge_mode == "sum":
            out = ops.add(contiguous(y_f), y_b)
        elif self.merge_mode == "mul":
            out = ops.mul(contiguous(y_f), y_b)
        else:
            out = ops.scale(ops.add(contiguous(y_f), y_b), 0.5)
        return [out] + states if self.return_state else out

    def get_config(self):
        cfg = super().get_config()
        cfg["layer"] = self._layer_spec
        cfg["merge_mode"] = self.merge_mode
        # (the backward layer made here too, as Keras's config holds it)
        cfg["backward_layer"] = self._backward_spec if self._backward_spec is not None else \
            serialize_layer(self.backward_layer)
        return cfg
