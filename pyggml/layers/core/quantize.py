"""Keras's weight quantization, ``model.quantize("int8")`` (or ``"int4"``), of Dense, EinsumDense,
Embedding and the attention layers' projections: each layer's weight becomes integers in
[-127, 127] ([-7, 7] for int4; a config's quantizer may use Keras's [-128, 127], [-8, 7]) with a
float scale per output (Keras's ``kernel_scale``; Embedding's ``embeddings_scale``, one per
token), ``q = round(w * scale)``, ``scale = qmax / max|w|`` over the weight's input axes, and
the layer computes with ``q / scale``.  The integer weight is frozen (a LoRA enabled on the
layer trains on top of it: QLoRA); the bias trains.

A saved model keeps the integers as GGUF int8 tensors (a quarter of the float32 size) and the
layer's dtype policy as Keras's ``"int8_from_float32"``, which a loaded layer is built with.
The weight stays float32 in the device's memory (its integer values are exact there)."""

import numpy as np

from pyggml import ops
from pyggml.dtype_policies import QUANTIZATION_MODES, policy_mode

__all__ = ["QuantizedWeights", "QuantizedProjections", "quantize_model"]

MODES = QUANTIZATION_MODES


def check_mode(mode, who):
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"{who}: the quantization mode must be one of {sorted(MODES)}, got {mode!r}")
    return mode


def integers_and_scale(k, reduce, mode, quantizer, who):
    """``(q, scale)`` of the weight ``k`` (float64, its scale's axes kept as 1): the config's
    weight quantizer's, checked, or the abs-max over ``reduce`` into the mode's range."""
    if quantizer is not None:
        from pyggml.quantizers import quantize_weight
        return quantize_weight(quantizer, k, tuple(reduce), mode, who)
    qmax = MODES[mode]
    top = np.max(np.abs(k), axis=tuple(reduce), keepdims=True)
    s = qmax / np.where(top > 0, top, 1.0)
    return np.clip(np.round(k * s), -qmax, qmax), s


