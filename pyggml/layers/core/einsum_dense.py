"""EinsumDense (Keras's): ``activation(einsum(equation, x, kernel) + bias)``.

``equation`` has two operands, the input's and the kernel's, and the output's
letters: ``"ab,bc->ac"`` (Dense), ``"abc,cd->abd"`` (Dense over the last axis of
a sequence), ``"abc,cde->abde"`` (a projection into heads), ``"abcd,cde->abe"``
(heads back), ``"...b,bc->...c"`` (any leading dims, "..." first) or
``"ab...,bc->ac..."`` ("..." last).  The input's letters include the batch.
``output_shape`` is the output's shape without the batch (an int for one dim;
``None`` entries are taken from the input).  ``bias_axes`` names the output's
letters the bias varies along (e.g. ``"d"``; None: no bias).

Weights, in Keras's layouts: ``kernel`` shaped as the kernel's letters say,
``bias`` of Keras's bias shape (the bias axes' sizes from the first bias letter
of the output on, 1 at the other letters).

The einsum is mapped onto a matrix product: the input is permuted and reshaped
to (rows, contracted), the kernel to (columns, contracted), ggml's mul_mat
takes them, and the result is reshaped and permuted to the output's order.
Letters shared by input, kernel and output become batch dims of the product.
An equation that does not map this way (a letter repeated in one operand, a
letter of the input found nowhere else, more than two operands) is refused
with a ValueError that says why.
"""

import re
import string

import numpy as np

from pyggml import ops
from pyggml._validation import is_int
from pyggml.layers._helpers import Activated, contiguous, set_weight_options, weight_options_config
from pyggml.layers._lora import LoraWeights
from pyggml.layers.core.quantize import QuantizedWeights
from pyggml.saving.object_registration import register_builtin
from pyggml.initializers import config_value as _init_config

__all__ = ["EinsumDense"]

_OPTIONS = ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint")

_PLAIN = re.compile(r"^([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$")
_LEFT = re.compile(r"^\.\.\.([a-zA-Z]+),([a-zA-Z]+)->\.\.\.([a-zA-Z]+)$")
_RIGHT = re.compile(r"^([a-zA-Z]{2,})\.\.\.,([a-zA-Z]+)->([a-zA-Z]+)\.\.\.$")


def _parse(equation):
    """(input spec, kernel spec, output spec, where "..." is: None, "left" or "right")."""
    if not isinstance(equation, str):
        raise TypeError(f"EinsumDense: equation must be a str such as 'ab,bc->ac', got {equation!r}")
    eq = equation.replace(" ", "")
    for pattern, elided in ((_PLAIN, None), (_LEFT, "left"), (_RIGHT, "right")):
        m = pattern.match(eq)
        if m:
            ins, ker, out = m.groups()
            for spec, what in ((ins, "input"), (ker, "kernel"), (out, "output")):
                if len(set(spec)) != len(spec):
                    raise ValueError(f"EinsumDense: equation {equation!r}: the {what} spec {spec!r} repeats a "
                                     f"letter (a diagonal or trace), which does not map onto a matrix product")
            return ins, ker, out, elided
    raise ValueError(f"EinsumDense: invalid equation {equation!r}: expected the form 'ab,bc->ac' (two operands, "
                     f"the input's and the kernel's, and the output), optionally with '...' at the start of the "
                     f"input and output ('...b,bc->...c') or at their end ('ab...,bc->ac...')")


def _check_output_shape(output_shape):
    if output_shape is None:
        raise TypeError("EinsumDense needs an output_shape (the output's shape without the batch)")
    dims = [output_shape] if is_int(output_shape) or output_shape is None else output_shape
    try:
        dims = list(dims)
    except TypeError:
        raise TypeError(f"EinsumDense: output_shape must be an int or a tuple of ints (None where the input's "
                        f"size is used), got {output_shape!r}") from None
    out = []
    for d in dims:
        if d is None:
            out.append(None)
        elif not is_int(d) or isinstance(d, bool) or d < 1:
            raise ValueError(f"EinsumDense: output_shape entries must be positive ints or None, got "
                             f"{output_shape!r}")
        else:
            out.append(int(d))
    return out


