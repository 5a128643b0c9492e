"""Output shapes found by running a layer's call on shapes alone.

The layer is called on tensors of a scratch context that holds metadata only
(no memory is allocated, nothing is computed); its weights, constants and
masks get tensors of the right shapes there.  This also builds the layers it
uses inside its call.  A batch of ``_BATCH`` rows stands for the batch and
``_LENGTH`` for any variable length; output dims equal to those map back to None.
"""

from pyggml import _scope
from pyggml.core import Context
from pyggml.errors import ContextFullError

__all__ = ["output_shapes"]

_BATCH = 3
_LENGTH = 113          # a prime no real feature dimension is likely to equal by chance
_DTYPES = {"f32": "float32", "i32": "int32"}


class _ShapeOnly:
    """The builder protocol of pyggml._scope, over a metadata-only context."""

    training = False
    fused_ok = True        # shapes only: the fused ops make the fewest tensors (pyggml._scope.fused)

    def __init__(self, n_tensors):
        self.ctx = Context(n_tensors=n_tensors, no_alloc=True)
        self.cache = {}
        self._vars = {}

    def tensor_of(self, variable):
        t = self._vars.get(id(variable))
        if t is None:
            t = self._vars[id(variable)] = (self.ctx.new_tensor(variable.shape), variable)
        return t[0]

    def constant(self, array, dtype="float32"):
        return self.ctx.new_tensor(array.shape or (1,), dtype="i32" if dtype == "int32" else "f32")

    def derived_input(self, source, fn, shape, dtype):
        return self.ctx.new_tensor(shape, dtype="i32" if dtype == "int32" else "f32")

    def random_keep_mask(self, shape, rate):
        return self.ctx.new_tensor(shape)

    def random_values(self, shape, draw):
        return self.ctx.new_tensor(shape)

    def add_update(self, variable, tensor):
        pass

    def free(self):
        self.ctx.free()


def _concrete(node):
    return (_BATCH,) + tuple(_LENGTH if d is None else d for d in node.feature_shape)


def output_shapes(layer, inputs, kwargs):
    """(Keras output shape, or a list of them; [dtype, ...]) of ``layer(inputs, **kwargs)``."""
    nodes = inputs if isinstance(inputs, list) else [inputs]
    variable = any(d is None for n in nodes for d in n.feature_shape)
    n_tensors = 4096
    while True:
        b = _ShapeOnly(n_tensors)
        try:
            with _scope.entered(b):
                xs = [b.ctx.new_tensor(_concrete(n), dtype="i32" if n.dtype == "int32" else "f32") for n in nodes]
                out = layer(xs if isinstance(inputs, list) else xs[0], **kwargs)
            outs = out if isinstance(out, (list, tuple)) else [out]
            shapes = []
            for t in outs:
                s = list(t.shape)
                s[0] = None
                if variable:
                    s = [None if (i > 0 and d == _LENGTH) else d for i, d in enumerate(s)]
                shapes.append(tuple(s))
            dtypes = [_DTYPES.get(t.dtype, "float32") for t in outs]
            return (shapes if isinstance(out, (list, tuple)) else shapes[0]), dtypes
        except ContextFullError:
            if n_tensors >= 1 << 22:
                raise
            n_tensors *= 8
        finally:
            b.free()
