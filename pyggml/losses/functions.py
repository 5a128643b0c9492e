"""Keras's loss functions (``keras.losses.binary_crossentropy(y_true, y_pred)``, ...): the
loss of each sample, not reduced over the batch (an element-wise loss is averaged over the
last axis, as Keras's), on arrays (numpy, at once) or on tensors (in a layer's call or a
GradientTape).  Each is its loss class with ``reduction="none"``."""

import inspect

from pyggml.losses.builtin import (BinaryCrossentropy, CategoricalCrossentropy, Huber, MeanAbsoluteError,
                                   MeanSquaredError, SparseCategoricalCrossentropy)
from pyggml.losses.extra import (BinaryFocalCrossentropy, CategoricalFocalCrossentropy,
                                 CategoricalGeneralizedCrossEntropy, CategoricalHinge,
                                 CosineSimilarity, Hinge, KLDivergence, LogCosh, MeanAbsolutePercentageError,
                                 MeanSquaredLogarithmicError, Poisson, SquaredHinge)

__all__ = ["FUNCTIONS"]


def _function(name, cls):
    takes = set(inspect.signature(cls.__init__).parameters) - {"self", "name", "reduction", "dtype"}

    def fn(y_true, y_pred, **kwargs):
        if kwargs.get("axis", -1) == -1 and "axis" not in takes:
            kwargs.pop("axis", None)          # the last axis: what these losses reduce anyway
        unknown = set(kwargs) - takes
        if unknown:
            raise TypeError(f"{name}() got unexpected arguments {sorted(unknown)}; it takes "
                            f"{sorted(takes) or 'none besides y_true and y_pred'}")
        return cls(reduction="none", **kwargs)(y_true, y_pred)
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "pyggml.losses"          # where it is found by name (pickle, Keras's registry)
    fn.__doc__ = f"Keras's ``{name}(y_true, y_pred)``: {cls.__name__}'s loss of each sample."
    return fn


_CLASSES = {
    "mean_squared_error": MeanSquaredError, "mean_absolute_error": MeanAbsoluteError,
    "mean_absolute_percentage_error": MeanAbsolutePercentageError,
    "mean_squared_logarithmic_error": MeanSquaredLogarithmicError, "huber": Huber, "log_cosh": LogCosh,
    "binary_crossentropy": BinaryCrossentropy, "categorical_crossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy, "kl_divergence": KLDivergence,
    "poisson": Poisson, "hinge": Hinge, "squared_hinge": SquaredHinge, "categorical_hinge": CategoricalHinge,
    "cosine_similarity": CosineSimilarity, "binary_focal_crossentropy": BinaryFocalCrossentropy,
    "categorical_focal_crossentropy": CategoricalFocalCrossentropy,
    "categorical_generalized_cross_entropy": CategoricalGeneralizedCrossEntropy,
}
FUNCTIONS = {name: _function(name, cls) for name, cls in _CLASSES.items()}
# Keras's short names for the same functions
for _alias, _name in (("mse", "mean_squared_error"), ("mae", "mean_absolute_error"),
                      ("mape", "mean_absolute_percentage_error"), ("msle", "mean_squared_logarithmic_error"),
                      ("logcosh", "log_cosh"), ("kld", "kl_divergence"),
                      ("kullback_leibler_divergence", "kl_divergence")):
    FUNCTIONS[_alias] = FUNCTIONS[_name]
CLASS_OF = {fn: _CLASSES[fn.__name__] for fn in FUNCTIONS.values()}
