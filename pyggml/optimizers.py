"""Optimizers (Keras names and defaults), run by ggml-opt's AdamW and SGD."""

import math

__all__ = ["Optimizer", "Adam", "AdamW", "SGD", "get"]


def _positive(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    return float(v)


def _unit(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    return float(v)


class Optimizer:
    """Base class; ``learning_rate`` can be read and set at any time."""
    kind = "adamw"
    name = "optimizer"

    def __init__(self, learning_rate):
        self._lr = _positive("learning_rate", learning_rate)

    @property
    def learning_rate(self):
        return self._lr

    @learning_rate.setter
    def learning_rate(self, value):
        self._lr = _positive("learning_rate", value)

    lr = learning_rate

    def hparams(self):
        """Keyword arguments for pyggml.core.OptContext."""
        raise NotImplementedError

    def get_config(self):
        raise NotImplementedError

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


class Adam(Optimizer):
    name = "adam"

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8):
        super().__init__(learning_rate)
        self.beta_1 = _unit("beta_1", beta_1)
        self.beta_2 = _unit("beta_2", beta_2)
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0:
            raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
        self.epsilon = float(epsilon)

    def hparams(self):
        return dict(learning_rate=self._lr, beta_1=self.beta_1, beta_2=self.beta_2,
                    epsilon=self.epsilon, weight_decay=0.0)

    def get_config(self):
        return dict(learning_rate=self._lr, beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)


class AdamW(Adam):
    name = "adamw"

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.01):
        super().__init__(learning_rate, beta_1, beta_2, epsilon)
        self.weight_decay = _unit("weight_decay", weight_decay)

    def hparams(self):
        h = super().hparams()
        h["weight_decay"] = self.weight_decay
        return h

    def get_config(self):
        c = super().get_config()
        c["weight_decay"] = self.weight_decay
        return c


class SGD(Optimizer):
    kind = "sgd"
    name = "sgd"

    def __init__(self, learning_rate=0.01):
        super().__init__(learning_rate)

    def hparams(self):
        return dict(learning_rate=self._lr, weight_decay=0.0)

    def get_config(self):
        return dict(learning_rate=self._lr)


_BY_NAME = {"adam": Adam, "adamw": AdamW, "sgd": SGD}


def get(identifier):
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown optimizer {identifier!r}; use one of {sorted(_BY_NAME)} or an Optimizer instance")
