"""Object registration: the classes a saved model may name, by name.

Built-in layers, models, losses, optimizers and metrics register themselves;
a user's own class registers with the decorator::

    @pg.saving.register_serializable()          # or (package="mine", name="Block")
    class TransformerBlock(pg.layers.Layer): ...

so that ``load_model`` can rebuild it from its config.  Keras's
``register_keras_serializable`` is the model.  ``custom_object_scope(dict)``
(Keras's) makes unregistered classes and functions findable by name while it
is active; ``load_model(..., custom_objects=)`` opens one around the rebuild.
"""

import importlib
import sys
import threading

__all__ = ["register_serializable", "register_keras_serializable", "get_registered_object",
           "get_registered_name", "custom_object_scope", "CustomObjectScope", "get_custom_objects"]

_scopes = threading.local()

_BY_NAME = {}          # registered name -> class
_NAME_OF = {}          # class -> registered name
_GLOBAL_CUSTOM = {}    # Keras's global custom objects: the user's registrations, and what they add by hand
_ON_DEMAND = {"pyggml_applications": "pyggml.applications"}     # package -> the module registering its classes


def register_serializable(package="Custom", name=None):
    """Register a class (or a function, e.g. a loss) under ``package>name``
    (default: its own name)."""
    if not isinstance(package, str) or (name is not None and not isinstance(name, str)):
        raise TypeError("package and name must be strings")

    def decorator(cls):
        if not callable(cls):
            raise TypeError(f"register_serializable decorates classes and functions, got {cls!r}")
        key = f"{package}>{name or cls.__name__}"
        if key in _BY_NAME and _BY_NAME[key] is not cls:
            raise ValueError(f"{key!r} is already registered to {_BY_NAME[key].__qualname__}")
        _BY_NAME[key] = cls
        _NAME_OF[cls] = key
        _GLOBAL_CUSTOM[key] = cls
        return cls
    return decorator


register_keras_serializable = register_serializable


def register_builtin(cls):
    """Register one of pyggml's own classes: layers and models under their plain
    class names (as saved configs name them), the rest under ``<family>>Name``
    (losses and metrics share class names)."""
    family = cls.__module__.split(".")[1] if cls.__module__.startswith("pyggml.") else ""
    key = cls.__name__ if family in ("layers", "models") else f"{family}>{cls.__name__}"
    _BY_NAME[key] = cls
    _NAME_OF[cls] = key
    return cls


def get_custom_objects():
    """Keras's global dict of custom objects, ``{name: class or function}``: what
    ``register_serializable`` registered (under ``package>name``), and what you put in it
    yourself (``get_custom_objects()["my_fn"] = my_fn``), which is then found by name
    when loading and deserializing.  The dict itself, not a copy."""
    return _GLOBAL_CUSTOM


def get_registered_name(cls):
    """The name a class or function is saved under: its registered name, else its own."""
    return _NAME_OF.get(cls, getattr(cls, "__name__", type(cls).__name__))


class custom_object_scope:
    """``with custom_object_scope({"name": obj, ...}):`` the objects are found by name
    (loading, deserializing) inside the block, on this thread."""

    def __init__(self, *dicts):
        merged = {}
        for d in dicts:
            if d is None:
                continue
            if not isinstance(d, dict):
                raise TypeError(f"custom_object_scope takes dicts {{name: object}}, got {type(d).__name__}")
            merged.update(d)
        self.custom_objects = merged

    def __enter__(self):
        stack = getattr(_scopes, "stack", None)
        if stack is None:
            stack = _scopes.stack = []
        stack.append(self.custom_objects)
        return self

    def __exit__(self, *exc):
        _scopes.stack.pop()
        return False


CustomObjectScope = custom_object_scope


def get_custom_object(name, custom_objects=None):
    """The object of the user's known by ``name``: in ``custom_objects``, an active
    ``custom_object_scope`` or ``get_custom_objects()``; None when none has that name."""
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    for scope in reversed(getattr(_scopes, "stack", None) or ()):
        if name in scope:
            return scope[name]
    return _GLOBAL_CUSTOM.get(name)


def get_registered_object(name, custom_objects=None):
    """The class registered (or given in ``custom_objects``, or in an active
    ``custom_object_scope``) under ``name``."""
    found = get_custom_object(name, custom_objects)
    if found is not None:
        return found
    if name in _BY_NAME:
        return _BY_NAME[name]
    # a class registered under a package is also found by its plain name, when unambiguous
    plain = [c for k, c in _BY_NAME.items() if k.split(">")[-1] == name]
    if len(plain) == 1:
        return plain[0]
    package = name.split(">")[0] if ">" in name else None
    if package in _ON_DEMAND and _ON_DEMAND[package] not in sys.modules:
        # pyggml's own classes in a module imported on demand (the applications' LayerScale): importing
        # it registers them
        importlib.import_module(_ON_DEMAND[package])
        return get_registered_object(name, custom_objects)
    raise ValueError(f"unknown class {name!r}: a class of your own must be registered with "
                     f"@pyggml.saving.register_serializable() (or passed in custom_objects) to be loaded")
