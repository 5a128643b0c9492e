"""Metrics computed from each batch's predictions (numpy), averaged over samples."""

import numpy as np

__all__ = ["get", "METRICS"]


def _accuracy(y, p, loss_name):
    if loss_name == "sparse_categorical_crossentropy":
        labels = y.reshape(len(y), -1)
        # fit and evaluate hand the labels over as the one-hot rows the loss trains on
        labels = labels[:, 0].astype(np.int64) if labels.shape[1] == 1 else np.argmax(labels, axis=-1)
        return (np.argmax(p, axis=-1) == labels).astype(np.float64)
    if p.ndim >= 2 and p.shape[-1] > 1 and loss_name != "binary_crossentropy":
        return (np.argmax(p, axis=-1) == np.argmax(y, axis=-1)).astype(np.float64).reshape(len(p), -1).mean(axis=1)
    return ((p > 0.5) == (y > 0.5)).astype(np.float64).reshape(len(p), -1).mean(axis=1)


def _mae(y, p, loss_name):
    return np.abs(p - y).reshape(len(p), -1).mean(axis=1)


def _mse(y, p, loss_name):
    return ((p - y) ** 2).reshape(len(p), -1).mean(axis=1)


METRICS = {"accuracy": _accuracy, "acc": _accuracy, "mae": _mae, "mean_absolute_error": _mae,
           "mse": _mse, "mean_squared_error": _mse, "rmse": _mse}


def canonical(name):
    if not isinstance(name, str) or name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; known: {sorted(METRICS)}")
    return {"acc": "accuracy", "mean_absolute_error": "mae", "mean_squared_error": "mse"}.get(name, name)


class MetricState:
    """Running sums for one metric over an epoch."""

    def __init__(self, name, loss_name):
        self.name = canonical(name)
        self.loss_name = loss_name
        self.total = 0.0
        self.count = 0

    def update(self, y, p, n):
        v = METRICS[self.name](y[:n], p[:n], self.loss_name)
        self.total += float(v.sum())
        self.count += n

    def result(self):
        if self.count == 0:
            return float("nan")
        r = self.total / self.count
        return float(np.sqrt(r)) if self.name == "rmse" else float(r)