def analyze(equation, bias_axes, input_shape, output_shape):
    """The plan for an input of ``input_shape`` (the batch included, None for it):
    (full input spec, kernel spec, full output spec, kernel shape, bias shape or None,
    full output shape), "..." replaced by letters of its own."""
    ins, ker, out, elided = _parse(equation)
    input_shape = tuple(input_shape)
    n_elided = len(input_shape) - len(ins)
    if n_elided < 0 or (elided is None and n_elided != 0):
        raise ValueError(f"EinsumDense: equation {equation!r} has {len(ins)} input letters; the input has "
                         f"{len(input_shape)} dims (the batch included): {input_shape}")
    spare = [c for c in string.ascii_letters if c not in ins + ker + out][:n_elided]
    if elided == "left":
        ins, out = "".join(spare) + ins, "".join(spare) + out
    elif elided == "right":
        ins, out = ins + "".join(spare), out + "".join(spare)
    given = list(output_shape)
    # Keras's output_shape: the output's dims without the batch and without the elided ones
    n_out = len(out) - 1 - (max(n_elided - 1, 0) if elided == "left" else n_elided)
    if len(given) != n_out:
        raise ValueError(f"EinsumDense: output_shape {tuple(given)} has {len(given)} entries; equation "
                         f"{equation!r} makes outputs of {n_out} dims besides the batch"
                         f"{' and the elided ones' if elided else ''}")
    if elided == "left":
        full_out = [input_shape[0]] + list(input_shape[1:n_elided]) + given
    elif elided == "right":
        full_out = [input_shape[0]] + given + list(input_shape[len(input_shape) - n_elided:])
    else:
        full_out = [input_shape[0]] + given
    in_size = dict(zip(ins, input_shape))
    for i, c in enumerate(out):
        if c in in_size:
            if full_out[i] is None or i == 0:
                full_out[i] = in_size[c]
            elif in_size[c] is not None and full_out[i] != in_size[c]:
                raise ValueError(f"EinsumDense: input shape and output shape do not match at shared dimension "
                                 f"{c!r}: the input has {in_size[c]}, output_shape says {full_out[i]}")
        elif c not in ker:
            raise ValueError(f"EinsumDense: dimension {c!r} of the output spec {out!r} is in neither the input "
                             f"spec {ins!r} nor the kernel spec {ker!r}")
        elif full_out[i] is None:
            raise ValueError(f"EinsumDense: output_shape must give the size of {c!r}, a dimension of the kernel")
    if out[0] != ins[0]:
        raise ValueError(f"EinsumDense: equation {equation!r}: the output's first letter must be the input's "
                         f"first (the batch)")
    out_size = dict(zip(out, full_out))
    kernel_shape = []
    for c in ker:
        if c == ins[0]:
            raise ValueError(f"EinsumDense: equation {equation!r}: the kernel cannot have the batch dimension "
                             f"{c!r}")
        size = in_size.get(c, out_size.get(c, -1))
        if size == -1:
            raise ValueError(f"EinsumDense: weight dimension {c!r} has no match in the input spec {ins!r} or the "
                             f"output spec {out!r}; the kernel must be fully specified")
        if size is None:
            raise ValueError(f"EinsumDense: the kernel's dimension {c!r} comes from an input dim of unknown size "
                             f"({input_shape})")
        kernel_shape.append(int(size))
    for c in ins:
        if c not in ker and c not in out:
            raise ValueError(f"EinsumDense: equation {equation!r}: input dimension {c!r} is in neither the kernel "
                             f"nor the output (a sum over the input alone), which does not map onto a matrix "
                             f"product")
    shared = [c for c in ins if c in ker and c in out]
    if len(shared) > 2:
        raise ValueError(f"EinsumDense: equation {equation!r} has {len(shared)} letters in the input, the kernel "
                         f"and the output ({''.join(shared)}); at most 2 map onto ggml's batched matrix product")
    bias_shape = None
    if bias_axes is not None:
        for c in bias_axes:
            if c not in out:
                raise ValueError(f"EinsumDense: bias dimension {c!r} was requested, but is not part of the output "
                                 f"spec {out!r}")
        first = min(out.find(c) for c in bias_axes)
        if first == 0:
            raise ValueError("EinsumDense: the bias cannot vary along the batch dimension")
        bias_shape = []
        for c in out[first:]:
            if c in bias_axes:
                if out_size[c] is None:
                    raise ValueError(f"EinsumDense: bias dimension {c!r} has no known size")
                bias_shape.append(int(out_size[c]))
            else:
                bias_shape.append(1)
    return ins, ker, out, tuple(kernel_shape), None if bias_shape is None else tuple(bias_shape), tuple(full_out)


def _glorot_uniform_keras_fans(shape, rng, layout=None):
    """Glorot-uniform with Keras's fans of a kernel of any rank: the last two dims are
    (in, out), the others a receptive field."""
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    fan_in, fan_out = (shape[-2] * receptive, shape[-1] * receptive) if len(shape) > 1 else (shape[0], shape[0])
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