class QuantizedWeights:
    """The mixin: ``_quant_base`` names the weight quantized, ``_quant_scale`` its scale's name."""

    _quant_base = "weight"
    _quant_scale = "kernel_scale"
    quantization_mode = None
    quantization_config = None
    _takes_quantization_config = True      # (Keras's Dense, EinsumDense and Embedding argument)

    def __init__(self, *args, **kwargs):
        # Keras's dtype policy of a quantized layer ("int8_from_float32", a loaded config's):
        # remembered for build, not handed on to Layer (which computes in float32)
        mode = policy_mode(kwargs.get("dtype"))
        if mode is not None:
            self.__dict__["_quantize_on_build"] = mode
            kwargs["dtype"] = None
        config = kwargs.pop("quantization_config", None) if self._takes_quantization_config else None
        super().__init__(*args, **kwargs)
        if config is not None:
            from pyggml import quantizers
            config = quantizers.deserialize(config) if isinstance(config, dict) else config
            if not isinstance(config, quantizers.QuantizationConfig):
                raise TypeError(f"quantization_config must be a QuantizationConfig (Int8QuantizationConfig, "
                                f"Int4QuantizationConfig) or its config, got {type(config).__name__}")
            self.quantization_config = config

    def _quant_reduce_axes(self):
        """The axes of the weight in Keras's layout that one scale covers (its inputs)."""
        raise NotImplementedError

    def _keras_shape_of_base(self):
        v = getattr(self, self._quant_base)
        axes = tuple(v.keras_axes) if v.keras_axes is not None else tuple(range(len(v.shape)))
        return tuple(int(v.shape[i]) for i in axes), axes

    def quantize(self, mode=None, type_check=True, config=None):
        """Quantize the layer's weight (Keras's ``layer.quantize(mode)``, or ``config=`` an
        Int8QuantizationConfig/Int4QuantizationConfig whose weight quantizer is used): once,
        after it is built."""
        from pyggml import quantizers
        who = type(self).__name__ + (f" {self.name!r}" if self.name else "")
        mode, config = quantizers.resolve(mode, config)
        check_mode(mode, who)
        if not self.built:
            from pyggml.layers._keras_weights import build_through_owner
            build_through_owner(self)
        if not self.built:
            raise ValueError(f"{who}: cannot quantize a layer that is not built yet (call it on an input, or "
                             f"build(input_shape), first)")
        if self.quantization_mode is not None:
            raise ValueError(f"{who}: the layer is quantized already ({self.quantization_mode})")
        self._make_quantized(mode, from_values=True, quantizer=getattr(config, "weight_quantizer", None))
        self.quantization_config = config
        from pyggml.layers.layer import layer_changed
        layer_changed(self, weights_added=True)

    def _make_quantized(self, mode, from_values, quantizer=None):
        v = getattr(self, self._quant_base)
        if v.keras_shape is not None:
            raise ValueError(f"{type(self).__name__}: its weight's layout cannot be quantized")
        kshape, axes = self._keras_shape_of_base()
        reduce = self._quant_reduce_axes()
        scale_shape = tuple(d for i, d in enumerate(kshape) if i not in reduce) or (1,)
        scale = self.add_weight(name=self._quant_scale, shape=scale_shape, initializer="ones", trainable=False,
                                layout="in_out")
        if from_values:
            from pyggml.layers._keras_weights import from_keras_value, keras_value
            k = np.asarray(keras_value(v, v.numpy()), np.float64)          # (Keras's layout)
            q, s = integers_and_scale(k, reduce, mode, quantizer, f"{type(self).__name__}.quantize")
            v.assign(from_keras_value(v, q.astype(np.float32), "quantize"))
            scale.assign(s.reshape(scale_shape).astype(np.float32))
        v.trainable = False
        v.quantized = mode
        object.__setattr__(self, self._quant_scale, scale)
        self.quantization_mode = mode
        self.__dict__.pop("_quantize_on_build", None)
        # the scale's shape in the weight's own layout: 1 along the axes it covers
        keras_b = [1 if i in reduce else d for i, d in enumerate(kshape)]
        self.__dict__["_scale_broadcast"] = tuple(keras_b[j] for j in np.argsort(axes))

    def _keras_scale(self):
        """The scale as it divides the integers in Keras's layout (1 along the axes it covers)."""
        kshape, _ = self._keras_shape_of_base()
        reduce = self._quant_reduce_axes()
        return getattr(self, self._quant_scale).numpy().reshape([1 if i in reduce else d for i, d in enumerate(kshape)])

    def requantized_merged_kernel(self):
        """Keras's save of a QLoRA layer: the merged weight (``q / scale + (alpha / rank) A B``)
        quantized again by abs-max, ``(integers in Keras's layout, the new scale)``."""
        q, s = integers_and_scale(np.asarray(self.merged_kernel(), np.float64), self._quant_reduce_axes(),
                                  self.quantization_mode, None, f"{type(self).__name__}.save")
        return q.astype(np.float32), s.astype(np.float32)

    def _build_quantized(self):
        mode = self.__dict__.get("_quantize_on_build")
        if mode is not None and self.quantization_mode is None:
            self._make_quantized(mode, from_values=False)

    def _weight_tensor(self):
        """The weight as the graph computes with it: itself, or ``q / scale`` once quantized."""
        v = getattr(self, self._quant_base)
        if self.quantization_mode is None:
            return v
        scale = getattr(self, self._quant_scale)
        return ops.divide(v, ops.reshape(scale, self.__dict__["_scale_broadcast"]))

    def _quant_config(self, c):
        if self.quantization_mode is not None:
            c["dtype"] = f"{self.quantization_mode}_from_float32"
        if self._takes_quantization_config:
            from pyggml import quantizers
            c["quantization_config"] = quantizers.serialize(self.quantization_config)
        return c


