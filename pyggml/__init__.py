"""pyggml: build, train and ship small and medium neural networks on ggml."""

try:
    from pyggml.core import _core  # noqa: F401
except ImportError as e:  # pragma: no cover - only in an unbuilt source tree
    import os as _os
    if _os.path.isfile(_os.path.join(_os.path.dirname(__file__), "core", "_core.pyx")) and \
            not _os.path.isfile(_os.path.join(_os.path.dirname(__file__), "_config.py")):
        raise ImportError(
            "pyggml is imported from its source tree, which is not built. Install it with "
            "`pip install .` (or `pip install -e . --no-build-isolation`) and import it from "
            f"outside the source folder. ({e})") from None
    raise

from pyggml import _config
from pyggml.core import backends, get_n_threads, set_n_threads
from pyggml.errors import (AllocationError, ComputeError, ContextFullError, FreedError, GGMLError, GGUFError,
                           RPCError)

__version__ = _config.version


def ggml_version():
    """The version of the ggml compiled in (the pinned release)."""
    return _config.ggml_version


def show_config():
    """Print what this build holds: versions, backends, CPU target, compiler."""
    from pyggml.core import devices
    lines = [
        f"pyggml {__version__}",
        f"ggml {_config.ggml_version} (llama.cpp {_config.ggml_commit}, from {_config.ggml_source})",
        f"compiled backends: {', '.join(_config.compiled_backends)}",
        f"usable devices: {', '.join(backends())}",
    ]
    for d in devices():
        lines.append(f"  {d['name']}: {d['description']} ({d['type']})")
    lines += [
        f"cpu target: {_config.cpu_target}",
        f"compiler: {_config.compiler}",
        f"build type: {_config.buildtype}" + (f", sanitize={_config.sanitize}" if _config.sanitize != "none" else ""),
        f"cpu threads: {get_n_threads()}",
    ]
    print("\n".join(lines))

from pyggml._random import set_seed
from pyggml import activations, callbacks, initializers, layers, losses, metrics, ops, optimizers, saving  # noqa: E402
from pyggml import preprocessing, utils  # noqa: E402
from pyggml.layers import Input
from pyggml.models import Model, Sequential
from pyggml.training import Snapshot, Trainer
from pyggml.saving import load_model
from pyggml.variables import Variable

__all__ = ["Input", "Model", "Sequential", "Trainer", "Snapshot", "load_model", "set_seed", "set_n_threads",
           "get_n_threads", "backends", "show_config", "ggml_version", "layers", "callbacks", "optimizers",
           "losses", "metrics", "ops", "activations", "initializers", "saving", "utils", "preprocessing", "Variable",
           "GGMLError",
           "FreedError", "AllocationError", "ContextFullError", "ComputeError", "GGUFError", "rpc", "RPCError"]


def __getattr__(name):
    # pyggml.rpc (remote devices) is imported on first use: `python -m pyggml.rpc` then runs it cleanly
    if name == "rpc":
        import importlib
        return importlib.import_module("pyggml.rpc")
    raise AttributeError(f"module 'pyggml' has no attribute {name!r}")
