"""pyggml: build, train and ship small and medium neural networks on ggml."""

try:
    from pyggml.core import _core  # noqa: F401
except ImportError as e:  # pragma: no cover - only in an unbuilt source tree
    import os as _os
    _here = _os.path.dirname(_os.path.abspath(__file__))
    if _os.path.isfile(_os.path.join(_here, "core", "_core.pyx")) and \
            not _os.path.isfile(_os.path.join(_here, "_config.py")):
        raise ImportError(
            f"pyggml is imported from its source folder {_here}, which is not built: Python looks "
            "in the current folder first, so there an installed pyggml is hidden behind the source. "
            "Run from another folder, or use the installed command (`.venv/bin/pyggml demo`, "
            "`pyggml info`); to install: `pip install .` in the source folder. "
            f"({e})") from None
    raise

from pyggml import _config
from pyggml.core import backends, get_n_threads, set_n_threads
from pyggml.errors import (AllocationError, ComputeError, ContextFullError, FreedError, GGMLError, GGUFError,
                           RPCError)

__version__ = _config.version


def version():
    """pyggml's version (Keras's ``keras.version()``)."""
    return __version__


def ggml_version():
    """The version of the ggml compiled in (the pinned release)."""
    return _config.ggml_version


def show_config():
    """Print what this build holds and what the import loaded: versions, the
    CPU variant in use and why, each GPU backend (loaded, or skipped and why),
    the usable devices, compiler and threads."""
    from pyggml.core import devices, load_info
    info = load_info() or {}
    lines = [
        f"pyggml {__version__}",
        f"ggml {_config.ggml_version} (llama.cpp {_config.ggml_commit}, from {_config.ggml_source})",
        f"compiled backends: {', '.join(_config.compiled_backends)}",
        f"cpu target: {_config.cpu_target}",
        f"cpu variant: {info.get('cpu_variant', _config.cpu_target)} ({info.get('cpu_variant_reason', '')})",
    ]
    unusable = info.get("unusable") or {}
    if unusable:
        lines.append("cpu variants not usable here: " + "; ".join(f"{v} ({r})" for v, r in unusable.items()))
    for name, state in (info.get("gpu") or {}).items():
        lines.append(f"gpu backend {name}: {state}")
    lines.append(f"usable devices: {', '.join(backends())}")
    for d in devices():
        lines.append(f"  {d['name']}: {d['description']} ({d['type']})")
    lines += [
        f"compiler: {_config.compiler}",
        f"build type: {_config.buildtype}" + (f", sanitize={_config.sanitize}" if _config.sanitize != "none" else ""),
        f"cpu threads: {get_n_threads()}",
    ]
    print("\n".join(lines))

from pyggml._random import set_seed
from pyggml import activations, callbacks, initializers, layers, losses, metrics, ops, optimizers, saving  # noqa: E402
from pyggml import constraints, regularizers  # noqa: E402
from pyggml import backend, config, data, datasets, dtype_policies, mixed_precision, preprocessing, random, tree, utils  # noqa: E402
from pyggml import quantizers  # noqa: E402
from pyggml.backend import device, name_scope  # noqa: E402
from pyggml.mixed_precision import DTypePolicy, FloatDTypePolicy  # noqa: E402
from pyggml.layers import Input
from pyggml.models import Model, Sequential
from pyggml.training import Snapshot, Trainer
from pyggml.saving import load_model
from pyggml.variables import Variable
from pyggml.autodiff import GradientTape
# Keras 3's top-level names for the base classes (keras.Layer, keras.Loss, ...)
from pyggml.layers import InputSpec, Layer
from pyggml.losses import Loss
from pyggml.metrics import Metric
from pyggml.optimizers import Optimizer
from pyggml.initializers import Initializer
from pyggml.regularizers import Regularizer
from pyggml.constraints import Constraint

__all__ = ["GradientTape", "InputSpec", "Layer", "Loss", "Metric", "Optimizer", "Initializer", "Regularizer", "Constraint", "Input", "Model", "Sequential", "Trainer", "Snapshot", "load_model", "set_seed", "set_n_threads",
           "get_n_threads", "backends", "show_config", "version", "ggml_version", "layers", "callbacks", "optimizers",
           "losses", "metrics", "ops", "activations", "initializers", "regularizers", "constraints", "saving",
           "utils", "preprocessing", "data", "random", "backend", "config", "mixed_precision", "tree", "Variable",
           "datasets", "dtype_policies", "quantizers", "DTypePolicy", "FloatDTypePolicy", "name_scope", "device",
           "GGMLError", "FreedError", "AllocationError", "ContextFullError", "ComputeError", "GGUFError", "RPCError",
           "rpc", "applications"]


def __getattr__(name):
    # pyggml.rpc (remote devices) is imported on first use: `python -m pyggml.rpc` then runs it cleanly;
    # pyggml.applications (the Keras application models, some 15 ms of imports) too
    if name in ("rpc", "applications"):
        import importlib
        return importlib.import_module(f"pyggml.{name}")
    raise AttributeError(f"module 'pyggml' has no attribute {name!r}")
