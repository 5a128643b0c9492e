"""ConvLSTM2D: an LSTM whose input and recurrent transforms are 2-D convolutions (Keras's),
over videos ``(batch, time, H, W, channels)`` (channels-last), folded in the graph to
``(batch * time, H, W, channels)`` (pyggml._fold).

ConvLSTM1D's recurrence with images for sequences: at each time the gates (i, f, c, o) are
``conv(x_t, W_ih; strides, padding, dilation_rate) + b + conv(h, W_hh; "same")``, with ``h``
and ``c`` of shape ``(batch, OH, OW, filters)`` (Conv2D's output size).  Every pixel of the
state is a row of the LSTM cell (``batch * OH * OW`` rows of ``filters`` units), so the cell,
the fused CPU cell included, is LSTM's; the input convolution runs over all times at once.
The output is the last ``h`` (4-D) or, with ``return_sequences``, every time's
``(batch, time, OH, OW, filters)``; ``return_state`` adds ``[h, c]``.

Weights in PyTorch's Conv2d layouts: ``weight_ih`` ``(4 filters, channels, kh, kw)``,
``weight_hh`` ``(4 filters, filters, kh, kw)``, ``bias`` ``(4 filters,)``; Keras's ``kernel``
``(kh, kw, channels, 4 filters)`` and ``recurrent_kernel`` through ``get_weights()[i]`` and
``set_weights(list)``.  As ConvLSTM1D: dropout and recurrent_dropout, a padding mask over the
times, ``go_backwards``, ``initial_state=[h, c]``, ``stateful`` and ``unit_forget_bias``.
"""

from types import SimpleNamespace

import numpy as np

from pyggml import _fold, _scope, ops
from pyggml._validation import int_tuple
from pyggml.layers._helpers import contiguous
from pyggml.layers.convolutional.base_conv import same_pads, to_chw
from pyggml.layers.convolutional.conv import conv_chw_rows
from pyggml.layers.recurrent.base_rnn import _several, padding_mask
from pyggml.layers.recurrent.conv_lstm1d import ConvLSTM1D
from pyggml.layers.recurrent.stateful import Stateful
from pyggml.saving.object_registration import register_builtin

__all__ = ["ConvLSTM2D"]


