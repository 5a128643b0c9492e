"""LoRA (Keras's ``enable_lora``) for Dense, EinsumDense and Embedding: the layer's weight is
frozen and two small trained factors add their product to it, ``W + (alpha / rank) A B``, A of
Keras's layout (the weight's leading dims, rank) and B (rank, the weight's last dim).

The product is never made into a full matrix where the layer can avoid it: Dense and
Embedding apply A then B to their rows (rank columns in between), EinsumDense adds the merged
kernel (its einsum takes one kernel).  The saved file holds the frozen weight and both
factors, so a model loaded back goes on training where it stopped; ``merged_kernel()`` gives
Keras's merged weight."""

import contextlib

import numpy as np

from pyggml import ops
from pyggml._validation import check_positive_int, is_int
from pyggml.variables import Variable

__all__ = ["LoraWeights", "check_lora_options", "StandIn", "merged_weight"]


class StandIn(Variable):
    """A graph tensor standing in for a layer's weight Variable while the layer's call builds
    its graph: whatever reads the weight (ops, arithmetic, ``graph_tensor()``, the Keras
    view) gets the tensor (a LoRA-merged kernel, a spectrally normalized one)."""

    def __init__(self, base, tensor):
        self._setup(base.name, base.shape, base.initializer, trainable=base.trainable, layout=base.layout)
        self.keras_shape, self.keras_axes = base.keras_shape, base.keras_axes
        self._standin = tensor

    def graph_tensor(self):
        return self._standin


@contextlib.contextmanager
def merged_weight(layer):
    """While the block builds, a LoRA-enabled convolution's weight reads as ``W + (alpha / rank)
    A B`` in the weight's own layout (the convolutions read their weight in many ways); nothing
    changes without LoRA, or inside a block already merging."""
    attr = layer._lora_base
    v = layer.__dict__.get(attr)
    if not layer.lora_enabled or isinstance(v, StandIn):
        yield
        return
    base = tuple(v.keras_shape) if v.keras_shape is not None else tuple(v.shape)
    axes = tuple(v.keras_axes) if v.keras_axes is not None else tuple(range(len(base)))
    if axes != tuple(range(2, len(base))) + (1, 0):
        raise TypeError(f"{type(layer).__name__}: merged_weight takes a convolution's weight, (out, in, "
                        f"*kernel) read by Keras as (*kernel, in, out); got Keras axes {axes}")
    # A B as the matrix (kernel * in, out), moved to (out, in, kernel) in at most three dimensions
    a, b = layer._lora_factors()
    out, inner, taps = base[0], base[1], int(np.prod(base[2:]))
    ab = ops.matmul(ops.reshape(a, (taps * inner, layer.lora_rank)), b)              # (taps * in, out)
    d = ops.reshape(ops.cont(ops.transpose(ab, (1, 0))), (out, taps, inner))
    d = ops.multiply(ops.cont(ops.transpose(d, (0, 2, 1))), layer._lora_scale)
    d = ops.reshape(d if d.is_contiguous else ops.cont(d), tuple(v.shape))
    object.__setattr__(layer, attr, StandIn(v, ops.add(v.graph_tensor(), d)))
    try:
        yield
    finally:
        object.__setattr__(layer, attr, v)


def check_lora_options(who, lora_rank, lora_alpha):
    """Keras's constructor arguments: a rank (None: no LoRA) and an alpha (None: the rank)."""
    if lora_rank is not None:
        check_positive_int(f"{who}: lora_rank", lora_rank)
        lora_rank = int(lora_rank)
    if lora_alpha is not None:
        if isinstance(lora_alpha, bool) or not isinstance(lora_alpha, (int, float, np.integer, np.floating)) \
                or not np.isfinite(lora_alpha):
            raise TypeError(f"{who}: lora_alpha must be a finite number or None, got {lora_alpha!r}")
        lora_alpha = int(lora_alpha) if is_int(lora_alpha) else float(lora_alpha)
    return lora_rank, lora_alpha


