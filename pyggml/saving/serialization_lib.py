"""Keras's ``serialize_keras_object`` / ``deserialize_keras_object`` and its
``get_registered_object``, over pyggml's object registry.

An object with ``get_config`` becomes Keras's dict ``{"module", "class_name",
"config", "registered_name"}``: pyggml's own classes are named as Keras names
them (``"module": "keras.layers"``, ``"keras.losses"``, ...), a class registered
with ``register_keras_serializable`` by its module and registered name
(``"package>Name"``).  A function becomes ``{"class_name": "function",
"config": <name>}``; tuples, numpy arrays and bytes get Keras's ``__tuple__``,
``__numpy__`` and ``__bytes__`` forms; dicts and lists are serialized item by
item; str, numbers, bools and None stay as they are.

Deserializing finds the class in ``custom_objects``, an active
``custom_object_scope``, ``get_custom_objects()``, the registry, or pyggml's
module of that family.  pyggml never runs code found in a config: a
``lambda`` is saved with its source text for the reader only, and
deserializing it raises a ValueError (in safe mode, as Keras does; with
``enable_unsafe_deserialization`` too, since pyggml has no bytecode to load):
hand the function back in ``custom_objects`` under its ``"__lambda__"`` key's
name.
"""

import importlib
import inspect

import numpy as np

from pyggml import config as _config
from pyggml.saving import object_registration as registry

__all__ = ["serialize_keras_object", "deserialize_keras_object", "get_registered_object"]

_FAMILIES = ("layers", "models", "losses", "metrics", "optimizers", "activations", "initializers", "regularizers",
             "constraints", "callbacks")


def _family(obj_or_cls):
    mod = getattr(obj_or_cls, "__module__", "") or ""
    parts = mod.split(".")
    if parts[0] == "pyggml" and len(parts) > 1:
        if parts[1] == "optimizers" and len(parts) > 2 and parts[2] == "schedules":
            return "optimizers.schedules"
        if parts[1] in _FAMILIES:
            return parts[1]
    return None


def _is_registered_by_user(cls):
    key = registry.get_custom_objects()
    name = registry.get_registered_name(cls)
    return key.get(name) is cls


def serialize_keras_object(obj):
    """Keras's JSON-able form of ``obj`` (see the module's notes)."""
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, bytes):
        return {"class_name": "__bytes__", "config": {"value": obj.decode("latin-1")}}
    if isinstance(obj, np.ndarray):
        return {"class_name": "__numpy__", "config": {"value": obj.tolist(), "dtype": str(obj.dtype)}}
    if isinstance(obj, tuple) and not hasattr(type(obj), "_fields"):
        return {"class_name": "__tuple__", "config": {"value": [serialize_keras_object(v) for v in obj]}}
    if isinstance(obj, list):
        return [serialize_keras_object(v) for v in obj]
    if isinstance(obj, dict):
        return {k: serialize_keras_object(v) for k, v in obj.items()}
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        if obj.__name__ == "<lambda>":
            try:
                source = inspect.getsource(obj).strip()
            except (OSError, TypeError):
                source = None
            return {"class_name": "__lambda__", "config": {"source": source}}
        name = registry.get_registered_name(obj)
        fam = _family(obj)
        user = _is_registered_by_user(obj)
        return {"module": f"keras.{fam}" if fam and not user else obj.__module__, "class_name": "function",
                "config": name if user else obj.__name__, "registered_name": name if user else None}
    if isinstance(obj, type):
        raise TypeError(f"serialize_keras_object takes an object or a function, not the class {obj.__qualname__}: "
                        f"serialize an instance, or use get_registered_name for the class's name")
    if not callable(getattr(obj, "get_config", None)):
        raise TypeError(f"cannot serialize {obj!r}: it has no get_config() (a class of yours needs "
                        f"get_config and @register_keras_serializable)")
    cls = type(obj)
    fam = _family(cls)
    user = _is_registered_by_user(cls)
    cfg = obj.get_config()
    out = {"module": f"keras.{fam}" if fam and not user else cls.__module__, "class_name": cls.__name__,
           "config": serialize_keras_object(cfg) if isinstance(cfg, dict) else cfg,
           "registered_name": registry.get_registered_name(cls) if user else None}
    build = getattr(obj, "get_build_config", None)
    if callable(build):
        bc = build()
        if bc:
            out["build_config"] = serialize_keras_object(bc)
    return out


def _lookup(class_name, module, registered_name, custom_objects):
    """The class or function a serialized entry names, or None."""
    for name in (registered_name, class_name):
        if not name:
            continue
        found = get_registered_object(name, custom_objects)
        if found is not None:
            fam = _family(found)
            # a plain-name match must be of the family the entry names (Keras's "keras.losses" + "MeanSquaredError")
            if module and module.startswith("keras.") and fam and fam != module[len("keras."):] \
                    and not registry.get_custom_objects().get(name) is found:
                found = None
            if found is not None:
                return found
    if module and module.startswith("keras."):
        fam = module[len("keras."):]
        if fam.split(".")[0] in _FAMILIES:
            found = get_registered_object(f"{fam.split('.')[0]}>{class_name}", custom_objects)
            if found is not None:
                return found
            try:
                mod = importlib.import_module(f"pyggml.{fam}")
            except ImportError:
                return None
            return getattr(mod, class_name, None)
    return None


