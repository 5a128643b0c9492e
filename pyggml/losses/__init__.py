"""Losses with Keras's names, definitions and reduction."""

from pyggml.losses.builtin import (BinaryCrossentropy, CategoricalCrossentropy, Huber, MeanAbsoluteError,
                                   MeanSquaredError, SparseCategoricalCrossentropy)
from pyggml.losses.ctc_loss import CTC, ctc
from pyggml.losses.functions import CLASS_OF as _CLASS_OF, FUNCTIONS as _LOSS_FUNCTIONS
from pyggml.losses.extra import (BinaryFocalCrossentropy, CategoricalFocalCrossentropy,
                                 CategoricalGeneralizedCrossEntropy, CategoricalHinge,
                                 CosineSimilarity, Hinge, KLDivergence, LogCosh, MeanAbsolutePercentageError,
                                 MeanSquaredLogarithmicError, Poisson, SquaredHinge)
from pyggml.losses.loss import Loss, LossFunctionWrapper
from pyggml.losses.more import Circle, Dice, Tversky, circle, dice, tversky
from pyggml.saving.object_registration import get_registered_name, get_registered_object

__all__ = ["Loss", "LossFunctionWrapper", "MeanSquaredError", "MeanAbsoluteError", "Huber", "BinaryCrossentropy",
           "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "KLDivergence", "Poisson", "LogCosh", "CosineSimilarity",
           "MeanSquaredLogarithmicError", "MeanAbsolutePercentageError", "Hinge", "SquaredHinge", "CategoricalHinge",
           "BinaryFocalCrossentropy", "CategoricalFocalCrossentropy", "CategoricalGeneralizedCrossEntropy", "Dice",
           "Tversky", "Circle", "dice", "tversky",
           "circle", "CTC", "ctc", "get", "serialize", "deserialize", "LOSSES"]

LOSSES = {
    "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError, "MeanSquaredError": MeanSquaredError,
    "mae": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError, "MeanAbsoluteError": MeanAbsoluteError,
    "huber": Huber, "huber_loss": Huber, "Huber": Huber,
    "binary_crossentropy": BinaryCrossentropy, "BinaryCrossentropy": BinaryCrossentropy, "bce": BinaryCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy, "CategoricalCrossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "SparseCategoricalCrossentropy": SparseCategoricalCrossentropy,
    "kl_divergence": KLDivergence, "kld": KLDivergence, "KLD": KLDivergence, "KLDivergence": KLDivergence,
    "poisson": Poisson, "Poisson": Poisson,
    "log_cosh": LogCosh, "logcosh": LogCosh, "LogCosh": LogCosh,
    "cosine_similarity": CosineSimilarity, "CosineSimilarity": CosineSimilarity,
    "mean_squared_logarithmic_error": MeanSquaredLogarithmicError, "msle": MeanSquaredLogarithmicError,
    "MSLE": MeanSquaredLogarithmicError, "MeanSquaredLogarithmicError": MeanSquaredLogarithmicError,
    "mean_absolute_percentage_error": MeanAbsolutePercentageError, "mape": MeanAbsolutePercentageError,
    "MAPE": MeanAbsolutePercentageError, "MeanAbsolutePercentageError": MeanAbsolutePercentageError,
    "hinge": Hinge, "Hinge": Hinge, "squared_hinge": SquaredHinge, "SquaredHinge": SquaredHinge,
    "categorical_hinge": CategoricalHinge, "CategoricalHinge": CategoricalHinge,
    "binary_focal_crossentropy": BinaryFocalCrossentropy, "BinaryFocalCrossentropy": BinaryFocalCrossentropy,
    "categorical_focal_crossentropy": CategoricalFocalCrossentropy,
    "CategoricalFocalCrossentropy": CategoricalFocalCrossentropy,
    "categorical_generalized_cross_entropy": CategoricalGeneralizedCrossEntropy,
    "CategoricalGeneralizedCrossEntropy": CategoricalGeneralizedCrossEntropy,
    "dice": Dice, "Dice": Dice, "tversky": Tversky, "Tversky": Tversky, "circle": Circle, "Circle": Circle,
    "ctc": CTC, "CTC": CTC, "MSE": MeanSquaredError, "MAE": MeanAbsoluteError, "BCE": BinaryCrossentropy,
}
# Keras's loss functions whose class compile needs (Circle takes labels, not targets shaped as the output)
_FUNCTIONS = {dice: Dice, tversky: Tversky, circle: Circle, ctc: CTC}
# Keras's per-sample loss functions (binary_crossentropy(y_true, y_pred), mse, ...): in compile, their class
_FUNCTIONS.update(_CLASS_OF)
globals().update(_LOSS_FUNCTIONS)
# the names ``get`` answers with a function, as Keras's (its upper-case short names too)
_BY_NAME = dict(_LOSS_FUNCTIONS, dice=dice, tversky=tversky, circle=circle, ctc=ctc,
                huber_loss=_LOSS_FUNCTIONS["huber"], bce=_LOSS_FUNCTIONS["binary_crossentropy"])
