"""A clear error for numpy's array of graph tensors.

``tensor - numpy_array`` (or ``numpy_array * tensor``) inside a layer's call does not
combine the two: ``Tensor`` takes numbers and tensors only, so numpy applies the
operation element by element and makes an object array of tensors.  The ops that
receive such an array say what happened and what to write instead."""

import numpy as np

__all__ = ["refuse_tensor_array"]


def refuse_tensor_array(a, what):
    """Raise TypeError when ``a`` is an object array holding graph tensors."""
    if isinstance(a, np.ndarray) and a.dtype == object and a.size:
        from pyggml.core import Tensor
        if any(isinstance(e, Tensor) for e in a.flat[:8]):
            raise TypeError(
                f"{what}: got a numpy array of graph tensors: a graph tensor was combined with a numpy array by "
                f"+, -, * or / (numpy then applies the operation element by element). Make the array a tensor "
                f"first: ops.convert_to_tensor(array) inside the layer's call (e.g. x - "
                f"ops.convert_to_tensor(self.eye)), or use ops.add/subtract/multiply/divide(x, array)")
