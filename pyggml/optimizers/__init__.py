"""Optimizers (Keras's names and defaults): Adam, AdamW, SGD (momentum,
Nesterov), RMSprop, Adagrad, Nadam, Adamax, Adadelta, Lion, Ftrl, Lamb, Muon, Adafactor,
ScheduleFreeAdamW;
learning-rate schedules in ``schedules``."""

from pyggml.optimizers import schedules
from pyggml.optimizers.adafactor import Adafactor
from pyggml.optimizers.adam import Adam, AdamW
from pyggml.optimizers.lamb import Lamb
from pyggml.optimizers.more import Adadelta, Adamax, Ftrl, Lion
from pyggml.optimizers.multi_optimizer import MultiOptimizer, OptimizerMap
from pyggml.optimizers.muon import Muon
from pyggml.optimizers.optimizer import Optimizer
from pyggml.optimizers.rmsprop import Adagrad, Nadam, RMSprop
from pyggml.optimizers.schedule_free import ScheduleFreeAdamW
from pyggml.optimizers.sgd import SGD
from pyggml.mixed_precision import LossScaleOptimizer
from pyggml.saving.object_registration import get_registered_name, get_registered_object

__all__ = ["Optimizer", "Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Nadam", "Adamax", "Adadelta", "Lion", "Ftrl",
           "Lamb", "Muon", "Adafactor", "ScheduleFreeAdamW", "MultiOptimizer", "OptimizerMap",
           "LossScaleOptimizer", "schedules", "get", "serialize",
           "deserialize"]

_BY_NAME = {"adam": Adam, "adamw": AdamW, "sgd": SGD, "rmsprop": RMSprop, "adagrad": Adagrad, "nadam": Nadam,
            "adamax": Adamax, "adadelta": Adadelta, "lion": Lion, "ftrl": Ftrl,
            "lamb": Lamb, "muon": Muon, "adafactor": Adafactor, "schedule_free_adamw": ScheduleFreeAdamW,
            "schedulefreeadamw": ScheduleFreeAdamW}


def get(identifier):
    """An Optimizer for a name (a fresh one with Keras's defaults), a serialized config (a
    dict, Keras's or ``serialize``'s) or an instance; None for None (Keras's)."""
    if identifier is None:
        return None
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, dict):
        if "class" in identifier:
            return deserialize(identifier)
        from pyggml.saving.serialization_lib import deserialize_keras_object
        obj = deserialize_keras_object(identifier)
        if not isinstance(obj, Optimizer):
            raise ValueError(f"the config {identifier!r} is not an optimizer's")
        return obj
    if isinstance(identifier, type) and issubclass(identifier, Optimizer):
        return identifier()                  # (a name deserialized to its class: "SGD")
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown optimizer {identifier!r}; use one of {sorted(_BY_NAME)} or an Optimizer instance")


def serialize(optimizer):
    return {"class": get_registered_name(type(optimizer)), "config": optimizer.get_config()}


def deserialize(config, custom_objects=None):
    cls = get_registered_object(config["class"], custom_objects)
    return cls.from_config(config["config"], custom_objects)
