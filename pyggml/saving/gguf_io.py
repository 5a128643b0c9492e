"""Models as single GGUF files.

Layout (see README, "The GGUF layout"):
- ``general.architecture`` = "pyggml", ``general.name``, ``general.type`` = "model"
- ``pyggml.format_version`` (u32, 1), ``pyggml.config`` (JSON: the layer graph),
  ``pyggml.compile`` (JSON: optimizer, losses, metrics, loss weights)
- one f32 tensor per weight, named as in ``get_weights()`` ("dense.weight"),
  numpy shape = GGUF ne reversed
- with optimizer state: ``pyggml.optimizer.iter`` and tensors
  ``optimizer.m.<weight>`` / ``optimizer.v.<weight>`` (Adam moments)
"""

import json
import os

import numpy as np

from pyggml.core import GGUFFile
from pyggml.errors import GGUFError

FORMAT_VERSION = 1
_ARCH = "pyggml"


def _path(path):
    try:
        p = os.fspath(path)
    except TypeError:
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}") from None
    return os.fsdecode(p) if isinstance(p, bytes) else p


def _compile_json(model):
    a = model._compile_args
    return json.dumps({"optimizer": {"class": type(a["optimizer"]).__name__, "config": a["optimizer"].get_config()},
                       "loss": a["loss"] if all(isinstance(l, str) for l in a["loss"]) else [l.name for l in model._losses],
                       "metrics": a["metrics"], "loss_weights": a["loss_weights"]})


def _write(model, path, with_config, with_state):
    model._check_compiled("saving")
    f = GGUFFile()
    try:
        f.set("general.architecture", _ARCH)
        f.set("general.name", model.name)
        f.set("general.type", "model")
        f.set("pyggml.format_version", FORMAT_VERSION, kind="u32")
        if with_config:
            f.set("pyggml.config", json.dumps(model.get_config()))
            f.set("pyggml.compile", _compile_json(model))
        weights = model.get_weights()
        for k, v in weights.items():
            f.add_tensor(k, v.astype(np.float32))
        state = None
        if with_state and model._fit_step is not None:
            state = model._fit_step.get_state()
        elif with_state:
            state = getattr(model, "_pending_opt_state", None)
        if state is not None:
            f.set("pyggml.optimizer.iter", int(state["iter"]))
            for nm, m, v in zip(state["names"], state["m"], state["v"]):
                if m is not None:
                    f.add_tensor(f"optimizer.m.{nm}"[:63], m)
                    f.add_tensor(f"optimizer.v.{nm}"[:63], v)
        f.write(_path(path))
    finally:
        f.free()


def save_model(model, path):
    """Write the architecture, compile settings, weights and optimizer state."""
    _write(model, path, with_config=True, with_state=True)


def save_weights(model, path):
    _write(model, path, with_config=False, with_state=False)


def _open(path):
    p = _path(path)
    f = GGUFFile.read(p)
    if f.get("general.architecture") != _ARCH:
        f.free()
        raise GGUFError(f"{p!r} is not a pyggml model (general.architecture is not 'pyggml')")
    v = f.get("pyggml.format_version")
    if not isinstance(v, int) or v != FORMAT_VERSION:
        f.free()
        raise GGUFError(f"{p!r} has pyggml format version {v!r}; this pyggml reads version {FORMAT_VERSION}")
    return f


def _same_shape(file_shape, shape):
    """GGUF keeps no trailing ne of 1, so a file shape lacks the leading 1s of
    the numpy shape ((1, 8) reads as (8,)); any other difference (a transposed
    weight of the same size) is a different weight."""
    def strip(s):
        s = tuple(int(d) for d in s)
        while len(s) > 1 and s[0] == 1:
            s = s[1:]
        return s
    return strip(file_shape) == strip(shape)


