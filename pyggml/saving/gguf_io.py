"""Models as single GGUF files (the layout is in the README, "The GGUF layout").

- ``general.architecture`` = "pyggml", ``general.name``, ``general.type`` = "model"
- ``pyggml.format_version`` (u32, 2; version 1 files load too)
- ``pyggml.model_class``: the model's registered class name
- ``pyggml.config`` (JSON: the layer graph), ``pyggml.compile`` (JSON: optimizer,
  losses, metrics, loss weights)
- one f32 tensor per weight, named as ``get_weights()`` names it ("dense.weight"),
  numpy shape = GGUF ne reversed; a name longer than 63 bytes (GGUF's limit) is
  stored as ``w.<k>`` and ``pyggml.tensor_names`` (JSON) maps it back
- with optimizer state: ``pyggml.optimizer.iter`` and tensors
  ``optimizer.<slot>.<weight>`` (Adam's ``m`` and ``v``)

Everything a file asks for is checked against the file before anything is
allocated, and every failure is a GGUFError naming what is wrong.
"""

import json
import os

import numpy as np

from pyggml.core import GGUFFile
from pyggml.errors import GGMLError, GGUFError
from pyggml.saving import own_state
from pyggml.saving.object_registration import custom_object_scope, get_registered_name, get_registered_object

__all__ = ["save_model", "save_weights", "read_weights", "load_model", "restore", "FORMAT_VERSION"]

FORMAT_VERSION = 2
_READS = (1, 2)
_ARCH = "pyggml"
_MAX_NAME = 63


def _path(path):
    try:
        p = os.fspath(path)
    except TypeError:
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}") from None
    return os.fsdecode(p) if isinstance(p, bytes) else p


class _Names:
    """Tensor names in the file: the weight's own when it fits, else ``w.<k>``, a ``k`` that no
    name of ``taken`` (the names that fit, a weight ``"0"`` of a layer named ``"w"``) has."""

    def __init__(self, taken=()):
        self.long = {}
        self.taken = set(taken)
        self.k = 0

    def __call__(self, name):
        if len(name.encode()) <= _MAX_NAME:
            return name
        while f"w.{self.k}" in self.taken:
            self.k += 1
        short = f"w.{self.k}"
        self.k += 1
        self.long[short] = name
        return short


# {metadata key: restore(model, config)}: objects saved as a model of theirs with their config under
# that key (pg.utils.FeatureSpace.save registers its own); load_model gives the object back
RESTORERS = {}


def awaits_first_data(model):
    """Whether ``model`` is a Sequential waiting for its first data to learn its input shape, with
    no weights yet (Keras saves and pickles such a model as its config alone)."""
    from pyggml.layers.weight_rules import layer_tree
    awaits = getattr(model, "_awaits_data", None)
    return awaits is not None and awaits() and not any(l.__dict__.get("_variables") for l in layer_tree([model]))


_PENDING = "pyggml.pending_compile"      # the compile() an unbuilt Sequential was given, to give it again


def _pending_compile_json(kwargs):
    from pyggml.saving.serialization_lib import serialize_keras_object
    keep = {k: kwargs.get(k) for k in ("optimizer", "loss", "metrics", "loss_weights", "weighted_metrics", "seed")}
    try:
        return json.dumps(serialize_keras_object(keep))
    except (TypeError, ValueError) as e:
        raise ValueError(f"save: the compile() arguments of this model, waiting for its first data, cannot be "
                         f"saved ({e}); build it (model.build(input_shape)) or compile it with named objects") from None


