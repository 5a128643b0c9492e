"""``pg.config``: Keras's ``keras.config`` settings.

The numeric settings (``floatx``, ``epsilon``, ``image_data_format``) are
pyggml.backend's own functions, so ``pg.config.set_epsilon`` and
``pg.backend.set_epsilon`` change one and the same value.  The rest:

- ``backend()`` is ``"ggml"``, as ``pg.backend.backend()`` (``set_backend`` accepts only that name);
- interactive logging (Keras's ``enable/disable_interactive_logging``,
  ``is_interactive_logging_enabled``): when enabled, progress bars and messages
  (``pg.utils.Progbar``, ``pg.callbacks.ProgbarLogger``) are written to stdout;
  when disabled they go to ``logging.getLogger("pyggml")`` at INFO level, one
  line per update, without terminal control characters;
- ``enable_unsafe_deserialization()`` turns off safe mode for
  ``pg.saving.deserialize_keras_object`` (its ``safe_mode=None`` then means False).
  pyggml never stores or runs code from a file (see ``pg.layers.Lambda``), so safe
  mode only decides whether a config that names a ``lambda`` function is refused;
- ``enable/disable_traceback_filtering`` and ``is_traceback_filtering_enabled``:
  Keras's switch, kept as a flag (pyggml does not shorten tracebacks, so there is
  nothing to filter either way);
- ``dtype_policy()`` / ``set_dtype_policy``: pg.mixed_precision's global policy (``"float32"``;
  a mixed policy is accepted and computes in float32);
- ``set_max_epochs(n)`` / ``set_max_steps_per_epoch(n)`` (Keras 3's): caps on what every
  ``fit`` runs, whatever it is asked (``None``: no cap), read back with ``max_epochs()`` /
  ``max_steps_per_epoch()``;
- flash attention: pyggml's attention layers compute attention with plain ggml ops, so
  ``is_flash_attention_enabled()`` is False, ``disable_flash_attention()`` is accepted and
  ``enable_flash_attention()`` raises a ValueError that says so.
"""

import logging
import sys

from pyggml import mixed_precision

from pyggml.backend import backend as backend_name
from pyggml.backend import (epsilon, floatx, image_data_format, set_epsilon, set_floatx,  # noqa: F401
                            set_image_data_format)

__all__ = ["backend", "set_backend", "floatx", "set_floatx", "epsilon", "set_epsilon", "image_data_format",
           "set_image_data_format", "enable_interactive_logging", "disable_interactive_logging",
           "is_interactive_logging_enabled", "enable_unsafe_deserialization", "in_safe_mode",
           "enable_traceback_filtering", "disable_traceback_filtering", "is_traceback_filtering_enabled",
           "dtype_policy", "set_dtype_policy", "enable_flash_attention", "disable_flash_attention",
           "is_flash_attention_enabled", "set_max_epochs", "max_epochs", "set_max_steps_per_epoch",
           "max_steps_per_epoch"]

_STATE = {"interactive_logging": True, "safe_mode": True, "traceback_filtering": True, "max_epochs": None,
          "max_steps_per_epoch": None}


def _cap(name, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    _STATE[name] = value


def set_max_epochs(max_epochs):
    """Cap the epochs of every ``fit`` (Keras 3's; ``None`` removes the cap)."""
    _cap("max_epochs", max_epochs)


def max_epochs():
    return _STATE["max_epochs"]


def set_max_steps_per_epoch(max_steps_per_epoch):
    """Cap the batches of every ``fit`` epoch (Keras 3's; ``None`` removes the cap)."""
    _cap("max_steps_per_epoch", max_steps_per_epoch)


def max_steps_per_epoch():
    return _STATE["max_steps_per_epoch"]


def backend():
    """The name of the backend, as Keras's ``keras.config.backend()`` gives it: ``"ggml"``
    (``pg.backend.backend()``'s)."""
    return backend_name()


def set_backend(backend):
    """Keras's switch of backend: pyggml has one, so only ``"ggml"`` is accepted."""
    if backend != backend_name():
        raise ValueError(f"set_backend: pyggml runs only on its own backend {backend_name()!r}, got {backend!r}")


def enable_interactive_logging():
    """Progress bars and messages go to stdout (the default)."""
    _STATE["interactive_logging"] = True


def disable_interactive_logging():
    """Progress bars and messages go to ``logging.getLogger("pyggml")`` (INFO) instead of stdout."""
    _STATE["interactive_logging"] = False


def is_interactive_logging_enabled():
    return _STATE["interactive_logging"]


def print_msg(message, line_break=True):
    """Write a progress message where interactive logging says: stdout, or the "pyggml" logger."""
    if _STATE["interactive_logging"]:
        sys.stdout.write(message + ("\n" if line_break else ""))
        sys.stdout.flush()
    else:
        logging.getLogger("pyggml").info(message.strip("\r\b\n"))


def enable_unsafe_deserialization():
    """Turn off safe mode for deserialization (see the module's notes)."""
    _STATE["safe_mode"] = False


def in_safe_mode():
    """Whether deserialization is in safe mode (True unless ``enable_unsafe_deserialization`` was called)."""
    return _STATE["safe_mode"]


def enable_traceback_filtering():
    _STATE["traceback_filtering"] = True


def disable_traceback_filtering():
    _STATE["traceback_filtering"] = False


def is_traceback_filtering_enabled():
    return _STATE["traceback_filtering"]


def dtype_policy():
    """The global dtype policy (pg.mixed_precision.Policy): ``"float32"`` unless set."""
    return mixed_precision.global_policy()


def set_dtype_policy(policy):
    """``"float32"``, or a mixed policy (``"mixed_float16"``, ``"mixed_bfloat16"``), which
    computes in float32 (pg.mixed_precision); others are refused."""
    mixed_precision.set_global_policy(policy)


def enable_flash_attention():
    raise ValueError("enable_flash_attention: pyggml's attention layers have no flash attention kernel; "
                     "they compute attention with plain ops (leave it disabled)")


def disable_flash_attention():
    """Accepted: pyggml never uses flash attention."""
    return None


def is_flash_attention_enabled():
    return False