def _read_weights(f, model):
    current = model.get_weights()
    names = set(f.tensor_names())
    out = {}
    for k, cur in current.items():
        if k not in names:
            raise GGUFError(f"the file has no weight {k!r}")
        shape, dtype, offset, nbytes = f.tensor_info(k)
        if not _same_shape(shape, cur.shape):
            raise GGUFError(f"weight {k!r} has shape {shape} in the file, the model needs {cur.shape}")
        a = f.read_tensor(k).astype(np.float32).reshape(cur.shape)
        if not np.all(np.isfinite(a)):
            raise GGUFError(f"weight {k!r} holds NaN or inf")
        out[k] = a
    return out


def _read_specs(f, model):
    """The file's weights for a model not yet compiled, checked against its specs."""
    names = set(f.tensor_names())
    out = {}
    for layer, wn, shape, *_ in model._weight_specs():
        k = f"{layer.name}.{wn}"
        if k not in names:
            raise GGUFError(f"the file has no weight {k!r}")
        fshape, dtype, offset, nbytes = f.tensor_info(k)
        if not _same_shape(fshape, shape):
            raise GGUFError(f"weight {k!r} has shape {fshape} in the file, the model needs {shape}")
        a = f.read_tensor(k).astype(np.float32).reshape(shape)
        if not np.all(np.isfinite(a)):
            raise GGUFError(f"weight {k!r} holds NaN or inf")
        out[k] = a
    return out


def load_weights(model, path):
    """Load weights by name; a missing or misshapen weight is refused, naming it."""
    f = _open(path)
    try:
        model.set_weights(_read_weights(f, model))
    finally:
        f.free()


def load_model(path, backend="auto"):
    """A compiled model from a file written by ``model.save``."""
    from pyggml import optimizers
    from pyggml.models import Model, Sequential
    f = _open(path)
    try:
        try:
            cfg = json.loads(f.get("pyggml.config"))
            comp = json.loads(f.get("pyggml.compile"))
        except (TypeError, ValueError) as e:
            raise GGUFError(f"{path!r}: the model config is missing or not valid JSON ({e})") from None
        if not isinstance(cfg, dict) or not isinstance(comp, dict):
            raise GGUFError(f"{path!r}: the model config is not a JSON object")
        try:
            cls = Sequential if cfg.get("sequential") else Model
            model = cls.from_config(cfg)
            model._ensure_graph()
            okl = {"Adam": optimizers.Adam, "AdamW": optimizers.AdamW, "SGD": optimizers.SGD}
            opt = okl[comp["optimizer"]["class"]](**comp["optimizer"]["config"])
        except GGUFError:
            raise
        except Exception as e:
            raise GGUFError(f"{path!r}: the model config cannot be rebuilt ({type(e).__name__}: {e})") from None
        # every weight must be in the file with the right shape before anything is allocated,
        # so a hostile config cannot ask for more memory than the file holds
        values = _read_specs(f, model)
        model._values = values
        try:
            model.compile(optimizer=opt, loss=comp["loss"], metrics=comp["metrics"] or None, backend=backend,
                          loss_weights=comp["loss_weights"])
        except (KeyError, TypeError, ValueError) as e:
            raise GGUFError(f"{path!r}: the compile settings are not valid ({type(e).__name__}: {e})") from None
        it = f.get("pyggml.optimizer.iter")
        if isinstance(it, int) and it >= 1:
            names = [f"{ln}.{wn}" for (ln, wn) in model._wt if "param" in model._wt[(ln, wn)].flags]
            ms, vs = [], []
            tn = set(f.tensor_names())
            for nm in names:
                km, kv = f"optimizer.m.{nm}"[:63], f"optimizer.v.{nm}"[:63]
                if km in tn and kv in tn:
                    m_, v_ = f.read_tensor(km), f.read_tensor(kv)
                    want = model._wt[tuple(nm.split(".", 1))].shape
                    if m_.size != int(np.prod(want)) or v_.size != int(np.prod(want)):
                        raise GGUFError(f"optimizer state for {nm!r} does not match the weight's shape {want}")
                    ms.append(m_.reshape(want).astype(np.float32))
                    vs.append(v_.reshape(want).astype(np.float32))
                else:
                    ms.append(None)
                    vs.append(None)
            model._pending_opt_state = {"iter": it, "m": ms, "v": vs, "names": names}
        return model
    finally:
        f.free()