def deserialize_keras_object(config, custom_objects=None, safe_mode=None, **kwargs):
    """The object a ``serialize_keras_object`` form (or Keras's, as found in a Keras config)
    describes.  A plain string, as Keras's: the object of that name in ``custom_objects``, an
    active ``custom_object_scope``, ``get_custom_objects()`` or ``module_objects``, else the
    string itself (``"SGD"`` stays ``"SGD"``; a name of pyggml's own is not looked up).
    ``safe_mode=None`` follows ``pg.config.enable_unsafe_deserialization``."""
    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise TypeError(f"custom_objects must be a dict {{name: object}}, got {type(custom_objects).__name__}")
    safe = _config.in_safe_mode() if safe_mode is None else bool(safe_mode)
    if config is None or isinstance(config, (bool, int, float)):
        return config
    if isinstance(config, str):
        found = registry.get_custom_object(config, custom_objects)
        if found is not None:
            return found
        module_objects = kwargs.get("module_objects")
        return module_objects[config] if module_objects and config in module_objects else config
    if isinstance(config, (list, tuple)):
        return type(config)(deserialize_keras_object(v, custom_objects, safe_mode) for v in config)
    if not isinstance(config, dict):
        raise TypeError(f"deserialize_keras_object takes a dict (or a list, str, number or None), "
                        f"got {type(config).__name__}")
    if "class_name" not in config:
        return {k: deserialize_keras_object(v, custom_objects, safe_mode) for k, v in config.items()}
    class_name, inner = config["class_name"], config.get("config")
    if class_name == "__tuple__":
        return tuple(deserialize_keras_object(v, custom_objects, safe_mode) for v in inner["value"])
    if class_name == "__numpy__":
        return np.asarray(inner["value"], dtype=inner.get("dtype"))
    if class_name == "__bytes__":
        return inner["value"].encode("latin-1")
    if class_name == "__lambda__":
        why = ("in safe mode a lambda is not deserialized (as in Keras)" if safe else
               "pyggml never runs code found in a config, even outside safe mode")
        src = (inner or {}).get("source") if isinstance(inner, dict) else None
        raise ValueError(f"deserialize_keras_object: the config holds a lambda function; {why}. Pass the function "
                         f"itself instead" + (f" (its source: {src})" if src else ""))
    module, registered = config.get("module"), config.get("registered_name")
    if class_name == "function":
        fn = _lookup(inner, module, registered, custom_objects)
        if fn is None:
            raise ValueError(f"unknown function {registered or inner!r} (module {module!r}): register it with "
                             f"@pg.saving.register_keras_serializable() or pass it in custom_objects")
        return fn
    cls = _lookup(class_name, module, registered, custom_objects)
    if cls is None:
        raise ValueError(f"unknown class {registered or class_name!r} (module {module!r}): a class of yours must be "
                         f"registered with @pg.saving.register_keras_serializable() or passed in custom_objects")
    if not callable(getattr(cls, "from_config", None)):
        raise TypeError(f"{class_name!r} names {cls!r}, which has no from_config")
    cfg = inner if inner is not None else {}
    if isinstance(cfg, dict):
        cfg = {k: _inner(v, custom_objects, safe_mode) for k, v in cfg.items()}
    with registry.custom_object_scope(custom_objects or {}):
        try:
            takes_custom = "custom_objects" in inspect.signature(cls.from_config).parameters
        except (TypeError, ValueError):
            takes_custom = False
        obj = cls.from_config(cfg, custom_objects=custom_objects) if takes_custom else cls.from_config(cfg)
    build = config.get("build_config")
    if build and callable(getattr(obj, "build_from_config", None)):
        obj.build_from_config(build)
    return obj


def _inner(value, custom_objects, safe_mode):
    """A config's own values, at any depth: only Keras's special forms (tuples, arrays, bytes)
    are turned back; the dicts of nested objects stay dicts for the class's from_config, as Keras
    leaves them."""
    if isinstance(value, dict):
        if value.get("class_name") in ("__tuple__", "__numpy__", "__bytes__"):
            return deserialize_keras_object(value, custom_objects, safe_mode)
        return {k: _inner(v, custom_objects, safe_mode) for k, v in value.items()}
    if isinstance(value, list):
        return [_inner(v, custom_objects, safe_mode) for v in value]
    return value


def get_registered_object(name, custom_objects=None, module_objects=None):
    """Keras's form: the class or function known by ``name`` (in ``custom_objects``, an active
    ``custom_object_scope``, ``get_custom_objects()``, ``module_objects``, then pyggml's
    registry), or None when nothing has that name."""
    if not isinstance(name, str):
        raise TypeError(f"get_registered_object: name must be a string, got {type(name).__name__}")
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    try:
        found = registry.get_registered_object(name)
    except ValueError:
        found = None
    if found is not None and (name in registry.get_custom_objects() or not module_objects
                              or name not in module_objects):
        return found
    if module_objects and name in module_objects:
        return module_objects[name]
    return found
