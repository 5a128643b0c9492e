"""ConvLSTM1D: an LSTM whose input and recurrent transforms are 1-D convolutions (Keras's).

Inputs are ``(batch, time, steps, channels)`` (``data_format="channels_first"``:
``(batch, time, channels, steps)``).  At each time ``t`` the gates (i, f, c, o,
Keras's order, which is PyTorch's LSTM order i, f, g, o) are

    z = conv(x_t, W_ih; strides, padding, dilation_rate) + b + conv(h, W_hh; "same")
    i, f, o = recurrent_activation(z_i, z_f, z_o);  c' = f c + i activation(z_c)
    h' = o activation(c')

with ``h`` and ``c`` of shape ``(batch, out_steps, filters)``: ``out_steps`` is the
convolution's output length (Conv1D's rule).  The output is the last ``h`` (or
every time's, ``return_sequences``); ``return_state`` adds ``[h, c]``.

Weights in PyTorch's Conv1d layouts: ``weight_ih`` ``(4 filters, channels,
kernel)``, ``weight_hh`` ``(4 filters, filters, kernel)``, ``bias`` ``(4
filters,)``; Keras's ``kernel (kernel, channels, 4 filters)``, ``recurrent_kernel``
and ``bias`` in Keras's order and layouts through ``get_weights()[i]`` /
``set_weights(list)``; the regularizers and constraints see Keras's layouts.
``unit_forget_bias`` starts the forget quarter of the bias at one.

The machinery is LSTM's (``LSTMMath``, ``CellMath.run_steps``, including the
fused CPU cell): every position of the output sequence is a row of the cell's
batch (``batch * out_steps`` rows of ``filters`` units), the input projection
is one convolution over all times at once (an f32 im2col and a mul_mat), and the
recurrent projection one convolution of the state per time.  As LSTM:
``dropout``/``recurrent_dropout`` (masks drawn once per sequence, one per
gate, on the inputs ``(batch, steps, channels)`` and on the state), padding masks over
the times, ``go_backwards``, ``initial_state=[h, c]``, ``stateful`` (its
states kept flat, ``(batch, out_steps * filters)``; ``reset_states`` takes Keras's
shapes too), ``unroll`` (accepted: the graph is always unrolled), and
``Bidirectional(ConvLSTM1D(...))``.
"""

from types import SimpleNamespace

import numpy as np

from pyggml import _scope, ops
from pyggml._validation import check_bool, check_choice, check_positive_int, int_tuple
from pyggml.layers._helpers import contiguous
from pyggml.layers.convolutional.base_conv import pad_nchw, same_pads, to_chw
from pyggml.layers.layer import Layer
from pyggml.layers.recurrent.base_rnn import SequenceMask, TakesInitialState, _several, padding_mask
from pyggml.layers.recurrent.lstm import LSTMMath
from pyggml.layers.recurrent.stateful import Stateful
from pyggml.saving.object_registration import register_builtin

__all__ = ["ConvLSTM1D"]


