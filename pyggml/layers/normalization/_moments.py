"""Means and variances from ops that train (ggml's norm has no backward pass)."""

from pyggml import ops

__all__ = ["mean_rows", "rsqrt"]


def mean_rows(x):
    """Mean over ggml dim 0 (numpy's last axis), as a scaled sum_rows: ggml's mean
    has a backward pass only when its result is a scalar."""
    return ops.scale(ops.sum_rows(x), 1.0 / x.ne[0])


def rsqrt(v, eps):
    """(v + eps) ** -0.5 as exp(-0.5 log(v + eps))."""
    return ops.exp(ops.scale(ops.log(ops.scale_bias(v, 1.0, eps)), -0.5))
