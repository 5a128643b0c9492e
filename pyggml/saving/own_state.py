"""Keras 3's per-layer saving hooks in a pyggml file.

A layer (or model) class that defines ``save_own_variables(store)`` /
``load_own_variables(store)`` keeps what it puts in ``store`` (a dict of
arrays) with the model, and gets it back after the weights are loaded; one
that defines ``save_assets(dir_path)`` / ``load_assets(dir_path)`` keeps the
files it writes in that folder (a vocabulary).  Only classes that define them
are asked, as Keras asks every layer and the default hooks do what pyggml's
own weights do already.

In the file: ``pyggml.own_state``, JSON {layer index in the model's layer tree:
{"class", "variables": {key: {"tensor", "dtype", "shape"} or {"json": value}},
"assets": {relative path: base64}}}; each numeric array is a tensor holding its
exact bytes (as int32 words), so any real dtype comes back as it was.
"""

import base64
import json
import os
import shutil
import tempfile

import numpy as np

from pyggml.errors import GGUFError

__all__ = ["KEY", "collect", "restore", "build_config_entry", "build_from_entry"]

KEY = "pyggml.own_state"
_HOOKS = ("save_own_variables", "load_own_variables", "save_assets", "load_assets")
_MAX_ASSETS = 1 << 30            # bytes of assets in one file, in all


def defined_by_user(obj, name):
    """Whether a class of the user's (not pyggml's) defines ``name`` for ``obj``."""
    return any(name in c.__dict__ for c in type(obj).__mro__ if not c.__module__.startswith("pyggml."))


def _defines(layer, name):
    """Whether a class of the user's defines the hook (Layer's own hooks are what its weights do
    already: a subclass's override may call them)."""
    return defined_by_user(layer, name)


def _tree(model):
    from pyggml.layers.weight_rules import layer_tree
    return layer_tree([model])


def collect(model, tensor_name):
    """(the JSON manifest or None, {tensor name: int32 array}) of the model's layers that
    define saving hooks; ``tensor_name(name)`` gives the name a tensor gets in the file."""
    manifest, tensors, total = {}, {}, 0
    for i, layer in enumerate(_tree(model)):
        if not any(_defines(layer, h) for h in _HOOKS):
            continue
        entry = {"class": type(layer).__name__}
        if _defines(layer, "save_own_variables"):
            store = {}
            layer.save_own_variables(store)
            entry["variables"] = {}
            for k, v in store.items():
                a = np.asarray(v.numpy() if hasattr(v, "numpy") and not isinstance(v, np.ndarray) else v)
                if a.dtype.kind in "biufc":
                    raw = np.ascontiguousarray(a).tobytes()
                    words = np.frombuffer(raw + b"\0" * (-len(raw) % 4), dtype=np.int32)
                    name = tensor_name(f"own.{i}.{k}")
                    tensors[name] = words if words.size else np.zeros(1, np.int32)
                    entry["variables"][str(k)] = {"tensor": name, "dtype": a.dtype.str, "shape": list(a.shape)}
                else:
                    entry["variables"][str(k)] = {"json": a.tolist()}    # strings: as JSON
        if _defines(layer, "save_assets"):
            folder = tempfile.mkdtemp(prefix="pyggml-assets-")
            try:
                layer.save_assets(folder)
                entry["assets"] = {}
                for root, _, files in os.walk(folder):
                    for fn in files:
                        full = os.path.join(root, fn)
                        data = open(full, "rb").read()
                        total += len(data)
                        if total > _MAX_ASSETS:
                            raise ValueError(f"{type(layer).__name__}.save_assets wrote more than 1 GiB")
                        entry["assets"][os.path.relpath(full, folder).replace(os.sep, "/")] = \
                            base64.b64encode(data).decode("ascii")
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        manifest[str(i)] = entry
    return (json.dumps(manifest) if manifest else None), tensors


