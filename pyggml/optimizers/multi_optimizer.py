"""Keras 3's ``MultiOptimizer`` and ``OptimizerMap``: each weight stepped by the optimizer its
path picks (``"encoder/.*"`` a regular expression over ``variable.path``, e.g.
``"encoder_dense/weight"``), or by a function of the Variable.

The wrapper is one optimizer to the model: every weight keeps the slots of every inner
optimizer (named ``"<i>.<slot>"``), the step's scalars are the inner optimizers' own one after
the other, and each weight's update is its optimizer's update on its slice of them.  An inner
optimizer's ``clipvalue``/``clipnorm`` clips its own weights' gradients; its
``global_clipnorm``, ``use_ema``, gradient accumulation and loss scaling are refused (give them
to a single optimizer)."""

import re
from collections.abc import MutableMapping

import numpy as np

from pyggml import ops
from pyggml.optimizers.optimizer import Optimizer
from pyggml.saving.object_registration import get_registered_name, get_registered_object, register_builtin

__all__ = ["OptimizerMap", "MultiOptimizer"]


def _check_inner(optimizer, where):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{where}: an optimizer must be an Optimizer instance, got {optimizer!r}")
    if isinstance(optimizer, MultiOptimizer):
        raise ValueError(f"{where}: a MultiOptimizer cannot hold another MultiOptimizer")
    if type(optimizer).__name__ == "LossScaleOptimizer":
        raise ValueError(f"{where}: a LossScaleOptimizer cannot be inside a MultiOptimizer")
    for attr in ("global_clipnorm", "gradient_accumulation_steps", "loss_scale_factor"):
        if getattr(optimizer, attr, None):
            raise ValueError(f"{where}: {type(optimizer).__name__}'s {attr} is not supported inside a "
                             "MultiOptimizer (it spans the weights of every optimizer); clipvalue and clipnorm are")
    if getattr(optimizer, "use_ema", False):
        raise ValueError(f"{where}: {type(optimizer).__name__}'s use_ema is not supported inside a MultiOptimizer")
    return optimizer


@register_builtin
class OptimizerMap(MutableMapping):
    """Keras's map from weight paths to optimizers: an exact key first, else the one pattern
    (``re.fullmatch``) that matches, else ``default_optimizer``."""

    def __init__(self, default_optimizer, optimizer_map=None):
        self._default = _check_inner(default_optimizer, "OptimizerMap")
        if optimizer_map is not None and not isinstance(optimizer_map, dict):
            raise TypeError(f"OptimizerMap: optimizer_map must be a dict of path patterns, got {optimizer_map!r}")
        self._map = {}
        for k, v in (optimizer_map or {}).items():
            self[k] = v

    @property
    def default_optimizer(self):
        return self._default

    def __getitem__(self, key):
        if key in self._map:
            return self._map[key]
        found = [p for p in self._map if re.fullmatch(p, key)]
        if len(found) > 1:
            raise ValueError(f"OptimizerMap: the weight {key!r} matches several patterns: {found}")
        return self._map[found[0]] if found else self._default

    def __setitem__(self, key, optimizer):
        if not isinstance(key, str):
            raise ValueError(f"OptimizerMap: a key must be a string (a path or a pattern), got {key!r}")
        if key in self._map:
            raise ValueError(f"OptimizerMap: {key!r} is already mapped to {self._map[key]!r}")
        try:
            re.compile(key)
        except re.error as e:
            raise ValueError(f"OptimizerMap: {key!r} is not a regular expression ({e})") from None
        self._map[key] = _check_inner(optimizer, "OptimizerMap")

    def __delitem__(self, key):
        del self._map[key]

    def __len__(self):
        return len(self._map)

    def __iter__(self):
        return iter(self._map)

    def __call__(self, variable):
        return self[variable.path]

    def get_config(self):
        return {"default_optimizer": _serialize(self._default),
                "optimizer_map": {k: _serialize(v) for k, v in self._map.items()}}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(_deserialize(config["default_optimizer"], custom_objects),
                   {k: _deserialize(v, custom_objects) for k, v in (config.get("optimizer_map") or {}).items()})


def _serialize(optimizer):
    return {"class": get_registered_name(type(optimizer)), "config": optimizer.get_config()}


def _deserialize(config, custom_objects):
    return get_registered_object(config["class"], custom_objects).from_config(config["config"], custom_objects)


