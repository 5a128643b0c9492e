"""SymbolicOp: a Keras op applied to symbolic nodes, as Keras 3 lets ``keras.ops`` take a
functional model's tensors (``x = ops.reshape(layers.Dense(8)(inp), (-1, 4, 2))``,
``x = x + 1.0``).  The call becomes a layer holding the op's name and its other arguments
(numbers, strings, shapes, arrays), so the model saves and loads; the nodes are its inputs."""

import numpy as np

from pyggml import _symbolic
from pyggml._validation import is_number
from pyggml.layers.layer import Layer
from pyggml.layers.node import Node
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["SymbolicOp", "StringShapeOp"]


def _template(value, nodes, what):
    """A JSON form of an argument: nodes become {"__node__": i} (i: their input index)."""
    if isinstance(value, Node):
        for i, n in enumerate(nodes):
            if n is value:
                return {"__node__": i}
        nodes.append(value)
        return {"__node__": len(nodes) - 1}
    if value is None or isinstance(value, (bool, str)):
        return value
    if is_number(value):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, (list, tuple)):
        return {"__seq__": [_template(v, nodes, what) for v in value], "tuple": isinstance(value, tuple)}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    raise TypeError(f"{what}: an argument of type {type(value).__name__} cannot go with symbolic tensors (give "
                    f"numbers, shapes, strings or arrays; tensors as layer outputs)")


def _fill(template, tensors):
    if isinstance(template, dict):
        if "__node__" in template:
            return tensors[template["__node__"]]
        if "__seq__" in template:
            items = [_fill(v, tensors) for v in template["__seq__"]]
            return tuple(items) if template.get("tuple") else items
        if "__ndarray__" in template:
            return np.asarray(template["__ndarray__"], dtype=template["dtype"])
    return template


def _resolve(op):
    """The pyggml.ops function named ``op`` ("reshape", "image.extract_patches"), or an
    activation ("activations.swish": keras.activations on a node), or None."""
    from pyggml import activations, ops
    fn = ops
    if isinstance(op, str) and op.startswith("activations."):
        fn, op = activations, op[len("activations."):]
    for part in op.split(".") if isinstance(op, str) else [None]:
        if not isinstance(part, str) or part.startswith("_"):
            return None
        fn = getattr(fn, part, None)
    return fn if callable(fn) else None


@register_builtin
class SymbolicOp(Layer):
    """``SymbolicOp(op, args, kwargs)``: ``pyggml.ops.<op>(*args, **kwargs)`` on its inputs (the
    nodes the arguments held, in order of first appearance)."""

    volumes_whole = True       # the user's function sees a volume 5-D (pyggml._wide)
    _op_step = True            # an op of the graph, not one of model.layers (Keras's)

    def __init__(self, op, args=None, kwargs=None, **kw):
        super().__init__(**kw)
        if _resolve(op) is None:
            raise ValueError(f"SymbolicOp: {op!r} is not a function of pyggml.ops")
        self.op = op
        self.op_args = list(args or [])
        self.op_kwargs = dict(kwargs or {})

    def kind(self):
        """Its default name: the op's, as Keras names an op ("mean", "multiply")."""
        return self.op.split(".")[-1] if isinstance(self.op, str) else "symbolic_op"

    @property
    def display_class(self):
        """The class a summary row names: the op's, as Keras's ("Mean", "Multiply")."""
        return "".join(p[:1].upper() + p[1:] for p in self.kind().split("_"))

    def call(self, inputs, training=None):
        tensors = inputs if isinstance(inputs, list) else [inputs]
        args = [_fill(a, tensors) for a in self.op_args]
        kwargs = {k: _fill(v, tensors) for k, v in self.op_kwargs.items()}
        out = _resolve(self.op)(*args, **kwargs)
        return list(out) if isinstance(out, (list, tuple)) else out

    def get_config(self):
        cfg = super().get_config()
        cfg.update(op=self.op, args=self.op_args, kwargs=self.op_kwargs)
        return cfg


_STRING_SHAPE_OPS = {"expand_dims": np.expand_dims, "reshape": np.reshape, "squeeze": np.squeeze}


@register_builtin
class StringShapeOp(HostLayer):
    """``ops.expand_dims``/``reshape``/``squeeze`` of a string input (keras-io's
    ``lookup(ops.expand_dims(string_input, -1))``): a host step, as strings never enter the
    graph.  ``args``: the op's arguments after the tensor (the axis or the shape)."""

    output_dtype = "string"
    _op_step = True

    def __init__(self, op, args=None, kwargs=None, **kw):
        super().__init__(**kw)
        if op not in _STRING_SHAPE_OPS:
            raise ValueError(f"StringShapeOp: {op!r} is not one of {sorted(_STRING_SHAPE_OPS)}")
        self.op, self.op_args, self.op_kwargs = op, list(args or []), dict(kwargs or {})

    def _apply(self, a):
        args = [tuple(v) if isinstance(v, list) else v for v in self.op_args]
        return _STRING_SHAPE_OPS[self.op](a, *args, **self.op_kwargs)

    def host_call(self, inputs):
        return self._apply(np.asarray(inputs))

    def compute_output_shape(self, input_shape):
        if self.op == "reshape":
            shape = tuple(self.op_args[0]) if self.op_args else tuple(self.op_kwargs.get("newshape", ()))
            return (input_shape[0],) + shape[1:] if shape and shape[0] in (-1, None) else shape
        probe = self._apply(np.empty((2,) + tuple(1 if d is None else d for d in input_shape[1:]), object))
        return (input_shape[0],) + tuple(None if d is None else s for d, s in
                                         zip(list(input_shape[1:]) + [1] * 8, probe.shape[1:]))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(op=self.op, args=self.op_args, kwargs=self.op_kwargs)
        return cfg


def apply_to_nodes(name, args, kwargs):
    if name in _STRING_SHAPE_OPS and args and isinstance(args[0], Node) and args[0].dtype == "string" and \
            not any(isinstance(a, Node) for a in list(args[1:]) + list(kwargs.values())):
        rest = [list(a) if isinstance(a, tuple) else a for a in args[1:]]
        return StringShapeOp(name, rest, kwargs)(args[0])
    nodes = []
    what = f"ops.{name}"
    t_args = [_template(a, nodes, what) for a in args]
    t_kwargs = {k: _template(v, nodes, what) for k, v in kwargs.items()}
    layer = SymbolicOp(name, t_args, t_kwargs, name=None)
    out = layer(nodes if len(nodes) > 1 else nodes[0])
    return tuple(out) if isinstance(out, list) else out


_symbolic.HANDLER[0] = apply_to_nodes