class LoraWeights:
    """The mixin: ``_lora_base`` names the weight LoRA freezes, ``_lora_names`` the two
    factors (Keras's names: ``lora_kernel_a``/``_b``, ``lora_embeddings_a``/``_b``)."""

    _lora_base = "weight"
    _lora_names = ("lora_kernel_a", "lora_kernel_b")
    lora_rank = None
    lora_alpha = None

    def _init_lora(self, lora_rank, lora_alpha):
        self.lora_rank, self.lora_alpha = check_lora_options(type(self).__name__, lora_rank, lora_alpha)

    @property
    def lora_enabled(self):
        return self.__dict__.get(self._lora_names[0]) is not None

    def _lora_base_shape(self):
        """The frozen weight's shape in Keras's layout."""
        v = getattr(self, self._lora_base)
        base = tuple(v.keras_shape) if v.keras_shape is not None else tuple(v.shape)
        axes = tuple(v.keras_axes) if v.keras_axes is not None else tuple(range(len(base)))
        return tuple(int(base[i]) for i in axes)

    def enable_lora(self, rank, lora_alpha=None, a_initializer="he_uniform", b_initializer="zeros"):
        """Freeze the weight and train two factors of rank ``rank`` instead (Keras's): B starts
        at zeros, so the layer computes what it did.  Once per layer, after it is built;
        compile the model again (as Keras asks) for fit to train the new weights."""
        who = type(self).__name__ + (f" {self.name!r}" if self.name else "")
        if not self.built:
            from pyggml.layers._keras_weights import build_through_owner
            build_through_owner(self)         # a Sequential's layer (its Input known): built as Keras's is
        if not self.built:
            raise ValueError(f"{who}: cannot enable LoRA on a layer that is not built yet (call it on an "
                             f"input, or build(input_shape), first)")
        if self.lora_enabled:
            raise ValueError(f"{who}: LoRA is already enabled; it can be enabled once per layer")
        rank, lora_alpha = check_lora_options(who, rank, lora_alpha)
        if rank is None:
            raise TypeError(f"{who}: enable_lora needs a positive int rank, got None")
        self._enable_lora(rank, lora_alpha, a_initializer, b_initializer)

    def _enable_lora(self, rank, lora_alpha, a_initializer="he_uniform", b_initializer="zeros"):
        shape = self._lora_base_shape()
        reg = getattr(self, "kernel_regularizer", None) or getattr(self, "embeddings_regularizer", None)
        a_name, b_name = self._lora_names
        a = self.add_weight(name=a_name, shape=shape[:-1] + (rank,), initializer=a_initializer,
                            layout="in_out", regularizer=reg)
        b = self.add_weight(name=b_name, shape=(rank, shape[-1]), initializer=b_initializer,
                            layout="in_out", regularizer=reg)
        setattr(self, a_name, a)
        setattr(self, b_name, b)
        getattr(self, self._lora_base).trainable = False
        self.lora_rank = rank
        self.lora_alpha = rank if lora_alpha is None else lora_alpha
        from pyggml.layers.layer import layer_changed
        layer_changed(self, weights_added=True)

    @property
    def _lora_scale(self):
        return float(self.lora_alpha) / float(self.lora_rank)

    def _lora_factors(self):
        return tuple(getattr(self, n) for n in self._lora_names)

    def _lora_rows(self, rows):
        """What the factors add to a product ``rows @ W`` (Keras's layout): ``s (rows A) B``."""
        a, b = self._lora_factors()
        return ops.multiply(ops.matmul(ops.matmul(rows, a), b), self._lora_scale)

    def _lora_delta(self):
        """``s A B`` in the weight's Keras shape (a graph tensor)."""
        a, b = self._lora_factors()
        shape = self._lora_base_shape()
        lead = int(np.prod(shape[:-1]))
        a2 = ops.reshape(a, (lead, self.lora_rank)) if len(shape) != 2 else a
        return ops.reshape(ops.multiply(ops.matmul(a2, b), self._lora_scale), shape)

    def merged_kernel(self):
        """Keras's merged weight, ``W + (alpha / rank) A B``, as an array in Keras's layout
        (the weight itself where LoRA is not enabled); a quantized layer's ``W`` is its integers
        divided by their scale (QLoRA merges in float, as Keras)."""
        from pyggml.layers._keras_weights import keras_value
        v = getattr(self, self._lora_base)
        w = keras_value(v, v.numpy()).astype(np.float32)
        if getattr(self, "quantization_mode", None) is not None:
            w = (w / self._keras_scale()).astype(np.float32)
        if not self.lora_enabled:
            return w
        a, b = (np.asarray(f.numpy(), np.float32) for f in self._lora_factors())
        lead = int(np.prod(w.shape[:-1]))
        return w + (self._lora_scale * (a.reshape(lead, self.lora_rank) @ b)).reshape(w.shape).astype(np.float32)

    def _lora_config(self, c):
        if self.lora_rank is not None:
            c["lora_rank"] = self.lora_rank
            c["lora_alpha"] = self.lora_alpha if self.lora_alpha is not None else self.lora_rank
        return c

    def _build_lora(self):
        """Keras's ``Dense(..., lora_rank=r)``: LoRA enabled as the layer builds."""
        if self.lora_rank is not None and not self.lora_enabled:
            self._enable_lora(self.lora_rank, self.lora_alpha)