def _write(model, path, with_config, with_state):
    model.check_alive()
    path = _path(path)
    unbuilt = with_config and awaits_first_data(model)      # its config alone, as Keras saves it
    weights = {} if unbuilt else _lora_merged(model, model.get_weights())
    names = _Names(weights)
    f = GGUFFile()
    try:
        f.set("general.architecture", _ARCH)
        f.set("general.name", model.name)
        f.set("general.type", "model")
        f.set("pyggml.format_version", FORMAT_VERSION, kind="u32")
        if with_config:
            f.set("pyggml.model_class", get_registered_name(type(model)))
            f.set("pyggml.config", json.dumps(_config_with_build(model)))
            if model.compiled:                    # an uncompiled model saves without (Keras's too)
                f.set("pyggml.compile", json.dumps(_compile_config(model)))
            elif unbuilt and model.__dict__.get("_pending_compile"):
                f.set(_PENDING, _pending_compile_json(model.__dict__["_pending_compile"]))
        stored = None
        quantized = {n for n, var in model.named_variables() if getattr(var, "quantized", None)}
        for k, v in weights.items():
            # a quantized weight's integers as GGUF int8 (pyggml.layers.core.quantize)
            # (a QLoRA layer's base integers, ``<weight>.lora_base``, too)
            q = k in quantized or (k.endswith(_LORA_BASE) and k[:-len(_LORA_BASE)] in quantized)
            a = np.ascontiguousarray(v, dtype=np.int8 if q else np.float32)
            if a.ndim > 4:            # a weight of more than four dimensions: as it is stored (see Variable)
                stored = stored or dict((n, var.store_shape) for n, var in model.named_variables())
                a = a.reshape(stored[k])
            f.add_tensor(names(k), a)
        manifest, own = own_state.collect(model, names)        # layers' save_own_variables / save_assets
        if manifest is not None:
            f.set(own_state.KEY, manifest)
            for k, a in own.items():
                f.add_tensor(k, a)
        state = model.get_optimizer_state() if with_state and not unbuilt else None
        if state is not None and state["slots"]:
            f.set("pyggml.optimizer.iter", int(state["iterations"]))
            for slot, per_weight in state["slots"].items():
                for nm, a in per_weight.items():
                    f.add_tensor(names(f"optimizer.{slot}.{nm}"), np.ascontiguousarray(a, dtype=np.float32))
        if names.long:
            f.set("pyggml.tensor_names", json.dumps(names.long))
        for key, value in (model.__dict__.get("_saved_with") or {}).items():
            f.set(key, value)                     # what the model was saved for (a FeatureSpace's config)
        f.write(path)
    finally:
        f.free()


def keras_save_args(what, path, kwargs, overwrite=True, takes=()):
    """Keras's ``save``/``save_weights``/``load_weights`` arguments: the path (``filepath=`` as
    Keras names it), ``overwrite`` (False: an existing file is refused with FileExistsError where
    Keras asks on the terminal), and ``takes``, the others that have no effect on one GGUF file
    (``zipped``, ``max_shard_size``)."""
    if path is None:
        if "filepath" not in kwargs:
            raise TypeError(f"{what}() needs the path of the file")
        path = kwargs.pop("filepath")
    elif "filepath" in kwargs:
        raise TypeError(f"{what}() got the path twice (path and filepath)")
    unknown = sorted(set(kwargs) - set(takes))
    if unknown:
        raise TypeError(f"{what}() got unexpected keyword arguments {unknown}")
    if not isinstance(overwrite, (bool, np.bool_)):
        raise TypeError(f"{what}(): overwrite must be True or False, got {overwrite!r}")
    if not overwrite and os.path.exists(_path(path)):
        raise FileExistsError(f"{what}(): {_path(path)!r} exists and overwrite=False")
    return path


_LORA_BASE = ".lora_base"


def _lora_layers(model):
    """(layer, its base weight's name, its factors' names, its scale's name or None) of each
    LoRA-enabled layer (a quantized one's, QLoRA: its kernel_scale), named as in
    model.get_weights()."""
    from pyggml.layers.core.quantize import _layers_of
    names = {id(v): n for n, v in model.named_variables()}
    out = []
    for layer in [model] + _layers_of(model):
        if getattr(layer, "lora_enabled", False):
            base = getattr(layer, layer._lora_base)
            scale = getattr(layer, layer._quant_scale, None) if getattr(layer, "quantization_mode", None) else None
            if id(base) in names and (scale is None or id(scale) in names):
                out.append((layer, names[id(base)], [names.get(id(f)) for f in layer._lora_factors()],
                            None if scale is None else names[id(scale)]))
    return out