_BY_NAME.update({k.upper(): _BY_NAME[k] for k in ("mse", "mae", "mape", "msle", "kld", "bce")})
__all__ += sorted(_LOSS_FUNCTIONS)


def get(identifier):
    """As Keras's ``keras.losses.get``: a function name or short alias (``"mse"``, ``"MAE"``,
    ``"binary_crossentropy"``) gives the per-sample loss function; a class name gives an
    instance of that Loss; a Loss class, an instance; a function or Loss is returned as it
    is; a dict (a serialized loss) is deserialized."""
    if identifier is None:
        return None
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, Loss) or (callable(identifier) and not isinstance(identifier, (str, type))):
        return identifier
    return _as_loss(identifier)


def _as_loss(identifier):
    """The Loss instance compile trains with, for a name (Keras's names and aliases), a Loss
    instance or class, or a function ``fn(y_true, y_pred)`` (Keras's functions map to their
    class; another is wrapped)."""
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str) and identifier in LOSSES:
        return LOSSES[identifier]()
    if isinstance(identifier, type) and issubclass(identifier, Loss):
        return identifier()
    for fn, cls in _FUNCTIONS.items():
        if identifier is fn:
            return cls()
    if callable(identifier) and not isinstance(identifier, str):
        return LossFunctionWrapper(identifier)
    raise ValueError(f"unknown loss {identifier!r}; known: {sorted(set(LOSSES))}, a Loss or a function")


def serialize(loss):
    """A JSON-able description: a name for the built-in ones with default settings."""
    for name, cls in LOSSES.items():
        if type(loss) is cls and loss.get_config() == cls().get_config() and name == cls.name:
            return name
    if isinstance(loss, LossFunctionWrapper):
        fn = loss.fn
        # Keras's: its registered name, else its __name__ (a closure's inner function, made by
        # ``def loss(margin): def contrastive_loss(...)``, is found again by that name)
        return {"class": "function", "name": get_registered_name(fn) if hasattr(fn, "__name__") else "loss"}
    return {"class": get_registered_name(type(loss)), "config": loss.get_config()}


def deserialize(config, custom_objects=None):
    if config is None:
        return None
    if isinstance(config, str):
        return _as_loss(config)
    if config.get("class") == "function":
        name = config["name"]
        # (files saved before named a nested function by its qualified name, "loss.<locals>.f")
        for key in (name, name.rsplit(".", 1)[-1]) if isinstance(name, str) else (name,):
            if custom_objects and key in custom_objects:
                return LossFunctionWrapper(custom_objects[key])
        try:
            return LossFunctionWrapper(get_registered_object(name, custom_objects))
        except ValueError:
            if not isinstance(name, str) or "." not in name:
                raise
            return LossFunctionWrapper(get_registered_object(name.rsplit(".", 1)[-1], custom_objects))
    # pyggml's {"class": ..., "config": ...}, or Keras's {"class_name": ..., "config": ...}
    name = config.get("class", config.get("class_name"))
    if not isinstance(name, str) or not isinstance(config.get("config", {}), dict):
        raise ValueError(f"a serialized loss names its class and holds a config dict, got {config!r}")
    if isinstance(LOSSES.get(name), type) and not (custom_objects and name in custom_objects):
        cls = LOSSES[name]
    else:
        cls = get_registered_object(name, custom_objects)
    return cls.from_config(config.get("config", {}))