@register_builtin
class MultiOptimizer(Optimizer):
    """``MultiOptimizer(optimizer_map)``: an OptimizerMap, or a function ``(variable) ->
    optimizer``; ``.optimizers`` lists the inner ones.  ``learning_rate`` reads the default
    (or first) optimizer's."""

    name = "multi_optimizer"
    takes_variable = True

    def __init__(self, optimizer_map, loss_scale_factor=None, name=None, **kwargs):
        if kwargs:
            raise TypeError(f"MultiOptimizer: unexpected arguments {sorted(kwargs)}; give them to the inner "
                            "optimizers")
        if not (isinstance(optimizer_map, OptimizerMap) or callable(optimizer_map)):
            raise TypeError(f"MultiOptimizer: optimizer_map must be an OptimizerMap or a function of a Variable, "
                            f"got {optimizer_map!r}")
        super().__init__(0.0, loss_scale_factor=loss_scale_factor, name=name)
        self._optimizer_map = optimizer_map
        self._inner = []
        if isinstance(optimizer_map, OptimizerMap):
            for opt in list(optimizer_map.values()) + [optimizer_map.default_optimizer]:
                self._add(opt)
        self._chosen = {}

    def _add(self, opt):
        if not any(opt is o for o in self._inner):
            self._inner.append(_check_inner(opt, "MultiOptimizer"))
            opt.iterations = self.__dict__.get("_iterations", 0)
            if "_rate_set" in self.__dict__:                    # a rate set on the whole before it came
                opt.learning_rate = self.__dict__["_rate_set"]
        return next(i for i, o in enumerate(self._inner) if o is opt)

    def _index(self, variable):
        key = id(variable)
        entry = self._chosen.get(key)
        if entry is None or entry[0] is not variable:           # (an id another variable had before)
            entry = self._chosen[key] = (variable, self._add(self._optimizer_map(variable)))
        return entry[1]

    @property
    def optimizers(self):
        return list(self._inner)

    @property
    def iterations(self):
        return Optimizer.iterations.fget(self)

    @iterations.setter
    def iterations(self, value):
        Optimizer.iterations.fset(self, value)
        for o in self.__dict__.get("_inner", ()):              # the inner optimizers count the same steps
            o.iterations = self.__dict__["_iterations"]

    @property
    def learning_rate(self):
        """The default optimizer's rate (each inner optimizer keeps its own)."""
        if not self._inner:
            return 0.0
        first = self._optimizer_map.default_optimizer if isinstance(self._optimizer_map, OptimizerMap) else \
            self._inner[0]
        return first.learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        # the base class's __init__ sets it first (the inner optimizers keep their own rates);
        # later (a user, a callback) it sets every inner optimizer's, and those still to come
        if "_inner" not in self.__dict__:
            self._lr = 0.0
            return
        for o in self._inner:
            o.learning_rate = value
        self.__dict__["_rate_set"] = value

    @property
    def slot_names(self):
        return tuple(f"{i}.{s}" for i, o in enumerate(self._inner) for s in o.state_slot_names)

    def slot_initial_value(self, slot):
        i, name = slot.split(".", 1)
        return self._inner[int(i)].slot_initial_value(name)

    def _offsets(self):
        out, at = [], 0
        for o in self._inner:
            out.append(at)
            at += o.n_scalars
        return out

    def scalars(self):
        self.iterations = self.iterations                      # (an inner optimizer added since: in step)
        return np.concatenate([o.step_scalars() for o in self._inner]) if self._inner else np.zeros(1, np.float32)

    def update(self, param, grad, slots, scalars, variable=None):
        if variable is None:
            raise ValueError("MultiOptimizer: a weight's update needs its Variable")
        i = self._index(variable)
        inner = self._inner[i]
        if i >= len(self._offsets()) or any(f"{i}.{s}" not in slots for s in inner.state_slot_names):
            raise RuntimeError("MultiOptimizer: the optimizer for weight "
                               f"{variable.path!r} was added after the weights' slots were made; map every "
                               "weight's optimizer before the first step (an OptimizerMap lists them)")
        mine = ops.view(scalars, (inner.n_scalars,), offset=4 * self._offsets()[i])
        own = {s: slots[f"{i}.{s}"] for s in inner.state_slot_names}
        g = inner.clip(grad)
        if inner.takes_variable:
            return inner.update(param, g, own, mine, variable=variable)
        return inner.update(param, g, own, mine)

    def prepare(self, variables):
        """Pick every weight's optimizer before the slots are made (a function map may name new
        optimizers)."""
        for v in variables:
            self._index(v)

    def get_config(self):
        if not isinstance(self._optimizer_map, OptimizerMap):
            raise ValueError("MultiOptimizer: a function optimizer_map cannot be saved in a file; use an "
                             "OptimizerMap (or save the weights alone)")
        return {"name": self.name, "optimizer_map": self._optimizer_map.get_config(),
                "loss_scale_factor": self.loss_scale_factor}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        omap = OptimizerMap.from_config(config.pop("optimizer_map"), custom_objects)
        return cls(omap, **{k: v for k, v in config.items() if k in ("name", "loss_scale_factor")})