@register_builtin
class ConvLSTM2D(ConvLSTM1D):
    takes_5d = True

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1,
                 **kwargs):
        if data_format not in (None, "channels_last"):
            raise ValueError(f"ConvLSTM2D: data_format must be 'channels_last' (Keras's default), got "
                             f"{data_format!r}")
        super().__init__(filters, 1, 1, padding, None, 1, **kwargs)
        self.kernel_size = int_tuple("kernel_size", kernel_size, 2)
        self.strides = int_tuple("strides", strides, 2)
        self.dilation_rate = int_tuple("dilation_rate", dilation_rate, 2)
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(f"ConvLSTM2D: strides > 1 is not compatible with dilation_rate > 1 (Keras's rule), got "
                             f"strides={self.strides} and dilation_rate={self.dilation_rate}")
        self._out_hw = None

    # --- shapes -----------------------------------------------------------------------------
    def _frames(self, x_shape):
        """(H, W, channels) of the frames of inputs of Keras shape x_shape."""
        x_shape = tuple(x_shape)
        if len(x_shape) != 5:
            raise ValueError(f"ConvLSTM2D expects inputs of shape (time, H, W, channels), got {x_shape[1:]}")
        if None in x_shape[2:]:
            raise ValueError(f"ConvLSTM2D needs its frames' size and channels known, got {x_shape[1:]}")
        return x_shape[2:]

    def _state_shape(self, batch, out_hw):
        return (batch,) + tuple(out_hw) + (self.filters,)

    def reset_states(self, states=None):
        """Zeros, or the given [h, c], each (batch, OH, OW, filters); kept flat."""
        if states is not None and self.stateful and self._out_hw is not None:
            values = list(states) if isinstance(states, (list, tuple)) else [states]
            states = [np.asarray(a).reshape(len(a), -1) if np.asarray(a).ndim == 4 and np.asarray(a).dtype != object
                      else a for a in values]
        return Stateful.reset_states(self, states)

    reset_state = reset_states

    def split_inputs(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            return inputs, None
        if len(inputs) != 3:
            raise ValueError(f"ConvLSTM2D takes 2 initial states (h and c, each (batch, OH, OW, filters)), "
                             f"got {len(inputs) - 1}")
        return inputs[0], list(inputs[1:])

    def compute_output_shape(self, input_shape):
        x_shape, state_shapes = self.split_inputs(list(input_shape)) if _several(input_shape) else (input_shape, None)
        h, w, _ = self._frames(x_shape)
        batch = x_shape[0]
        st = self._state_shape(batch, (self._out_size(h, 0), self._out_size(w, 1)))
        for s in state_shapes or ():
            if tuple(s[1:]) != st[1:]:
                raise ValueError(f"ConvLSTM2D: an initial state must have shape (batch, {st[1]}, {st[2]}, {st[3]}), "
                                 f"got {tuple(s)}")
        out = (batch, x_shape[1]) + st[1:] if self.return_sequences else st
        return [out, st, st] if self.return_state else out

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        x_shape = self.split_inputs(list(input_shape))[0] if _several(input_shape) else input_shape
        h, w, channels = self._frames(x_shape)
        self._out_hw = (self._out_size(h, 0), self._out_size(w, 1))
        self._out_steps = self._out_hw[0] * self._out_hw[1]          # the cell's rows per sample (state_sizes)
        f, (kh, kw) = self.filters, self.kernel_size
        self.weight_ih = self.add_weight("weight_ih", (4 * f, channels, kh, kw), self.kernel_initializer,
                                         regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.weight_hh = self.add_weight("weight_hh", (4 * f, f, kh, kw), self.recurrent_initializer,
                                         regularizer=self.recurrent_regularizer, constraint=self.recurrent_constraint)
        # Keras's kernel (kh, kw, channels, 4 filters) and recurrent kernel (kh, kw, filters, 4 filters)
        self.weight_ih.keras_axes = self.weight_hh.keras_axes = (2, 3, 1, 0)
        self.bias = self.add_weight("bias", (4 * f,), self.bias_ih_initializer(), regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None

    # --- the convolutions ---------------------------------------------------------------------
    def _conv_rows(self, x, w2, rows, stride, dilation, padding):
        """Images x (n, H, W, channels) convolved with w2 (rows, channels * kh * kw):
        (n * OH * OW, rows)."""
        _, h, w, _ = x.shape
        (kh, kw) = self.kernel_size
        pads = [(0, 0), (0, 0)]
        if padding == "same":
            for i, (size, k) in enumerate(((h, kh), (w, kw))):
                pads[i] = same_pads(size, (k - 1) * dilation[i] + 1, stride[i])[1:]
        return conv_chw_rows(to_chw(contiguous(x)), w2, kh, kw, pads, tuple(stride), tuple(dilation))[0]

    def _gate_kernels(self, weight, count):
        """The kernel as (rows, in * kh * kw) for mul_mat: whole, or one view per gate."""
        g4, cin, kh, kw = weight.shape
        if count == 1:
            return [ops.reshape(weight, (g4, cin * kh * kw))]
        f = g4 // 4
        return [ops.view(weight, (f, cin * kh * kw), offset=g * f * cin * kh * kw * 4) for g in range(4)]

    def ih_product(self, x):
        """The input convolution at every time at once, time-major: (time * batch * OH * OW,
        4 filters); x the folded frames (batch * time, H, W, channels), or a list of 4 (a
        dropped-out copy per gate)."""
        xs = x if isinstance(x, list) else [x]
        b = self._batch
        bt, h, w, c = xs[0].shape
        t = bt // b
        kernels = self._gate_kernels(self.weight_ih, len(xs))
        parts = []
        for xg, w2 in zip(xs, kernels):
            xt = contiguous(xg)
            if b > 1 and t > 1:
                xt = ops.cont(ops.permute_axes(ops.reshape(xt, (b, t, h * w * c)), (1, 0, 2)))
            xt = ops.reshape(contiguous(xt), (t * b, h, w, c))
            parts.append(self._conv_rows(xt, w2, w2.shape[0], self.strides, self.dilation_rate, self.padding))
        return parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)

    def hh_product(self, h):
        """The state's convolution ("same", stride 1): h (batch * OH * OW, filters) -> (rows, 4 filters)."""
        b = self._batch
        h4 = ops.reshape(contiguous(h), (b,) + tuple(self._out_hw) + (self.filters,))
        masks = self._rec_masks
        if not masks:
            return self._conv_rows(h4, self._gate_kernels(self.weight_hh, 1)[0], 4 * self.filters, (1, 1), (1, 1),
                                   "same")
        parts = [self._conv_rows(ops.mul(h4, m), w2, self.filters, (1, 1), (1, 1), "same")
                 for m, w2 in zip(masks, self._gate_kernels(self.weight_hh, 4))]
        return ops.concatenate(parts, axis=-1)

    # --- the call ------------------------------------------------------------------------------
    def call(self, inputs, training=None, mask=None):
        x, states = self.split_inputs(inputs)
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        shape = _fold.in_shape(self)
        b = _fold.batch_of(x, shape)
        t = shape[1]
        h, w, c = self._frames(shape)
        oh, ow = self._out_size(h, 0), self._out_size(w, 1)
        self._out_hw = (oh, ow)
        rows = b * oh * ow
        want = self._state_shape(b, (oh, ow))
        if states is not None:
            for st in states:
                if tuple(st.shape) != want:
                    raise ValueError(f"ConvLSTM2D: an initial state must have shape {want}, got {tuple(st.shape)}")
            states = tuple(ops.reshape(contiguous(st), (rows, self.filters)) for st in states)
        kept = self.stateful_initial_states(b)
        if states is None and kept is not None:
            states = tuple(ops.reshape(contiguous(s), (rows, self.filters)) for s in kept)
        if mask is not None:
            m = ops.reshape(padding_mask(contiguous(ops.as_tensor(mask)), b, t, "ConvLSTM2D"), (b, 1, t))
            like = _scope.require("ConvLSTM2D").ctx.new_tensor((b, oh * ow, t))
            mask = ops.reshape(ops.repeat(m, like), (rows, t))       # every pixel shares its time's mask
        xin = x
        self._rec_masks = None
        if training and (self.dropout or self.recurrent_dropout):
            builder = _scope.require("ConvLSTM2D")
            if self.dropout:
                # one mask per sample and gate, the same at every time
                x3 = ops.reshape(contiguous(x), (b, t, h * w * c))
                xin = [ops.reshape(ops.mul(x3, builder.random_keep_mask((b, 1, h * w * c), self.dropout)),
                                   (b * t, h, w, c)) for _ in range(4)]
            if self.recurrent_dropout:
                self._rec_masks = [builder.random_keep_mask(want, self.recurrent_dropout) for _ in range(4)]
        self._batch = b
        try:
            out, final = self.run_steps(SimpleNamespace(shape=(rows, t, self.filters)), mask, xin, states,
                                        self.go_backwards, self.return_sequences)
        finally:
            self._rec_masks = None
            self._batch = None
        if self.stateful:
            self.keep_final_states([ops.reshape(contiguous(s), (b, oh * ow * self.filters)) for s in final])
        if self.return_sequences:
            seq = ops.reshape(contiguous(out), (b, oh * ow, t, self.filters))
            seq = ops.cont(ops.permute_axes(seq, (0, 2, 1, 3)))                       # (b, t, OH * OW, filters)
            out = ops.reshape(seq, (b * t, oh, ow, self.filters))                      # folded: pyggml._fold
        else:
            out = ops.reshape(contiguous(out), want)
        if self.return_state:
            return [out] + [ops.reshape(contiguous(s), want) for s in final]
        return out

    def get_config(self):
        cfg = super().get_config()
        cfg["data_format"] = "channels_last"
        return cfg