def _array(spec, read, where):
    try:
        dtype = np.dtype(spec["dtype"])
        shape = tuple(int(d) for d in spec["shape"])
    except (KeyError, TypeError, ValueError) as e:
        raise GGUFError(f"{where}: a saved variable has no valid dtype and shape ({e})") from None
    if dtype.kind not in "biufc" or any(d < 0 for d in shape):
        raise GGUFError(f"{where}: a saved variable has dtype {dtype} and shape {shape}")
    raw = np.ascontiguousarray(read(spec.get("tensor"))).astype(np.int32, copy=False).tobytes()
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if n > len(raw):
        raise GGUFError(f"{where}: a saved variable of shape {shape} holds {len(raw)} bytes, needs {n}")
    return np.frombuffer(raw[:n], dtype=dtype).reshape(shape).copy()


def _safe_path(folder, rel, where):
    parts = [p for p in str(rel).split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or os.path.isabs(str(rel)) or "\0" in str(rel):
        raise GGUFError(f"{where}: an asset path {rel!r} leaves its folder")
    return os.path.join(folder, *parts)


def restore(model, manifest, read, path):
    """Give the layers that define loading hooks what they saved: ``manifest`` (the JSON
    text, or None), ``read(tensor name)`` -> the tensor's array."""
    if manifest is None:
        return
    try:
        entries = json.loads(manifest)
    except ValueError:
        raise GGUFError(f"{path!r}: {KEY} is not JSON") from None
    if not isinstance(entries, dict):
        raise GGUFError(f"{path!r}: {KEY} is not a JSON object")
    tree = _tree(model)
    for i, entry in entries.items():
        where = f"{path!r}, layer {i}"
        if not isinstance(entry, dict) or not str(i).isdigit() or int(i) >= len(tree) or \
                type(tree[int(i)]).__name__ != entry.get("class"):
            raise GGUFError(f"{where}: the saved state is not this model's layer's")
        layer = tree[int(i)]
        variables, assets = entry.get("variables"), entry.get("assets")
        if variables is not None and _defines(layer, "load_own_variables"):
            if not isinstance(variables, dict):
                raise GGUFError(f"{where}: the saved variables are not a JSON object")
            store = {k: (np.asarray(s["json"]) if isinstance(s, dict) and "json" in s else
                         _array(s if isinstance(s, dict) else {}, read, where)) for k, s in variables.items()}
            layer.load_own_variables(store)
        if assets is not None and _defines(layer, "load_assets"):
            if not isinstance(assets, dict):
                raise GGUFError(f"{where}: the saved assets are not a JSON object")
            folder = tempfile.mkdtemp(prefix="pyggml-assets-")
            try:
                for rel, data in assets.items():
                    target = _safe_path(folder, rel, where)
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    try:
                        content = base64.b64decode(str(data), validate=True)
                    except ValueError:
                        raise GGUFError(f"{where}: the asset {rel!r} is not base64") from None
                    with open(target, "wb") as f:
                        f.write(content)
                layer.load_assets(folder)
            finally:
                shutil.rmtree(folder, ignore_errors=True)


def build_config_entry(layer):
    """{"build_config": ...} for a model config's layer entry, where the layer's class defines
    ``get_build_config`` (a build taking more than the input shape), else {}."""
    if not _defines(layer, "get_build_config"):
        return {}
    bc = layer.get_build_config()
    if not bc:
        return {}
    from pyggml.saving.serialization_lib import serialize_keras_object
    return {"build_config": serialize_keras_object(bc)}


def build_from_entry(layer, entry):
    """Build a layer made from a model config's entry as its ``build_from_config`` says (Keras's
    load: before the model calls it, so a build with arguments of its own is not called plainly)."""
    bc = entry.get("build_config") if isinstance(entry, dict) else None
    if bc and _defines(layer, "build_from_config") and not layer.built:
        from pyggml.saving.serialization_lib import _inner
        layer.build_from_config(_inner(bc, None, None))