@register_builtin
class ConvLSTM1D(Stateful, TakesInitialState, SequenceMask, LSTMMath, Layer):
    _config_activity_regularizer = True      # (Keras's config names it, None included)
    float_inputs = True

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1,
                 activation="tanh", recurrent_activation="sigmoid", use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", unit_forget_bias=True,
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, seed=None,
                 return_sequences=False, return_state=False, go_backwards=False, stateful=False, unroll=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.init_stateful(check_bool("stateful", stateful))
        check_positive_int("filters", filters, 1 << 16)
        self.init_cell(filters, activation=activation, recurrent_activation=recurrent_activation, use_bias=use_bias,
                       kernel_initializer=kernel_initializer, recurrent_initializer=recurrent_initializer,
                       bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                       recurrent_regularizer=recurrent_regularizer, bias_regularizer=bias_regularizer,
                       kernel_constraint=kernel_constraint, recurrent_constraint=recurrent_constraint,
                       bias_constraint=bias_constraint, dropout=dropout, recurrent_dropout=recurrent_dropout,
                       seed=seed)
        self.filters = self.units
        self.kernel_size = int_tuple("kernel_size", kernel_size, 1)
        self.strides = int_tuple("strides", strides, 1)
        self.dilation_rate = int_tuple("dilation_rate", dilation_rate, 1)
        if self.strides[0] > 1 and self.dilation_rate[0] > 1:
            raise ValueError(f"ConvLSTM1D: strides > 1 is not compatible with dilation_rate > 1 (Keras's rule), got "
                             f"strides={self.strides} and dilation_rate={self.dilation_rate}")
        self.padding = check_choice("padding", padding.lower() if isinstance(padding, str) else padding,
                                    ("valid", "same"))
        if data_format is None:
            data_format = "channels_last"
        self.data_format = check_choice("data_format", data_format, ("channels_last", "channels_first"))
        self.unit_forget_bias = check_bool("unit_forget_bias", unit_forget_bias)
        self.return_sequences = check_bool("return_sequences", return_sequences)
        self.return_state = check_bool("return_state", return_state)
        self.go_backwards = check_bool("go_backwards", go_backwards)
        self.unroll = check_bool("unroll", unroll)
        self._out_steps = None
        self._batch = None               # the batch of the call being built (the state's convolution needs it)

    @classmethod
    def kind(cls):
        return "conv_lstm1d" if cls is ConvLSTM1D else super().kind()        # Keras's name

    # --- shapes -----------------------------------------------------------------------------
    def _out_size(self, size, i):
        """The output's length along spatial axis i for the input's ``size`` (Conv's rule)."""
        k, s, d = self.kernel_size[i], self.strides[i], self.dilation_rate[i]
        span = (k - 1) * d + 1
        if self.padding == "same":
            return -(-size // s)
        if size < span:
            raise ValueError(f"{type(self).__name__}: the kernel (size {k}, dilation {d}) is longer than the {size} "
                             f"{'steps' if len(self.kernel_size) == 1 else 'cells along axis %d' % (i + 2)} of "
                             f"the input")
        return (size - span) // s + 1

    def _out_len(self, steps):
        return self._out_size(steps, 0)

    def _steps_channels(self, x_shape):
        x_shape = tuple(x_shape)
        if len(x_shape) != 4:
            raise ValueError(f"ConvLSTM1D expects inputs of shape (time, steps, channels) "
                             f"({'time, channels, steps' if self.data_format == 'channels_first' else 'channels last'})"
                             f", got {x_shape[1:]}")
        steps, channels = (x_shape[3], x_shape[2]) if self.data_format == "channels_first" else x_shape[2:]
        if steps is None or channels is None:
            raise ValueError(f"ConvLSTM1D needs the steps and the channels of its inputs known, got {x_shape[1:]}")
        return steps, channels

    def _state_shape(self, batch, out_steps):
        return (batch, self.filters, out_steps) if self.data_format == "channels_first" \
            else (batch, out_steps, self.filters)

    @property
    def state_sizes(self):
        """The size of each state (h, c), flat: out_steps * filters."""
        if self._out_steps is None:
            raise ValueError("ConvLSTM1D: the state sizes are known once the layer is built")
        return [self._out_steps * self.filters] * 2

    def reset_states(self, states=None):
        """Zeros, or the given [h, c], each (batch, out_steps, filters) (channels_first: (batch,
        filters, out_steps)); kept flat, (batch, out_steps * filters)."""
        if states is not None and self.stateful and self._out_steps is not None:
            values = list(states) if isinstance(states, (list, tuple)) else [states]
            flat = []
            for a in values:
                a = np.asarray(a)
                if a.ndim == 3 and a.dtype != object and a.shape[1:] == self._state_shape(None, self._out_steps)[1:]:
                    a = a.transpose(0, 2, 1) if self.data_format == "channels_first" else a
                    a = a.reshape(a.shape[0], -1)
                flat.append(a)
            states = flat
        return super().reset_states(states)

    reset_state = reset_states

    def split_inputs(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            return inputs, None
        if len(inputs) != 3:
            raise ValueError(f"ConvLSTM1D takes 2 initial states (h and c, each (batch, out_steps, filters)), "
                             f"got {len(inputs) - 1}")
        return inputs[0], list(inputs[1:])

    def compute_output_shape(self, input_shape):
        x_shape, state_shapes = self.split_inputs(list(input_shape)) if _several(input_shape) else (input_shape, None)
        steps, _ = self._steps_channels(x_shape)
        batch = x_shape[0]
        st = self._state_shape(batch, self._out_len(steps))
        for s in state_shapes or ():
            if tuple(s[1:]) != st[1:]:
                raise ValueError(f"ConvLSTM1D: an initial state must have shape (batch, {st[1]}, {st[2]}), "
                                 f"got {tuple(s)}")
        out = (batch, x_shape[1]) + st[1:] if self.return_sequences else st
        return [out, st, st] if self.return_state else out

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        steps, channels = self._steps_channels(input_shape)
        self._out_steps = self._out_len(steps)
        f, k = self.filters, self.kernel_size[0]
        self.weight_ih = self.add_weight("weight_ih", (4 * f, channels, k), self.kernel_initializer,
                                         regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.weight_hh = self.add_weight("weight_hh", (4 * f, f, k), self.recurrent_initializer,
                                         regularizer=self.recurrent_regularizer, constraint=self.recurrent_constraint)
        # Keras's kernel (k, channels, 4 filters) and recurrent kernel (k, filters, 4 filters)
        self.weight_ih.keras_axes = self.weight_hh.keras_axes = (2, 1, 0)
        self.bias = self.add_weight("bias", (4 * f,), self.bias_ih_initializer(), regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None

    # Keras's single bias has its own regularizer and constraint (LSTM's two-bias rules do not apply)
    def extra_penalty_terms(self):
        return []

    def extra_constraint_rules(self):
        return []

    # --- the convolutions ---------------------------------------------------------------------
    def _conv_rows(self, x, w2, rows, stride, dilation, padding):
        """x (n, steps, channels) convolved with w2 (rows, channels * k): (n * out_steps, rows)."""
        n, steps, c = x.shape
        k = self.kernel_size[0]
        xc = to_chw(ops.reshape(contiguous(x), (n, 1, steps, c)))              # (n, c, 1, steps)
        before = after = 0
        if padding == "same":
            _, before, after = same_pads(steps, (k - 1) * dilation + 1, stride)
        pw = before
        if before != after:
            xc, pw = pad_nchw(xc, 0, 0, before, after), 0
        kshape = _scope.require("ConvLSTM1D").ctx.new_tensor((rows, c, 1, k))   # im2col reads its shape alone
        cols = ops.im2col(kshape, xc, stride, 1, pw, 0, dilation, 1, True, "f32")
        ow = cols.shape[2]
        return ops.mul_mat(w2, ops.reshape(cols, (n * ow, c * k)))

    def _gate_kernels(self, weight, count):
        """The kernel as (rows, in * k) for mul_mat: whole, or one view per gate."""
        g4, cin, k = weight.shape
        if count == 1:
            return [ops.reshape(weight, (g4, cin * k))]
        f = g4 // 4
        return [ops.view(weight, (f, cin * k), offset=g * f * cin * k * 4) for g in range(4)]

    def ih_product(self, x):
        """The input convolution at every time at once, time-major: (time * batch * out_steps, 4 filters);
        x (batch, time, steps, channels), or a list of 4 (a dropped-out copy per gate)."""
        xs = x if isinstance(x, list) else [x]
        b, t, steps, c = xs[0].shape
        kernels = self._gate_kernels(self.weight_ih, len(xs))
        parts = []
        for xg, w2 in zip(xs, kernels):
            xt = ops.permute_axes(contiguous(xg), (1, 0, 2, 3)) if b > 1 and t > 1 else contiguous(xg)
            xt = ops.reshape(contiguous(xt), (t * b, steps, c))
            parts.append(self._conv_rows(xt, w2, w2.shape[0], self.strides[0], self.dilation_rate[0], self.padding))
        return parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)

    def hh_product(self, h):
        """The state's convolution ("same", stride 1): h (batch * out_steps, filters) -> (rows, 4 filters)."""
        b = self._batch
        h3 = ops.reshape(contiguous(h), (b, h.shape[0] // b, self.filters))
        masks = self._rec_masks
        if not masks:
            return self._conv_rows(h3, self._gate_kernels(self.weight_hh, 1)[0], 4 * self.filters, 1, 1, "same")
        parts = [self._conv_rows(ops.mul(h3, m), w2, self.filters, 1, 1, "same")
                 for m, w2 in zip(masks, self._gate_kernels(self.weight_hh, 4))]
        return ops.concatenate(parts, axis=-1)

    def input_projection(self, x):
        p = self.ih_product(x)
        return ops.add(p, self.bias) if self.use_bias else p

    def fused_projection(self, x):
        p = self.ih_product(x)
        return ops.bias_act(p, self.bias) if self.use_bias else p

    def recurrent_projection(self, h):
        return self.hh_product(h)

    # --- the call ------------------------------------------------------------------------------
    def _dropout_masks(self, x, out_steps, training):
        if not training or (self.dropout == 0 and self.recurrent_dropout == 0):
            return None, None
        builder = _scope.require("ConvLSTM1D")
        b, _, steps, c = x.shape
        ins = [builder.random_keep_mask((b, 1, steps, c), self.dropout) for _ in range(4)] if self.dropout else None
        recs = [builder.random_keep_mask((b, out_steps, self.filters), self.recurrent_dropout) for _ in range(4)] \
            if self.recurrent_dropout else None
        return ins, recs

    def _to_rows(self, s, b, out_steps):
        """A state (batch, out_steps, filters) (channels_first: (batch, filters, out_steps)) as the
        cell's rows (batch * out_steps, filters)."""
        s = contiguous(s)
        if self.data_format == "channels_first":
            s = ops.cont(ops.permute_axes(s, (0, 2, 1)))
        return ops.reshape(s, (b * out_steps, self.filters))

    def _from_rows(self, r, b, out_steps):
        s = ops.reshape(contiguous(r), (b, out_steps, self.filters))
        return ops.cont(ops.permute_axes(s, (0, 2, 1))) if self.data_format == "channels_first" else s

    def call(self, inputs, training=None, mask=None):
        x, states = self.split_inputs(inputs)
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        if self.data_format == "channels_first":
            x = ops.cont(ops.permute_axes(contiguous(x), (0, 1, 3, 2)))            # (b, t, steps, channels)
        b, t, steps, _ = x.shape
        o = self._out_len(steps)
        rows = b * o
        want = self._state_shape(b, o)
        if states is not None:
            for st in states:
                if tuple(st.shape) != want:
                    raise ValueError(f"ConvLSTM1D: an initial state must have shape {want}, got {tuple(st.shape)}")
            states = tuple(self._to_rows(st, b, o) for st in states)
        kept = self.stateful_initial_states(b)
        if states is None and kept is not None:
            states = tuple(ops.reshape(contiguous(s), (rows, self.filters)) for s in kept)
        if mask is not None:
            m = contiguous(ops.as_tensor(mask))
            if len(m.shape) == 3 and tuple(m.shape[:2]) == (b, t) and m.shape[2] > 1:
                # a mask per position (Masking on these inputs): a time is real where any position is
                m = ops.step(ops.sum_rows(m))
            mask = m
            # every output position of a sample shares its time's mask
            m = ops.reshape(padding_mask(mask, b, t, "ConvLSTM1D"), (b, 1, t))
            like = _scope.require("ConvLSTM1D").ctx.new_tensor((b, o, t))
            mask = ops.reshape(ops.repeat(m, like), (rows, t))
        in_masks, self._rec_masks = self._dropout_masks(x, o, training)
        xin = x if in_masks is None else [ops.mul(contiguous(x), mk) for mk in in_masks]
        self._batch = b
        try:
            # run_steps reads the cell's batch (rows) and the times from the shape it is given
            shape = SimpleNamespace(shape=(rows, t, self.filters))
            out, final = self.run_steps(shape, mask, xin, states, self.go_backwards, self.return_sequences)
        finally:
            self._rec_masks = None
            self._batch = None
        if self.stateful:
            self.keep_final_states([ops.reshape(contiguous(s), (b, o * self.filters)) for s in final])
        if self.return_sequences:
            seq = ops.reshape(contiguous(out), (b, o, t, self.filters))
            seq = ops.cont(ops.permute_axes(seq, (0, 2, 1, 3)))                      # (b, t, o, filters)
            out = ops.cont(ops.permute_axes(seq, (0, 1, 3, 2))) if self.data_format == "channels_first" else seq
        else:
            out = self._from_rows(out, b, o)
        if self.return_state:
            return [out] + [self._from_rows(s, b, o) for s in final]
        return out

    def get_config(self):
        cfg = super().get_config()
        cell = self.cell_config()
        cell.pop("units")
        cfg.update(filters=self.filters, kernel_size=self.kernel_size, strides=self.strides, padding=self.padding,
                   data_format=self.data_format, dilation_rate=self.dilation_rate)
        cfg.update(cell)
        cfg.update(unit_forget_bias=self.unit_forget_bias, return_sequences=self.return_sequences,
                   return_state=self.return_state, go_backwards=self.go_backwards, stateful=self.stateful,
                   unroll=self.unroll)
        return cfg
