"""Model: a functional graph of layers (``pg.Model(inputs, outputs)``) and what
every model does.  It holds the topology, compile's settings, the weights on
its device and the graphs it runs; the loops (``training_loop``), the data
checks (``data_adapter``), the graphs (``executors``) and the summary live
beside it.  A model is a layer too: call it on nodes to nest it in another.
"""

import os
import threading
import weakref

import numpy as np

from pyggml import _random, autodiff, optimizers as optimizers_mod
from pyggml._lifetime import Freeable
from pyggml.core import Backend, Tensor
from pyggml.errors import FreedError
from pyggml.layers._keras_weights import LayerWeights, keras_list_by_name, layered_keras_list
from pyggml.layers.core.quantize import quantize_model
from pyggml.layers import layer as layer_mod
from pyggml.layers.layer import Layer, flatten_inputs, snake_case
from pyggml.layers.node import Node
from pyggml.models import data_adapter as da
from pyggml.models import array_calls, functional, host_stage, lookup, pickling, summary as summary_mod, training_loop
from pyggml.models.compile_spec import CompileSpec, is_crossentropy
from pyggml.models.rebuild import copy_model
from pyggml.models.runtime import Runtime, drop_graphs_holding
from pyggml.saving import gguf_io
from pyggml.saving.object_registration import register_builtin
from pyggml.variables import Variable, WeightName

__all__ = ["Model"]

_ALL = weakref.WeakSet()


def _after_fork_in_child():
    # a lock another thread held at fork time would never be released in the child
    for m in list(_ALL):
        m._lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)
# a layer's computation changed (an activation set anew): the models holding it make their graphs again
layer_mod.LAYER_CHANGED.append(lambda layer, added: drop_graphs_holding(list(_ALL), layer, added))


