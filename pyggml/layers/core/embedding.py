"""Embedding: integer indices to vectors (get_rows, which trains)."""

import numpy as np

from pyggml import _scope, initializers, ops
from pyggml._validation import check_positive_int
from pyggml.core import Tensor
from pyggml.layers._lora import LoraWeights
from pyggml.layers.core.quantize import QuantizedWeights
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Embedding"]


_MAX_ONE_HOT = 1 << 27          # values of the one-hot that picks rows of computed ids (512 MB)


@register_builtin
class Embedding(QuantizedWeights, LoraWeights, Layer):
    """``Embedding(input_dim, output_dim, mask_zero=False)``: weight (input_dim, output_dim).

    Its inputs are indices in [0, input_dim) (checked when data enters the model);
    with ``mask_zero`` index 0 is padding, and the layers after it that take a mask
    (recurrent layers, attention, pooling over steps, the loss) leave those steps out."""
    _config_activity_regularizer = True      # (Keras's config names it, None included)

    host_mask = True          # compute_mask works on arrays: an eager output carries _keras_mask

    build_shape_rule = "any"         # a later call may have any shape (Layer._fits_built)

    input_dtype = "int32"

    _lora_names = ("lora_embeddings_a", "lora_embeddings_b")
    _quant_scale = "embeddings_scale"

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", mask_zero=False,
                 input_length=None, embeddings_regularizer=None, embeddings_constraint=None, lora_rank=None,
                 lora_alpha=None, weights=None, **kwargs):
        super().__init__(**kwargs)
        if weights is not None:
            # Keras's weights=[matrix] (a pretrained table): the initial values, as an initializer
            table = weights[0] if isinstance(weights, (list, tuple)) and len(weights) == 1 else weights
            table = np.asarray(table.numpy() if hasattr(table, "numpy") and not isinstance(table, np.ndarray) else table,
                               dtype=np.float32)
            if table.shape != (input_dim, output_dim):
                raise ValueError(f"Embedding: weights must be one matrix of shape (input_dim, output_dim) = "
                                 f"{(input_dim, output_dim)}, got {table.shape}")
            embeddings_initializer = initializers.get(table)
        self._built_from_weights = weights is not None
        self._init_lora(lora_rank, lora_alpha)
        from pyggml.layers._helpers import set_weight_options
        set_weight_options(self, embeddings_regularizer=embeddings_regularizer,
                           embeddings_constraint=embeddings_constraint)
        self.input_dim = check_positive_int("input_dim", input_dim)
        self.output_dim = check_positive_int("output_dim", output_dim)
        self.embeddings_initializer = embeddings_initializer
        self.mask_zero = bool(mask_zero)
        if self.__dict__.pop("_built_from_weights", False):
            self.build()                           # Keras's: the given table is there at once

    @property
    def index_limit(self):
        """Its inputs are indices in [0, index_limit) (the data adapter checks them)."""
        return self.input_dim

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    # Keras's names for these weights (the same Variables)
    embeddings = property(lambda self: self.weight, doc="Keras's embeddings: the weight Variable.")

    def build(self, input_shape=None):
        """The table (input_dim, output_dim); the input's shape does not matter (Keras's build())."""
        self.weight = self.add_weight("weight", (self.input_dim, self.output_dim), self.embeddings_initializer,
                                      layout="in_out", regularizer=self.embeddings_regularizer,
                                      constraint=self.embeddings_constraint)
        self._build_lora()
        self._build_quantized()

    def _quant_reduce_axes(self):
        return (1,)                                  # one scale per token (row)

    def compute_mask(self, inputs, mask=None):
        """With mask_zero, 1 where the index is not 0 (computed on the host from the
        indices, which enter the graph as data)."""
        if not self.mask_zero:
            return None
        if not isinstance(inputs, Tensor):
            return np.asarray(inputs) != 0              # on arrays: Keras's boolean mask, at once
        if inputs.op != "NONE":
            # indices computed in the graph (an argmax): the mask is computed beside them
            from pyggml import ops as keras_ops
            return keras_ops.cast(keras_ops.not_equal(inputs, 0), "float32")
        return _scope.require("Embedding's mask").derived_input(
            inputs, lambda a: (np.asarray(a) != 0).astype(np.float32), tuple(inputs.shape), "float32")

    def _indices(self, inputs):
        """int32 indices: the input itself, or (as Keras casts them) float values fed to the
        graph, e.g. by an ``Input`` of the default float32 read by a custom layer that holds
        this Embedding, made integer on the host as they enter the graph."""
        if inputs.dtype == "i32":
            return inputs
        if inputs.op != "NONE":
            raise TypeError(f"{self.name or 'Embedding'}: indices must be integers; a computed float tensor "
                            f"cannot be used as indices (feed the model an Input(dtype='int32') instead)")
        return _scope.require("Embedding's indices").derived_input(
            inputs, lambda a: np.asarray(a).astype(np.int32), tuple(inputs.shape), "int32")

    def call(self, inputs, training=None):
        if inputs.dtype != "i32" and inputs.op != "NONE":
            return self._picked(inputs)            # float ids computed in the graph (floor_divide, mod)
        inputs = self._indices(inputs)
        shape = tuple(inputs.shape)
        n = 1
        for d in shape:
            n *= d
        flat = ops.reshape(inputs if inputs.is_contiguous else ops.cont(inputs), (n,))
        try:
            rows = ops.get_rows(self._weight_tensor(), flat)
        except ValueError as e:
            if "cannot be checked" not in str(e):
                raise
            return self._picked(inputs)            # int ids computed in the graph (a cast of them)
        if self.lora_enabled:
            a, b = self._lora_factors()
            rows = ops.add(rows, ops.multiply(ops.matmul(ops.get_rows(a, flat), b), self._lora_scale))
        return ops.reshape(rows, shape + (self.output_dim,))

    def _picked(self, ids):
        """The rows of ids computed in the graph (keras-io's quotient-remainder embeddings:
        ``x // k`` and ``x % k``), whose values cannot be checked before ggml computes them:
        a one-hot of each id times the table.  An id out of range picks no row (zeros), as
        TensorFlow's embedding lookup on a GPU gives, where get_rows would abort the process."""
        from pyggml._ops_nn import _class_rows
        # Keras casts float ids to int: whole ones stay, others lose their fraction
        f = ops.floor(ids) if ids.dtype == "f32" else ops.cast(ids, "float32")
        shape = tuple(int(d) for d in ids.shape)
        n = int(np.prod(shape))
        if n * self.input_dim > _MAX_ONE_HOT and not getattr(_scope.current(), "shape_only", False):
            raise ValueError(f"{self.name or 'Embedding'}: ids computed in the graph pick their rows through a "
                             f"one-hot of {n} x {self.input_dim} values, more than {_MAX_ONE_HOT}; feed the ids as "
                             f"data (an Input(dtype='int32'), or computed on the host) instead")
        hot = ops.reshape(_class_rows(f, self.input_dim), (n, self.input_dim))
        out = ops.matmul(hot, self._weight_tensor())
        if self.lora_enabled:
            out = ops.add(out, self._lora_rows(hot))
        return ops.reshape(out if out.is_contiguous else ops.cont(out), shape + (self.output_dim,))

    def get_config(self):
        c = super().get_config()
        c.update(input_dim=self.input_dim, output_dim=self.output_dim, mask_zero=self.mask_zero)
        self._lora_config(c)
        self._quant_config(c)
        from pyggml.layers._helpers import weight_options_config
        c.update(weight_options_config(self, ("embeddings_regularizer", "embeddings_constraint")))
        from pyggml.initializers import config_value
        if config_value(self.embeddings_initializer) is not None:   # a name or an Initializer instance
            c["embeddings_initializer"] = config_value(self.embeddings_initializer)
        return c
