"""Keras's ``keras.dtype_policies``: the policies pyggml computes with (float32, and the mixed
ones, which compute in float32 too: ``pyggml.mixed_precision``)."""

from pyggml.mixed_precision import DTypePolicy, FloatDTypePolicy, Policy, global_policy

__all__ = ["DTypePolicy", "FloatDTypePolicy", "QuantizedDTypePolicy", "get", "serialize", "deserialize",
           "QUANTIZATION_MODES", "policy_mode"]

# the weight quantizations of model.quantize (pyggml.layers.core.quantize): the largest integer
QUANTIZATION_MODES = {"int8": 127, "int4": 7}


def policy_mode(dtype):
    """The mode of a quantized dtype policy (``"int8_from_float32"``, or an object of that name),
    else None."""
    name = getattr(dtype, "name", dtype)
    if isinstance(name, str) and name.endswith("_from_float32") and name[:-len("_from_float32")] in QUANTIZATION_MODES:
        return name[:-len("_from_float32")]
    return None


class QuantizedDTypePolicy:
    """Keras's policy of a quantized layer: ``QuantizedDTypePolicy("int8")``, named
    ``"int8_from_float32"`` (its weights int8, computed in float32)."""

    def __init__(self, mode, source_name="float32"):
        if mode not in QUANTIZATION_MODES or source_name != "float32":
            raise ValueError(f"QuantizedDTypePolicy: a mode of {sorted(QUANTIZATION_MODES)} from 'float32', got "
                             f"{mode!r} from {source_name!r}")
        self.quantization_mode = mode
        self.name = f"{mode}_from_float32"
        self.compute_dtype = self.variable_dtype = "float32"

    def __repr__(self):
        return f'<QuantizedDTypePolicy "{self.name}">'

    def __eq__(self, other):
        return getattr(other, "name", other) == self.name

    def __hash__(self):
        return hash(self.name)

    def get_config(self):
        return {"mode": self.quantization_mode, "source_name": "float32"}


def get(identifier):
    """A Policy from a name, a Policy, a serialized one, or None (the global policy)."""
    if identifier is None:
        return global_policy()
    if isinstance(identifier, (Policy, QuantizedDTypePolicy)):
        return identifier
    if policy_mode(identifier) is not None:
        return QuantizedDTypePolicy(policy_mode(identifier))
    if isinstance(identifier, dict):
        return deserialize(identifier)
    return Policy(identifier)


def serialize(policy):
    if not isinstance(policy, (Policy, QuantizedDTypePolicy)):
        raise TypeError(f"serialize takes a DTypePolicy, got {type(policy).__name__}")
    return {"module": "keras", "class_name": type(policy).__name__ if isinstance(policy, QuantizedDTypePolicy)
            else "DTypePolicy", "config": policy.get_config()}


def deserialize(config, custom_objects=None):
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
        raise ValueError(f"deserialize takes what serialize gives ({{'class_name': ..., 'config': {{'name': "
                         f"...}}}}), got {config!r}")
    if config.get("class_name") == "QuantizedDTypePolicy":
        return QuantizedDTypePolicy(**config["config"])
    return Policy(**config["config"])