class QuantizedProjections(QuantizedWeights):
    """MultiHeadAttention's: each projection's weight (rows = its outputs, cols = its inputs)
    quantized as Keras quantizes the EinsumDense layers it keeps them in, with one scale per
    output (``<projection>.kernel_scale``; Keras's shape, (heads, dim) for the query, key and
    value projections)."""

    _takes_quantization_config = False

    _quant_attrs = ()          # (weight attribute, weight name's prefix) of each projection

    def _make_quantized(self, mode, from_values, quantizer=None):
        scales = {}
        for attr, prefix in self._quant_attrs:
            w = getattr(self, attr, None)
            if w is None:
                continue
            rows = int(w.shape[0])
            scale = self.add_weight(name=f"{prefix}.kernel_scale", shape=(rows,), initializer="ones",
                                    trainable=False, layout="in_out")
            if prefix != "out_proj" and w.keras_shape is not None:
                scale.keras_shape = tuple(w.keras_shape[:2])          # (heads, dim), as the bias
            if from_values:
                # (the weight as (outputs, inputs): one scale per row)
                q, s = integers_and_scale(np.asarray(w.numpy(), np.float64), (1,), mode, quantizer,
                                          f"{type(self).__name__}.quantize")
                w.assign(q.astype(np.float32))
                scale.assign(s.reshape(rows).astype(np.float32))
            w.trainable = False
            w.quantized = mode
            scales[id(w)] = scale
        self.__dict__["_projection_scales"] = scales
        self.quantization_mode = mode
        self.__dict__.pop("_quantize_on_build", None)

    def _quantized_view(self, w):
        """A projection's weight as the graph computes with it: itself, or ``q / scale``."""
        scale = self.__dict__.get("_projection_scales", {}).get(id(w)) if self.quantization_mode else None
        if scale is None:
            return w
        return ops.divide(w, ops.reshape(scale, (int(w.shape[0]), 1)))


def _layers_of(model):
    seen, out = set(), []

    def walk(layer):
        for sub in getattr(layer, "layers", None) or list(getattr(layer, "_sublayers", {}).values()):
            if id(sub) in seen or sub is layer:
                continue
            seen.add(id(sub))
            out.append(sub)
            walk(sub)
    walk(model)
    return out


def quantize_model(model, mode, filters=None, config=None):
    """Keras's ``model.quantize(mode, filters=None)``: every Dense, EinsumDense, Embedding and
    MultiHeadAttention (its projections, as Keras's EinsumDense sublayers) (or
    those ``filters`` keeps: a regex or a list of them matched against the layer's name, or a
    callable of the layer) quantized; a model with none of them is refused."""
    import re
    from pyggml import quantizers
    mode, config = quantizers.resolve(mode, config)
    check_mode(mode, "quantize")
    model.check_alive()
    if filters is None:
        keep = lambda layer: True                      # noqa: E731
    elif callable(filters):
        keep = filters
    elif isinstance(filters, (str, list, tuple)) and all(isinstance(f, str) for f in
                                                        ([filters] if isinstance(filters, str) else filters)):
        try:
            pats = [re.compile(f) for f in ([filters] if isinstance(filters, str) else filters)]
        except re.error as e:
            raise ValueError(f"quantize: filters holds a pattern that is not a regex: {e}") from None
        keep = lambda layer: any(p.search(layer.name) for p in pats)     # noqa: E731
    else:
        raise TypeError(f"quantize: filters must be None, a regex string, a list of them or a callable, got "
                        f"{filters!r}")
    import contextlib
    done = 0
    # under the model's lock: a fit, evaluate or train_on_batch of another thread runs before or after
    with getattr(model, "_lock", None) or contextlib.nullcontext():
        model._ensure_graph()
        for layer in _layers_of(model):
            if isinstance(layer, QuantizedWeights) and layer.quantization_mode is None and keep(layer):
                layer.quantize(mode, config=config)
                done += 1
    if not done:
        raise ValueError(f"quantize: the model has no layer to quantize in mode {mode!r} (Dense, EinsumDense, "
                         f"Embedding and MultiHeadAttention are quantized{'' if filters is None else ', as filters keeps them'})")
    return model
