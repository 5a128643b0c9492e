"""Metrics with Keras's names; user metrics subclass ``Metric``."""

from pyggml.metrics import builtin as _b
from pyggml.metrics.builtin import (AUC, Accuracy, BinaryAccuracy, CategoricalAccuracy, FalseNegatives,
                                    FalsePositives, MeanAbsoluteError, MeanAbsolutePercentageError,
                                    MeanSquaredError, Precision, Recall, RootMeanSquaredError,
                                    SparseCategoricalAccuracy, SparseTopKCategoricalAccuracy,
                                    TopKCategoricalAccuracy, TrueNegatives, TruePositives)
from pyggml.metrics import extra as _x
from pyggml.metrics.extra import (IoU, BinaryCrossentropy, CategoricalCrossentropy, CategoricalHinge, CosineSimilarity,
                                  F1Score, FBetaScore, Hinge, KLDivergence, LogCoshError, MeanIoU,
                                  MeanSquaredLogarithmicError, Poisson, R2Score, SparseCategoricalCrossentropy,
                                  SquaredHinge)
from pyggml.metrics import more as _m
from pyggml.metrics.functions import FUNCTIONS as _FUNCTIONS
from pyggml.metrics.metric import Mean, MeanMetricWrapper, Metric
from pyggml.metrics.more import (BinaryIoU, ConcordanceCorrelation, OneHotIoU, OneHotMeanIoU, PearsonCorrelation,
                                 PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity,
                                 SpecificityAtSensitivity, Sum, concordance_correlation, pearson_correlation)
from pyggml.saving.object_registration import get_registered_name, get_registered_object

__all__ = ["Metric", "Mean", "MeanMetricWrapper", "Accuracy", "BinaryAccuracy", "CategoricalAccuracy",
           "SparseCategoricalAccuracy", "TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy",
           "MeanAbsoluteError", "MeanSquaredError", "RootMeanSquaredError", "MeanAbsolutePercentageError",
           "Precision", "Recall", "AUC", "TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives",
           "KLDivergence", "Poisson", "LogCoshError", "CosineSimilarity", "MeanSquaredLogarithmicError", "Hinge",
           "SquaredHinge", "CategoricalHinge", "BinaryCrossentropy", "CategoricalCrossentropy",
           "SparseCategoricalCrossentropy", "R2Score", "FBetaScore", "F1Score", "IoU", "MeanIoU",
           "PrecisionAtRecall", "RecallAtPrecision", "SensitivityAtSpecificity", "SpecificityAtSensitivity",
           "BinaryIoU", "OneHotIoU", "OneHotMeanIoU", "Sum", "PearsonCorrelation", "ConcordanceCorrelation",
           "pearson_correlation", "concordance_correlation",
           "get", "serialize", "deserialize"] + sorted(_FUNCTIONS)
globals().update(_FUNCTIONS)

_BY_NAME = {
    "binary_accuracy": _b.BinaryAccuracy, "categorical_accuracy": _b.CategoricalAccuracy,
    "sparse_categorical_accuracy": _b.SparseCategoricalAccuracy,
    "top_k_categorical_accuracy": _b.TopKCategoricalAccuracy,
    "sparse_top_k_categorical_accuracy": _b.SparseTopKCategoricalAccuracy,
    "mae": _b.MeanAbsoluteError, "mean_absolute_error": _b.MeanAbsoluteError,
    "mse": _b.MeanSquaredError, "mean_squared_error": _b.MeanSquaredError,
    "rmse": _b.RootMeanSquaredError, "root_mean_squared_error": _b.RootMeanSquaredError,
    "mape": _b.MeanAbsolutePercentageError, "mean_absolute_percentage_error": _b.MeanAbsolutePercentageError,
    "precision": _b.Precision, "recall": _b.Recall, "auc": _b.AUC,
    "true_positives": _b.TruePositives, "false_positives": _b.FalsePositives,
    "true_negatives": _b.TrueNegatives, "false_negatives": _b.FalseNegatives,
    "kl_divergence": _x.KLDivergence, "kld": _x.KLDivergence, "poisson": _x.Poisson,
    "logcosh": _x.LogCoshError, "log_cosh": _x.LogCoshError, "cosine_similarity": _x.CosineSimilarity,
    "msle": _x.MeanSquaredLogarithmicError, "mean_squared_logarithmic_error": _x.MeanSquaredLogarithmicError,
    "hinge": _x.Hinge, "squared_hinge": _x.SquaredHinge, "categorical_hinge": _x.CategoricalHinge,
    "binary_crossentropy": _x.BinaryCrossentropy, "bce": _x.BinaryCrossentropy,
    "categorical_crossentropy": _x.CategoricalCrossentropy,
    "sparse_categorical_crossentropy": _x.SparseCategoricalCrossentropy,
    "r2_score": _x.R2Score,
    "pearson_correlation": _m.PearsonCorrelation, "concordance_correlation": _m.ConcordanceCorrelation,
}
_BY_NAME.update({k.upper(): _BY_NAME[k] for k in ("bce", "mse", "mae", "mape", "msle")})     # Keras's aliases too
KNOWN = sorted(set(_BY_NAME) | {"accuracy", "acc"})


def get(identifier, sparse=False, binary=False):
    """A fresh Metric for a name (``sparse``/``binary`` resolve "accuracy" as Keras does:
    by the targets and the output), a Metric instance, or a function (wrapped); None for None."""
    if identifier is None:
        return None
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str):
        if identifier in ("accuracy", "acc"):
            cls = _b.BinaryAccuracy if binary else (_b.SparseCategoricalAccuracy if sparse else _b.CategoricalAccuracy)
            return cls(name=identifier)
        if identifier in _BY_NAME:
            return _BY_NAME[identifier](name=identifier)
        raise ValueError(f"unknown metric {identifier!r}; known: {KNOWN}")
    if isinstance(identifier, type) and issubclass(identifier, Metric):
        return identifier()
    name = getattr(identifier, "__name__", None)
    if name in _BY_NAME and _FUNCTIONS.get(name) is identifier:
        return _BY_NAME[name](name=name)          # Keras's metric function: its metric, so named
    if callable(identifier):
        return MeanMetricWrapper(identifier)
    raise ValueError(f"unknown metric {identifier!r}; known: {KNOWN}, a Metric or a function")


def serialize(metric, given):
    """What compile's config records: the name given, else the class and config."""
    if isinstance(given, str):
        return given
    if isinstance(metric, MeanMetricWrapper):
        return {"class": "function", "name": get_registered_name(metric.fn)}
    return {"class": get_registered_name(type(metric)), "config": metric.get_config()}


def deserialize(config, custom_objects=None):
    if isinstance(config, str):
        return config
    if config.get("class") == "function":
        if config["name"] in _FUNCTIONS and config["name"] not in (custom_objects or {}):
            return _FUNCTIONS[config["name"]]            # Keras's metric and loss functions
        return get_registered_object(config["name"], custom_objects)
    return get_registered_object(config["class"], custom_objects).from_config(config["config"])