@register_builtin
class EinsumDense(QuantizedWeights, LoraWeights, Activated):
    """``EinsumDense(equation, output_shape, activation=None, bias_axes=None,
    kernel_initializer="glorot_uniform", bias_initializer="zeros",
    kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
    kernel_constraint=None, bias_constraint=None)``."""
    _config_activity_regularizer = True      # (Keras's config names it, None included)

    supports_masking = False

    _lora_base = "kernel"
    _quant_base = "kernel"

    def __init__(self, equation, output_shape, activation=None, bias_axes=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, lora_rank=None, lora_alpha=None, **kwargs):
        super().__init__(activation=activation, activity_regularizer=activity_regularizer, **kwargs)
        self._init_lora(lora_rank, lora_alpha)
        ins, ker, out, _ = _parse(equation)
        self.equation = equation
        self.partial_output_shape = _check_output_shape(output_shape)
        if bias_axes is not None:
            if not isinstance(bias_axes, str) or not bias_axes.isalpha():
                raise TypeError(f"EinsumDense: bias_axes must be a str of output letters (e.g. 'd') or None, "
                                f"got {bias_axes!r}")
            for c in bias_axes:
                if c not in out:
                    raise ValueError(f"EinsumDense: bias dimension {c!r} was requested, but is not part of the "
                                     f"output spec {out!r}")
        self.bias_axes = bias_axes
        from pyggml import initializers
        for init in (kernel_initializer, bias_initializer):
            initializers.get(init)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        set_weight_options(self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.full_output_shape = None

    def _plan(self, input_shape):
        if isinstance(input_shape, list):
            raise ValueError("EinsumDense takes one input")
        return analyze(self.equation, self.bias_axes, tuple(input_shape), self.partial_output_shape)

    def compute_output_shape(self, input_shape):
        return self._plan(input_shape)[5]

    def build(self, input_shape):
        _, _, _, kernel_shape, bias_shape, full_out = self._plan(input_shape)
        self.full_output_shape = full_out
        # Keras's fans: (in, out) for a 2-D kernel; more dims count as a receptive field
        init = _glorot_uniform_keras_fans if self.kernel_initializer == "glorot_uniform" else self.kernel_initializer
        self.kernel = self.add_weight("kernel", kernel_shape, init, layout="in_out",
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight("bias", bias_shape, self.bias_initializer, regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if bias_shape is not None else None
        self._build_lora()
        self._build_quantized()

    def _quant_reduce_axes(self):
        """The kernel's axes the input contracts (one scale for each of the others, Keras's)."""
        ins, ker, out, _ = _parse(self.equation)
        return tuple(i for i, c in enumerate(ker) if c in ins and c not in out)

    def pre_activation(self, inputs, training=None):
        x = contiguous(ops.as_tensor(inputs))
        ins, ker, out, kernel_shape, _, full_out = self._plan((None,) + tuple(x.shape[1:]))
        in_size = dict(zip(ins, x.shape))
        ker_size = dict(zip(ker, kernel_shape))
        shared = [c for c in ins if c in ker and c in out]          # batch dims of the product
        rows = [c for c in ins if c not in ker]                     # kept from the input (the batch among them)
        contracted = [c for c in ins if c in ker and c not in out]
        cols = [c for c in ker if c not in ins]                     # kept from the kernel

        def size(cs, sizes):
            return int(np.prod([sizes[c] for c in cs])) if cs else 1

        lead = tuple(in_size[c] for c in shared)
        xs = ops.permute_axes(x, [ins.index(c) for c in shared + rows + contracted])
        xs = ops.reshape(contiguous(xs), lead + (size(rows, in_size), size(contracted, in_size)))
        w = self.kernel.graph_tensor() if self.quantization_mode is None else self._weight_tensor()
        if self.lora_enabled:
            w = ops.add(w, self._lora_delta())
        w = ops.permute_axes(w, [ker.index(c) for c in shared + cols + contracted])
        w = ops.reshape(contiguous(w), lead + (size(cols, ker_size), size(contracted, ker_size)))
        y = ops.mul_mat(w, xs)                                      # (shared..., rows, cols)
        order = shared + rows + cols
        sizes = dict(in_size, **ker_size)
        y = ops.reshape(y, tuple(sizes[c] for c in order))
        y = ops.permute_axes(y, [order.index(c) for c in out])
        if self.bias is not None:
            y = contiguous(y) + self.bias.graph_tensor()
        return y

    def get_config(self):
        c = super().get_config()
        shape = self.partial_output_shape
        c.update(equation=self.equation, output_shape=shape[0] if len(shape) == 1 else list(shape),
                 activation=self.activation_name, bias_axes=self.bias_axes)
        c.update(weight_options_config(self, _OPTIONS))
        self._lora_config(c)
        self._quant_config(c)
        for k in ("kernel_initializer", "bias_initializer"):
            if _init_config(getattr(self, k)) is not None:      # a name or an Initializer instance
                c[k] = _init_config(getattr(self, k))
        return c