def _lora_merged(model, weights):
    """The weights as a file holds them: a LoRA-enabled layer's weight merged with its update
    (what a model without LoRA loads, as Keras's files hold it; a quantized layer's merged in
    float and quantized again, with its new scale, as Keras does), its base kept beside under
    ``<weight>.lora_base`` (and its scale's) and its factors as they are (so a model with LoRA
    resumes exactly)."""
    from pyggml.layers._keras_weights import from_keras_value
    for layer, base_name, _, scale_name in _lora_layers(model):
        base = getattr(layer, layer._lora_base)
        weights[base_name + _LORA_BASE] = weights[base_name]
        if scale_name is None:
            weights[base_name] = from_keras_value(base, layer.merged_kernel(), "save")
        else:
            q, s = layer.requantized_merged_kernel()
            weights[scale_name + _LORA_BASE] = weights[scale_name]
            weights[base_name] = from_keras_value(base, q, "save")
            weights[scale_name] = s.reshape(np.shape(weights[scale_name]))
    return weights


def _lora_read(model, fl, shapes):
    """{name: array} of a file for a model with LoRA layers: a LoRA layer's base (and a quantized
    one's scale) from ``<weight>.lora_base`` when the file has one (else the file's weight, with
    the update's second factor zero: Keras's plain file into a LoRA layer)."""
    lora = _lora_table(model)
    current = {}
    return {k: _lora_array(model, fl, k, shape, lora, current) for k, shape in shapes.items()}


def _lora_table(model):
    """{base weight's name: its factors' names} of the LoRA layers, and a quantized one's scale
    (no factors: read from its ``.lora_base`` as the base is)."""
    lora = {}
    for _, base_name, factors, scale_name in _lora_layers(model):
        lora[base_name] = factors
        if scale_name is not None:
            lora[scale_name] = []
    return lora


def _lora_array(model, fl, k, shape, lora, current):
    """One weight ``k`` of the file as a model whose LoRA layers are ``lora`` ({base weight:
    factor names}) takes it (see _lora_read); ``current``: the model's weights, read once
    when first needed (a dict shared by the calls of one load)."""
    owner = next((b for b, fs in lora.items() if k in fs), None)
    if k in lora and fl.by_name.get(k + _LORA_BASE) is not None:
        return fl.array(k + _LORA_BASE, shape)
    if owner is not None and fl.by_name.get(owner + _LORA_BASE) is None and fl.by_name.get(k) is None:
        # a file without LoRA: the factors start again, the second at zero (no update)
        if k == lora[owner][-1]:
            return np.zeros(shape, np.float32)
        if not current:
            current.update(model.get_weights())
        return current[k].reshape(shape).astype(np.float32)
    return fl.array(k, shape)


def load_weights_into(model, path, skip_mismatch=False):
    """``model.load_weights``: every weight from the file; with ``skip_mismatch`` (Keras's), a
    weight the file lacks or holds in another shape keeps its value, with a warning naming it."""
    shapes = dict((n, v.store_shape) for n, v in model.named_variables())
    _check_quantized_alike(model, path)
    if not skip_mismatch:
        if _lora_layers(model):
            fl = _File(path)
            try:
                model.set_weights(_lora_read(model, fl, shapes))
            finally:
                fl.close()
        else:
            model.set_weights(read_weights(path, shapes))
        fl = _File(path)
        try:
            own_state.restore(model, fl.f.get(own_state.KEY), fl.raw, fl.path)
        finally:
            fl.close()
        return
    fl = _File(path)
    lora = _lora_table(model)
    current = {}
    try:
        got, skipped = {}, []
        for name, shape in shapes.items():
            try:
                # a LoRA layer's base from ``<weight>.lora_base`` (the file's weight is merged)
                got[name] = _lora_array(model, fl, name, shape, lora, current) if lora \
                    else fl.array(name, shape)
            except GGUFError as e:
                if "has shape" not in str(e) and "has no weight" not in str(e):
                    raise
                skipped.append(name)
    finally:
        fl.close()
    if skipped:
        import warnings
        warnings.warn(f"load_weights(skip_mismatch=True): kept {len(skipped)} weight(s) the file lacks or holds in "
                      f"another shape: {skipped}", stacklevel=3)
    current = model.get_weights()
    current.update(got)
    model.set_weights(current)


def _compile_config(model):
    """The compile settings as JSON takes them: a class's own get_compile_config may hold
    objects (a registered loss function, an optimizer), serialized as Keras serializes them."""
    cfg = model.get_compile_config()
    if own_state.defined_by_user(model, "get_compile_config"):
        from pyggml.saving.serialization_lib import serialize_keras_object
        cfg = serialize_keras_object(cfg)
    return cfg