@register_builtin
class Model(host_stage.HostStage, functional.GraphShapes, Layer, Freeable, training_loop.BatchCalls):
    """A functional model: ``pg.Model(inputs, outputs, name=None)``."""

    def __init__(self, inputs=None, outputs=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.name, self._default_named = name or functional.default_model_name(self.kind()), name is None
        self._lock = threading.RLock()
        self._freed = False
        self._compiled = False
        self._trained = False
        self._topology = None
        self._compile_spec = None
        self._rt = None                  # the device side: backend, weights, graphs (runtime.Runtime)
        self._predict_fast = None        # predict's last one-batch call (training_loop.predict_repeat)
        self._trainable_at_compile = None
        self._multi_in = self._multi_out = False
        self.stop_training = False
        self.optimizer = None
        _ALL.add(self)
        if inputs is not None or outputs is not None:
            self._multi_in = isinstance(inputs, (list, tuple, dict))
            self._multi_out = isinstance(outputs, (list, tuple, dict))
            self._output_keys = functional.output_keys(outputs)      # outputs={"a": ...}: predict gives a dict
            keyed = functional.keyed_inputs(inputs)          # (a dict, or dicts inside a list)
            ins = list(inputs.values()) if isinstance(inputs, dict) else \
                (functional.flat_inputs(inputs) if self._multi_in else [inputs])
            outs = functional.flat_outputs(self, outputs)
            ins, outs = functional.cut_at_inputs(ins, outs, list(inputs) if isinstance(inputs, dict) else None)
            self._topology = functional.Topology(ins, outs)
            if keyed:
                functional.name_inputs_by_keys(self._topology, keyed)
            if not self._trainable:          # Model(..., trainable=False): frozen, as set later
                self.trainable = False
            self.built = True

    @classmethod
    def kind(cls):
        return "functional" if cls is Model else snake_case(cls.__name__)      # Keras's: "mnist_model"

    # --- the layer graph -------------------------------------------------------------------
    def _ensure_graph(self):
        """The topology (Sequential makes it once its input shape is known)."""
        if self._topology is None:
            raise ValueError("the model has no layers or no input shape yet")
        return self._topology

    @property
    def layers(self):           # Keras's: not the ops on its symbolic tensors (a + b), which its summary shows
        return [l for l in self._ensure_graph().layers if not getattr(l, "_op_step", False)]

    @property
    def inputs(self):
        return list(self._ensure_graph().inputs)

    @property
    def outputs(self):
        return list(self._ensure_graph().outputs)

    @property
    def input(self):             # Keras's: the inputs as given (a dict of them too; ``inputs`` is a list)
        ins, paths = self.inputs, getattr(self._ensure_graph(), "input_paths", None)
        return functional.structure_of(paths, ins) if paths is not None else ins if self._multi_in else ins[0]

    @property
    def output(self):
        return self.outputs_as_given(self.outputs)        # Keras's: as given (one, a list, a dict)

    @input.setter
    def input(self, value):
        pass            # set by Layer.__call__ when the model is called as a layer; the graph's stays

    @output.setter
    def output(self, value):
        pass

    @property
    def input_names(self):
        return [n.layer.name for n in self.inputs]

    @property
    def output_names(self):
        return list(self._output_keys) if self._output_keys is not None else [n.layer.name for n in self.outputs]

    @property
    def input_specs(self):
        """What each input takes (made once per layer graph)."""
        topo = self._ensure_graph()
        if topo.input_specs is None:
            topo.input_specs = da.input_specs(topo)
        return topo.input_specs

    @property
    def graph_specs(self):
        """What the graph takes: the inputs, or where preprocessing layers leave them."""
        topo = self._ensure_graph()
        if topo.graph_specs is None:
            topo.graph_specs = da.graph_specs(topo, self.input_specs)
        return topo.graph_specs

    def prepare_inputs(self, x, what="x", training=False, one_batch=False):
        """(the graph's input arrays, rows) from x: checked, preprocessing layers applied
        (one_batch: the inputs' rows may differ, rows None then)."""
        return da.prepare_inputs(self._ensure_graph(), self.input_specs, self.graph_specs, x, what, training,
                                 one_batch)

    @property
    def target_specs(self):
        """What each output is trained against (made once per compile)."""
        spec = self._compile_spec
        if spec.target_specs is None:
            spec.target_specs = da.target_specs(self.output_names, self.outputs, spec.losses)
        return spec.target_specs

    def _has_conv(self):
        return any(type(l).__name__.startswith("Conv") for l in self._ensure_graph().layers)

    # --- as a layer -----------------------------------------------------------------------------
    def named_variables(self):
        topo = self._topology
        if topo is None:
            # a subclassed model not called yet (a GAN stepped by its train_step): its layers' weights,
            # named as they will be once it is (saved and loaded so)
            held = super().named_variables()
            return [(f"{self.name}.{n}", v) for n, v in held] if self.__dict__.get("_subclassed") else held
        out, seen = [], set()
        for l in topo.layers:
            for n, v in l.named_variables():
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append((f"{l.name}.{n}", v))
        return out

    _named_variables = named_variables

    def compute_output_shape(self, input_shape):
        shapes = [o.shape for o in self.outputs]
        return shapes if self._multi_out else shapes[0]

    def _shapes_by_tracing(self, nodes):
        # (an application built on (None, None, 3) called on (96, 96, 3): Keras's (None, 3, 3, 1280))
        topo = self._topology
        if topo is None or not any(d is None for o in topo.outputs for d in o.feature_shape):
            return False
        return any(m is None and g is not None for i, n in zip(topo.inputs, nodes)
                   for m, g in zip(i.feature_shape, n.feature_shape))

    def call(self, inputs, training=None, mask=None):
        if self.host and host_stage.is_fed(inputs):     # preprocessing only, in a graph, on its data
            return host_stage.host_call_in_graph(self, inputs, training)
        view = host_stage.nested_view(self._ensure_graph())       # nested: Resizing & co run in the graph
        return functional.call_graph(self, view, inputs, bool(training), mask)

    # --- state ---------------------------------------------------------------------------------
    def check_alive(self):
        if self._freed:
            raise FreedError(f"model {self.name!r} has been freed")

    def check_compiled(self, what):
        self.check_alive()
        if not self._compiled:
            raise ValueError(f"compile the model before {what} (model.compile(...))")     # (Keras's error)

    @property
    def lock(self):
        return self._lock

    @property
    def compiled(self):
        return self._compiled

    @property
    def backend_name(self):
        return None if self._rt is None else self._rt.backend.name

    # --- compile --------------------------------------------------------------------------------
    def compile(self, optimizer="adam", loss="categorical_crossentropy", metrics=None, loss_weights=None,
                backend="auto", seed=None, weighted_metrics=None, run_eagerly=None, steps_per_execution=None,
                jit_compile=None, auto_scale_loss=None):
        """Set the optimizer, losses and metrics, choose the device, draw the weights."""
        self.check_alive()
        topo = self._ensure_graph()
        opt = optimizers_mod.get("adam" if optimizer is None else optimizer)     # (None: the default)
        spec = CompileSpec(topo.outputs, self.output_names, loss, loss_weights, metrics, weighted_metrics)
        if not isinstance(backend, str):
            raise TypeError("backend must be a str: 'auto', 'cpu' or a device name")
        rng = _random.rng(seed)
        with self._lock:
            self._new_runtime(Backend(backend), rng)
            self.optimizer = opt
            self._compile_spec = spec
            self._compiled = True
            self._trained = False
            self._trainable_at_compile = self._trainable_signature()
        return self

    def _new_runtime(self, backend, rng=None):
        old = self._rt
        if old is not None:
            old.drop_graphs()
        try:
            self._rt = Runtime(self, backend, rng)
        except BaseException:
            backend.free()
            raise
        if old is not None:
            old.free()

    def _runtime(self):
        """The device side: compile's, or for an uncompiled model (Keras computes its
        forward pass) the best device, made on first use."""
        self.check_alive()
        if self._rt is None or self._rt.weights_added:
            self._ensure_graph()
            with self._lock:
                if self._rt is None or self._rt.weights_added:
                    # (weights made since, by enable_lora: a new device side, as compile makes)
                    self._new_runtime(Backend("auto" if self._rt is None else self._rt.backend.name))
                    self._trained, self._trainable_at_compile = False, self._trainable_signature()
        self._rt.ensure_bound()
        return self._rt

    def get_compile_config(self):
        self.check_compiled("get_compile_config")
        cfg = self._compile_spec.config()
        cfg["optimizer"] = optimizers_mod.serialize(self.optimizer)
        return cfg

    def compile_from_config(self, config, backend="auto", custom_objects=None):
        from pyggml import losses, metrics
        opt = optimizers_mod.deserialize(config["optimizer"], custom_objects)
        loss = [l if is_crossentropy(l) else losses.deserialize(l, custom_objects) for l in config["loss"]]
        mets = [[metrics.deserialize(m, custom_objects) for m in ms] for ms in config["metrics"]]
        weighted = [[metrics.deserialize(m, custom_objects) for m in ms] for ms in config.get("weighted_metrics", [])]
        names = self.output_names
        return self.compile(optimizer=opt, loss=loss if len(names) > 1 else loss[0],
                            metrics=mets if len(names) > 1 else (mets[0] or None),
                            weighted_metrics=(weighted if len(names) > 1 else (weighted[0] or None)) if weighted
                            else None, loss_weights=config["loss_weights"], backend=backend)

    # --- weights --------------------------------------------------------------------------------
    def get_weights(self):
        """A dict {"<layer>.<weight>": array} of copies (an int index: Keras's list)."""
        self.check_alive()
        if not (self.__dict__.get("_subclassed") and self._topology is None):
            self._ensure_graph()
        with self._lock:
            if self._rt is not None:
                self._runtime()
            # by index Keras's list where it has one array per weight (a GRU's gates in Keras's order),
            # else the weights one by one (len is the names', API.md's dict)
            named = self.named_variables()
            layered = layered_keras_list(self.layers, named)
            return LayerWeights(named, "model", keras_list=layered[:2] if layered and layered[2] == len(named) else None)

    def set_weights(self, weights):
        """Set weights by name (a missing name or a wrong shape is refused, naming it), or Keras's list."""
        self.check_alive()
        weights = keras_list_by_name(self.named_variables(), weights, self.name, owner="model", layers=self.layers)
        if not isinstance(weights, dict):
            raise TypeError("set_weights takes a dict {name: array} as get_weights returns, or a list of arrays")
        named, prepared = dict(self.named_variables()), {}
        for k, a in weights.items():
            if k not in named:
                raise ValueError(f"unknown weight {k!r}; the model has {sorted(named)}")
            a = da.as_real_array(a, f"weight {k!r}")
            if a.shape != named[k].shape and not (named[k].shape == () and a.size == 1):
                raise ValueError(f"weight {k!r} has shape {named[k].shape}, got {a.shape}")
            if not np.all(np.isfinite(a)) or (a.size and np.abs(a).max() > np.finfo(np.float32).max):
                raise ValueError(f"weight {k!r} has NaN, inf or values too large for float32")
            prepared[k] = a
        with self._lock:
            if self._rt is not None:
                self._runtime()
            for k, a in prepared.items():
                named[k].assign(a)

    @property
    def trainable_weights(self):
        return [WeightName(n, v) for n, v in self.named_variables() if v.trainable and self.trainable]

    @property
    def non_trainable_weights(self):       # (a model made with trainable=False: all, as Keras's)
        return [WeightName(n, v) for n, v in self.named_variables() if not (v.trainable and self.trainable)]

    @property
    def weights(self):
        return [WeightName(n, v) for n, v in self.named_variables()]

    def count_params(self):
        summary_mod.built_without_graph(self) or self._ensure_graph()    # (a subclassed model its build() built)
        return int(sum(v.size for _, v in self.named_variables()))

    def get_layer(self, name=None, index=None):
        return lookup.get_layer(self, name, index)

    def _trainable_signature(self):
        return tuple(v.trainable and self.trainable for _, v in self.named_variables())

    def _trainable_now(self):
        """The weights fit trains: as at compile once training has begun, else as flagged now."""
        named = self.named_variables()
        sig = self._trainable_at_compile if self._trained else self._trainable_signature()
        return {v for (_, v), on in zip(named, sig) if on}, sig

    # --- graphs ---------------------------------------------------------------------------------
    @staticmethod
    def _shapes(xs):
        return tuple(tuple(a.shape) for a in xs)

    def _evaluator_for(self, batch, weight_kinds):
        return self._runtime().evaluator(self._shapes(batch.xs), weight_kinds)

    def _train_step_for(self, batch, weight_kinds):
        rt = self._runtime()
        trainable, sig = self._trainable_now()
        self._trained = True
        self._trainable_at_compile = sig
        return rt.train_step(self._shapes(batch.xs), weight_kinds, self.optimizer, trainable, sig)

    def gradients(self, x, y, sample_weight=None):
        """{weight name: gradient of the compiled loss on this batch} for every trainable
        weight (training mode, no weight changes): Keras's GradientTape pattern, with
        ``model.optimizer.apply_gradients(zip(grads.values(), model.trainable_variables))``."""
        return self._locked("gradients", training_loop.gradients, x, y, sample_weight)

    def new_train_step(self, shapes, weight_kinds, optimizer, opt_period=1, state=None):
        """A training graph outside fit (a Trainer's): with ``state=None`` a new optimizer
        state of its own (``step.state``; pass it on to share it).  Freed with the
        model, or when it is compiled again."""
        self.check_compiled("training")
        with self._lock:
            trainable, _ = self._trainable_now()
            return self._runtime().outside_step(shapes, weight_kinds, optimizer, trainable, opt_period, state)

    def new_loss_evaluator(self, shapes, weight_kinds):
        self.check_compiled("evaluation")
        with self._lock:
            return self._runtime().outside_evaluator(shapes, weight_kinds)

    def blend_from(self, other, tau=None):
        """Copy (tau None or 1) or blend ``other``'s weights into this model's, on the device."""
        self.check_compiled("copying weights")
        other.check_compiled("copying weights")
        mine, theirs = self.named_variables(), other.named_variables()
        if [(n, v.shape) for n, v in mine] != [(n, v.shape) for n, v in theirs]:
            raise ValueError("the models do not have the same weights")
        self._runtime().blender(other._runtime()).run(1.0 if tau is None else float(tau))

    # --- running --------------------------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1):
        """Train; returns a History.  Optimizer state carries over between calls."""
        self.check_compiled("fit")
        bs = training_loop.check_batch_size(batch_size)
        with self._lock:
            return training_loop.fit(self, x, y, bs, epochs, verbose, callbacks, validation_split,
                                     validation_data, shuffle, class_weight, sample_weight, initial_epoch,
                                     steps_per_epoch, validation_steps, validation_batch_size, validation_freq)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False):
        """The loss, or [loss, *metrics] in ``metrics_names`` order; a dict with return_dict=True."""
        self.check_compiled("evaluate")
        bs = training_loop.check_batch_size(batch_size)
        with self._lock:
            return training_loop.evaluate(self, x, y, bs, verbose, sample_weight, steps, callbacks, return_dict)

    @property
    def metrics_names(self):
        """["loss", per-output losses when several, metrics]: evaluate's order."""
        self.check_compiled("metrics_names")
        names = ["loss"]
        if sum(l is not None for l in self._compile_spec.losses) > 1:         # (Keras: several losses)
            names += [f"{nm}_loss" for nm, l in zip(self.output_names, self._compile_spec.losses) if l is not None]
        return names + [k for _, _, k in self._compile_spec.metric_keys()]

    def predict(self, x, batch_size=None, verbose=0, steps=None, callbacks=None):
        """float32 predictions for any number of rows (a list for several outputs); ``verbose``
        1 or 2 prints Keras's progress, ``callbacks`` get the on_predict_* calls."""
        res = None if callbacks or verbose else training_loop.predict_repeat(self, x, batch_size, steps)
        if res is None:
            res = training_loop.model_predict(self, x, batch_size, verbose, steps, callbacks)
        return self.outputs_as_given(res)

    def _locked(self, what, run, *args):
        """run(self, *args) on a compiled model, under its lock."""
        self.check_compiled(what)
        with self._lock:
            return run(self, *args)

    def __call__(self, *args, **kwargs):
        """On nodes or tensors: the model as a layer.  On arrays: predictions (Keras's
        forward pass, which also works before compile)."""
        args = functional.nested_inputs_in_order(self.__dict__.get("_topology"), args)
        first = (list(args[0].values()) if isinstance(args[0], dict) else args[0]) if args else None
        if args and autodiff.active_tape() is None and \
                not any(isinstance(v, (Node, Tensor, Variable)) for v in flatten_inputs(first)):
            return array_calls.call_on_arrays(self, super().__call__, args, kwargs)
        if args and autodiff.active_tape() is not None:
            args = (array_calls.with_unit_axes(self, args[0]),) + args[1:]
        return super().__call__(*args, **kwargs)

    # --- misc -----------------------------------------------------------------------------------
    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False, **kwargs):
        summary_mod.print_summary(self, print_fn, line_length, positions=positions, **kwargs)   # (show_trainable, ...)

    def get_optimizer_state(self):
        """The fit's optimizer state: {"iterations", "slots": {slot: {weight: array}}}, or None."""
        self.check_alive()
        state = None if self._rt is None else self._rt.fit_state
        return None if state is None else state.get_state()

    def set_optimizer_state(self, state):
        """Restore ``get_optimizer_state()``'s data; a mismatch raises (nothing is skipped)."""
        self.check_compiled("restoring the optimizer state")
        with self._lock:
            self._runtime().fit_state_for(self.optimizer).set_state(state, self.named_variables())
            self._trained = True

    def clone(self):
        """A copy in memory of its own: the same architecture, compile settings (if
        compiled, on the same device) and weights; no optimizer state (rebuild.copy_model)."""
        return copy_model(self)

    __copy__ = clone
    __reduce__ = pickling.reduce_model          # pickled as Keras pickles a model: through its saved file
    __deepcopy__ = (lambda self, memo: self.clone())

    def save(self, path=None, overwrite=True, **kwargs):
        gguf_io.save_model(self, gguf_io.keras_save_args("save", path, kwargs, overwrite, ("zipped",)))

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Keras's: the Dense, EinsumDense, Embedding and attention weights as int8 (int4) and a scale."""
        return quantize_model(self, mode, filters, config)

    def save_weights(self, path=None, overwrite=True, **kwargs):
        gguf_io.save_weights(self, gguf_io.keras_save_args("save_weights", path, kwargs, overwrite, ("max_shard_size",)))

    def load_weights(self, path=None, skip_mismatch=False, **kwargs):
        gguf_io.load_weights_into(self, gguf_io.keras_save_args("load_weights", path, kwargs), skip_mismatch)

    def free(self):
        """Release the model's native memory (the weights' values stay with the layers).  Idempotent."""
        if self._freed:
            return
        with self._lock:
            if self._rt is not None:
                self._rt.free()
                self._rt = None
            self._freed = True
