"""Keras's control flow, sorting, scatter and linear-algebra functions of
``keras.ops``, with numpy's axes: on graph tensors
(built from ggml ops that train) and on arrays (computed at once).  ``pyggml.ops``
installs them (its ``_KERAS_MODULES``)."""

__all__ = []

# names that are also ggml ops of pyggml.core.ops: ggml's form for a Tensor outside a model's graph
SHARED_WITH_GGML = ()