def save_model(model, path):
    """Write the architecture, compile settings, weights and optimizer state."""
    _write(model, path, with_config=True, with_state=True)


def save_weights(model, path):
    """Write the weights only."""
    _write(model, path, with_config=False, with_state=False)


def _json(f, key, path, required=True):
    raw = f.get(key)
    if raw is None:
        if required:
            raise GGUFError(f"{path!r}: the file has no {key}")
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError, RecursionError) as e:
        raise GGUFError(f"{path!r}: {key} is not valid JSON ({type(e).__name__})") from None


_OTHER_FORMATS = ((b"PK\x03\x04", "a zip archive (Keras's .keras format)"),
                  (b"\x89HDF\r\n\x1a\n", "an HDF5 file (Keras's .h5 format)"))


def _refuse_other_formats(path):
    """A clear GGUFError for the files a Keras user may hand over (GGUF's reader says 'invalid magic')."""
    if os.path.isdir(path):
        # (a ValueError, as Keras's "File format not supported" for a SavedModel's folder)
        raise GGUFError(f"{path!r} is a directory (a TensorFlow SavedModel?), not a model file: pyggml saves a model "
                        f"as one GGUF file; give that file's path")
    if os.path.exists(path) and not os.path.isfile(path):
        # a FIFO or a device: reading it could wait for ever
        raise GGUFError(f"{path!r} is not a regular file (a pipe or a device?): pyggml reads a model from a GGUF file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return                          # GGUFFile.read reports it
    for magic, what in _OTHER_FORMATS:
        if head.startswith(magic):
            raise GGUFError(f"{path!r} is {what}, not GGUF: pyggml saves and loads GGUF files only. Build the "
                            f"model with pyggml and, to reuse Keras weights, set them with set_weights "
                            f"(Keras's kernels transposed to pyggml's (out, in) layout)")


class _File:
    """An open pyggml GGUF file, checked, with its tensor names resolved."""

    def __init__(self, path):
        self.path = _path(path)
        _refuse_other_formats(self.path)
        self.f = GGUFFile.read(self.path)
        try:
            if self.f.get("general.architecture") != _ARCH:
                raise GGUFError(f"{self.path!r} is not a pyggml model (general.architecture is not 'pyggml')")
            v = self.f.get("pyggml.format_version")
            if not isinstance(v, int) or v not in _READS:
                raise GGUFError(f"{self.path!r} has pyggml format version {v!r}; this pyggml reads versions "
                                f"{list(_READS)}")
            self.version = v
            long = _json(self.f, "pyggml.tensor_names", self.path, required=False) or {}
            if not isinstance(long, dict):
                raise GGUFError(f"{self.path!r}: pyggml.tensor_names is not a JSON object")
            self.by_name = {long.get(t, t): t for t in self.f.tensor_names()}
        except BaseException:
            self.f.free()
            raise

    def array(self, name, shape):
        """The tensor ``name`` as float32 of ``shape``, checked (presence, shape, finite)."""
        t = self.by_name.get(name)
        if t is None:
            raise GGUFError(f"the file has no weight {name!r}")
        fshape, dtype, offset, nbytes = self.f.tensor_info(t)
        if not _same_shape(fshape, shape):
            raise GGUFError(f"weight {name!r} has shape {tuple(fshape)} in the file, the model needs {tuple(shape)}")
        a = self.f.read_tensor(t).astype(np.float32).reshape(shape)
        if not np.all(np.isfinite(a)):
            raise GGUFError(f"weight {name!r} holds NaN or inf")
        return a

    def raw(self, name):
        """The tensor ``name`` as stored (a layer's own saved state)."""
        t = self.by_name.get(name) if isinstance(name, str) else None
        if t is None:
            raise GGUFError(f"{self.path!r}: the file has no tensor {name!r}")
        return self.f.read_tensor(t)

    def close(self):
        self.f.free()


def _same_shape(file_shape, shape):
    """GGUF keeps no trailing ne of 1, so a file shape lacks the leading 1s of the
    numpy shape ((1, 8) reads as (8,)); any other difference is a different weight."""
    def strip(s):
        s = tuple(int(d) for d in s)
        while len(s) > 1 and s[0] == 1:
            s = s[1:]
        return s
    return strip(file_shape) == strip(shape)


def _check_quantized_alike(model, path):
    """The file's weights quantized (GGUF int8, beside their kernel_scale) where the model's are,
    and only there: integers read into a float weight (or floats into a quantized one) would
    compute silently wrong."""
    fl = _File(path)
    try:
        for n, v in model.named_variables():
            t = fl.by_name.get(n)
            if t is None:
                continue
            in_file, in_model = fl.f.tensor_info(t)[1] == "i8", bool(getattr(v, "quantized", None))
            if in_file and not in_model:
                raise GGUFError(f"{fl.path!r}: weight {n!r} is quantized in the file (integers, with a kernel_scale) "
                                f"and not in the model: quantize the model the same way first (model.quantize), or "
                                f"load the file with load_model")
            if in_model and not in_file:
                raise GGUFError(f"{fl.path!r}: weight {n!r} is quantized in the model and not in the file: load the "
                                f"file into a model not quantized, then quantize it")
    finally:
        fl.close()


def read_weights(path, shapes):
    """{name: array} for every name of ``shapes`` ({name: shape}), checked against the file."""
    fl = _File(path)
    try:
        return {k: fl.array(k, s) for k, s in shapes.items()}
    finally:
        fl.close()


def restore(model, path):
    """Load a file's weights and optimizer state into a compiled model of the same
    architecture (resuming training; BackupAndRestore uses it)."""
    fl = _File(path)
    try:
        named = model.named_variables()
        arrays = _lora_read(model, fl, {n: v.store_shape for n, v in named})
        model.set_weights({n: arrays[n].reshape(v.shape) for n, v in named})
        _restore_state(fl, model, named)
    finally:
        fl.close()


def _restore_state(fl, model, named):
    """The file's optimizer state (step counter and slots) into the model's fit state."""
    it = fl.f.get("pyggml.optimizer.iter")
    if not isinstance(it, int) or it < 1:
        return
    slots = {}
    for s in model.optimizer.state_slot_names:
        for n, v in named:
            if f"optimizer.{s}.{n}" in fl.by_name:
                slots.setdefault(s, {})[n] = fl.array(f"optimizer.{s}.{n}", v.store_shape)
    try:
        model.set_optimizer_state({"iterations": it, "slots": slots})
    except GGMLError as e:
        raise GGUFError(f"{fl.path!r}: the optimizer state does not fit the model ({e})") from None


def _upgrade_v1(cfg, comp):
    """Version-1 configs: inbound layer names (no call records) and flat compile settings."""
    if not cfg.get("sequential"):
        for entry in cfg.get("layers", []):
            inbound = entry.pop("inbound", None)
            if inbound is not None and "calls" not in entry:
                entry["calls"] = [] if entry["class_name"] == "InputLayer" else \
                    [{"inputs": [[n, 0, 0] for n in inbound], "list": len(inbound) > 1, "kwargs": {}}]
        cfg["outputs"] = [[n, 0, 0] if isinstance(n, str) else n for n in cfg.get("outputs", [])]
    opt = comp.get("optimizer", {})
    n_out = len(comp.get("loss", [])) or 1
    metrics = comp.get("metrics") or []
    comp["metrics"] = [list(metrics) for _ in range(n_out)]
    comp["optimizer"] = {"class": opt.get("class"), "config": opt.get("config", {})}
    return cfg, comp


def load_model(path, backend="auto", custom_objects=None, compile=True, safe_mode=True):
    """The model of a file written by ``model.save``, compiled as it was saved (a model saved
    uncompiled loads uncompiled, as does ``compile=False``); classes (and functions:
    regularizers, constraints, ...) of your own come from ``@register_serializable``
    or ``custom_objects``.  ``safe_mode`` is Keras's, taken for its code: pyggml never loads
    code from a file (a Lambda's function is found by its name, as a custom object), so
    there is nothing for it to allow."""
    if not isinstance(safe_mode, (bool, type(None))):
        raise TypeError(f"safe_mode must be True, False or None, got {safe_mode!r}")
    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise TypeError(f"custom_objects must be a dict {{name: object}}, got {type(custom_objects).__name__}")
    with custom_object_scope(custom_objects):
        return _load_model(path, backend, custom_objects, compile)


def _config_with_build(model):
    """model.get_config(), with the shapes a subclassed model's graph was built for beside it
    (its own get_config, which need not call super's, may leave them out: Keras keeps them apart
    too, as its build config)."""
    cfg = _held_objects_serialized(model.get_config())
    if isinstance(cfg, dict) and "pyggml_build" not in cfg and model.__dict__.get("_subclassed"):
        from pyggml.models.subclassing import build_config
        build = build_config(model)
        if build is not None:
            cfg = dict(cfg, pyggml_build=build)
    return cfg


def _held_objects_serialized(value, depth=0):
    """A config whose values may be layers or models (a subclass's own get_config returning
    ``self.classifier``, keras-io's ShiftViT): those in Keras's serialized form, as Keras 3
    saves them; everything else as it is."""
    from pyggml.layers.layer import Layer
    if isinstance(value, Layer):
        from pyggml.saving.serialization_lib import serialize_keras_object
        return serialize_keras_object(value)
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {k: _held_objects_serialized(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_held_objects_serialized(v, depth + 1) for v in value)
    return value


def _takes_custom_objects(cls):
    import inspect
    try:
        return "custom_objects" in inspect.signature(cls.from_config).parameters
    except (TypeError, ValueError):
        return True


def _load_model(path, backend, custom_objects, compile):
    fl = _File(path)
    p = fl.path
    try:
        cfg = _json(fl.f, "pyggml.config", p)
        comp = _json(fl.f, "pyggml.compile", p, required=False)   # absent: saved uncompiled
        if not isinstance(cfg, dict) or not isinstance(comp, (dict, type(None))):
            raise GGUFError(f"{p!r}: the model config is not a JSON object")
        if fl.version == 1:
            if comp is None:
                raise GGUFError(f"{p!r}: the file has no pyggml.compile")
            cfg, comp = _upgrade_v1(cfg, comp)
        try:
            cls_name = fl.f.get("pyggml.model_class") or ("Sequential" if cfg.get("sequential") else "Model")
            cls = get_registered_object(cls_name, custom_objects)
            build = cfg.pop("pyggml_build", None)          # a subclassed model: the shapes it was built for
            model = cls.from_config(cfg, custom_objects) if _takes_custom_objects(cls) else cls.from_config(cfg)
            if build is not None:
                from pyggml.models.subclassing import build_saved
                build_saved(model, build)
            named = model.named_variables()
        except GGUFError:
            raise
        except RecursionError:
            raise GGUFError(f"{p!r}: the model config is nested too deeply") from None
        except Exception as e:
            raise GGUFError(f"{p!r}: the model config cannot be rebuilt ({type(e).__name__}: {e})") from None
        # every weight must be in the file with the right shape before anything is
        # allocated, so a hostile config cannot ask for more memory than the file holds
        arrays = _lora_read(model, fl, {n: v.store_shape for n, v in named})
        values = {n: arrays[n].reshape(v.shape) for n, v in named}
        for n, v in named:
            v.assign(values[n])
        own_state.restore(model, fl.f.get(own_state.KEY), fl.raw, p)   # layers' load_own_variables / load_assets
        for key, restore in RESTORERS.items():
            saved_for = _json(fl.f, key, p, required=False)
            if isinstance(saved_for, dict):        # a model saved for an object (a FeatureSpace): it, back
                return restore(model, saved_for)
        pending = _json(fl.f, _PENDING, p, required=False) if comp is None else None
        if compile and isinstance(pending, dict):
            from pyggml.saving.serialization_lib import deserialize_keras_object
            try:
                kw = deserialize_keras_object(pending, custom_objects=custom_objects)
                model.compile(**dict(kw, backend=backend))       # (the device load_model was asked for)
            except (KeyError, TypeError, ValueError) as e:
                raise GGUFError(f"{p!r}: the compile settings are not valid ({type(e).__name__}: {e})") from None
        if not compile or comp is None:
            return model
        try:
            if own_state.defined_by_user(model, "compile_from_config"):
                model.compile_from_config(comp)          # a class's own, with Keras's signature
            else:
                model.compile_from_config(comp, backend=backend, custom_objects=custom_objects)
        except (KeyError, TypeError, ValueError) as e:
            raise GGUFError(f"{p!r}: the compile settings are not valid ({type(e).__name__}: {e})") from None
        _restore_state(fl, model, named)
        return model
    finally:
        fl.close()
