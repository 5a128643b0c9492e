"""Layers that join several inputs."""

from pyggml.layers.merging.dot import Dot, dot
from pyggml.layers.merging.extrema import Maximum, Minimum, maximum, minimum
from pyggml.layers.merging.merge import (Add, Average, Concatenate, Multiply, Subtract, add, average,
                                         concatenate, multiply, subtract)

__all__ = ["Add", "Subtract", "Multiply", "Average", "Concatenate", "add", "subtract", "multiply", "average",
           "concatenate", "Maximum", "Minimum", "maximum", "minimum", "Dot", "dot"]
