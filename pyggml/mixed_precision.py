"""``pg.mixed_precision``: Keras's mixed-precision names, for scripts that set a policy.

pyggml keeps its variables and computes in float32.  A *mixed* policy
(``"mixed_float16"``, ``"mixed_bfloat16"``) keeps variables in float32 in Keras
too and only computes in 16 bits for speed on accelerators: pyggml accepts it,
says once (a ``UserWarning``) that it computes in float32, and computes so:
the results are float32's, not 16-bit ones.  ``"float32"`` is the default.
Policies that would store the variables in another type (``"float16"``,
``"bfloat16"``, ``"float64"``) are refused with a ValueError.

``Policy(name)`` (also ``DTypePolicy``) has Keras's ``name``, ``compute_dtype`` and
``variable_dtype``: the latter two are what pyggml uses, ``"float32"``.
``LossScaleOptimizer(optimizer)`` gives the optimizer back: loss scaling keeps
16-bit gradients from underflowing, and float32 gradients need none
(``optimizer.scale_loss`` stays the identity unless ``loss_scale_factor`` is set).
"""

import warnings

__all__ = ["Policy", "DTypePolicy", "FloatDTypePolicy", "set_global_policy", "global_policy", "dtype_policy",
           "set_dtype_policy", "LossScaleOptimizer"]

_MIXED = ("mixed_float16", "mixed_bfloat16")
_STATE = {"name": "float32", "warned": False}


class Policy:
    """``Policy(name)``: ``"float32"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``."""

    def __init__(self, name="float32"):
        self.name = _check(name)
        self.compute_dtype = "float32"
        self.variable_dtype = "float32"

    def __repr__(self):
        return f'<DTypePolicy "{self.name}">'

    def __eq__(self, other):
        name = other.name if isinstance(other, Policy) else other
        return isinstance(name, str) and name == self.name

    def __hash__(self):
        return hash(self.name)

    def get_config(self):
        return {"name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


DTypePolicy = FloatDTypePolicy = Policy


def _check(name):
    if not isinstance(name, str):
        raise TypeError(f"a dtype policy is a name such as 'float32' or 'mixed_float16', got {name!r}")
    if name == "float32" or name in _MIXED:
        return name
    raise ValueError(f"dtype policy {name!r}: pyggml keeps variables and computes in float32; it accepts "
                     f"'float32' and the mixed policies {list(_MIXED)} (computed in float32)")


def set_global_policy(policy):
    """Set the global policy (a name or a Policy); a mixed one computes in float32."""
    name = _check(policy.name if isinstance(policy, Policy) else getattr(policy, "name", policy))
    if name in _MIXED and not _STATE["warned"]:
        _STATE["warned"] = True
        warnings.warn(f"dtype policy {name!r}: pyggml computes in float32 (its results are float32's; there is "
                      f"no 16-bit compute to speed up)", UserWarning, stacklevel=2)
    _STATE["name"] = name


def global_policy():
    """The global Policy (``"float32"`` unless set)."""
    return Policy(_STATE["name"])


# Keras 3's newer names of the same two
dtype_policy = global_policy
set_dtype_policy = set_global_policy


class LossScaleOptimizer:
    """Keras's ``LossScaleOptimizer(inner_optimizer, initial_scale=..., dynamic_growth_steps=...)``:
    the inner optimizer itself (see the module's docstring)."""

    def __new__(cls, inner_optimizer, initial_scale=32768.0, dynamic_growth_steps=2000, **kwargs):
        if not callable(getattr(inner_optimizer, "apply_gradients", None)):
            raise TypeError(f"LossScaleOptimizer wraps a pyggml optimizer, got {type(inner_optimizer).__name__}")
        return inner_optimizer
