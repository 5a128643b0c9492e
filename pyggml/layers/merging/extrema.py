"""Maximum and Minimum of several inputs (element-wise, numpy broadcasting), and
Keras's functional forms ``maximum([a, b])``, ``minimum([a, b])``.

They train: ``max(a, b) = b + relu(a - b)`` and ``min(a, b) = a - relu(a - b)``
(at a tie the gradient goes to one input, as a subgradient should).
"""

from pyggml import ops
from pyggml.layers.merging.merge import _Merge, masked_merge
from pyggml.saving.object_registration import register_builtin

__all__ = ["Maximum", "Minimum", "maximum", "minimum"]


@register_builtin
class Maximum(_Merge):
    def call(self, inputs, training=None, mask=None):
        return masked_merge(lambda y, x: x + ops.relu(y - x), inputs, mask)


@register_builtin
class Minimum(_Merge):
    def call(self, inputs, training=None, mask=None):
        return masked_merge(lambda y, x: y - ops.relu(y - x), inputs, mask)


def maximum(inputs, **kwargs):
    """Keras's functional form: ``maximum([a, b])`` is ``Maximum()([a, b])``."""
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    return Minimum(**kwargs)(inputs)
