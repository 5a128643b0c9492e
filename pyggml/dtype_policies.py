"""Keras's ``keras.dtype_policies``: the policies pyggml computes with (float32, and the mixed
ones, which compute in float32 too: ``pyggml.mixed_precision``)."""

from pyggml.mixed_precision import DTypePolicy, FloatDTypePolicy, Policy, global_policy

__all__ = ["DTypePolicy", "FloatDTypePolicy", "get", "serialize", "deserialize"]


def get(identifier):
    """A Policy from a name, a Policy, a serialized one, or None (the global policy)."""
    if identifier is None:
        return global_policy()
    if isinstance(identifier, Policy):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    return Policy(identifier)


def serialize(policy):
    if not isinstance(policy, Policy):
        raise TypeError(f"serialize takes a DTypePolicy, got {type(policy).__name__}")
    return {"module": "keras", "class_name": "DTypePolicy", "config": policy.get_config()}


def deserialize(config, custom_objects=None):
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
        raise ValueError(f"deserialize takes what serialize gives ({{'class_name': ..., 'config': {{'name': "
                         f"...}}}}), got {config!r}")
    return Policy(**config["config"])
