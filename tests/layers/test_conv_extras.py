"""DepthwiseConv1D/2D and SeparableConv1D/2D: the layer harness (float64 numpy
references over strides, "same"/"valid" padding, dilation, depth_multiplier and
both data formats), PyTorch parity of the forward pass and the gradients
(grouped convolutions), Keras's weight layouts, configs and bad arguments, and
a keras-io "image classification from scratch" shaped model that trains."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

L = pg.layers


# --- float64 references -------------------------------------------------------------------------

def _same(size, span, s):
    out = -(-size // s)
    total = max((out - 1) * s + span - size, 0)
    return total // 2, total - total // 2          # Keras: the extra cell at the end


def depthwise_np(x, kernel, strides, padding, dilation, channels_first):
    """x (N, *spatial, C) (or channels first), kernel in Keras's layout (*k, C, M) ->
    (N, *out, C * M) (or channels first), float64."""
    rank = kernel.ndim - 2
    if channels_first:
        x = np.moveaxis(x, 1, -1)
    if rank == 1:
        x, kernel = x[:, None], kernel[None]
        strides, dilation = (1,) + tuple(strides), (1,) + tuple(dilation)
    kh, kw, c, m = kernel.shape
    (sh, sw), (dh, dw) = strides, dilation
    if padding == "same":
        x = np.pad(x, ((0, 0), _same(x.shape[1], (kh - 1) * dh + 1, sh), _same(x.shape[2], (kw - 1) * dw + 1, sw),
                       (0, 0)))
    oh = (x.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], oh, ow, c, m))
    for a in range(kh):
        for b in range(kw):
            patch = x[:, a * dh:a * dh + (oh - 1) * sh + 1:sh, b * dw:b * dw + (ow - 1) * sw + 1:sw, :]
            out += patch[..., None] * kernel[a, b]
    out = out.reshape(out.shape[:3] + (c * m,))
    if rank == 1:
        out = out[:, 0]
    return np.moveaxis(out, -1, 1) if channels_first else out


def torch_to_keras_depthwise(w, m):
    """pyggml's (C * M, 1, *k) -> Keras's (*k, C, M)."""
    c = w.shape[0] // m
    k = w.shape[2:]
    return np.moveaxis(w.reshape((c, m) + k), (0, 1), (-2, -1))


def depthwise_ref(strides=1, padding="valid", dilation=1, m=1, channels_first=False, activation=None, rank=2):
    strides = (strides,) * rank if isinstance(strides, int) else strides
    dilation = (dilation,) * rank if isinstance(dilation, int) else dilation

    def ref(hs, w, training):
        y = depthwise_np(hs[0], torch_to_keras_depthwise(w["weight"], m), strides, padding, dilation, channels_first)
        if "bias" in w:
            y = y + (w["bias"].reshape((-1,) + (1,) * rank) if channels_first else w["bias"])
        return ACTIVATIONS[activation](y)
    return ref


def separable_ref(strides=1, padding="valid", dilation=1, channels_first=False, activation=None, rank=2):
    strides = (strides,) * rank if isinstance(strides, int) else strides
    dilation = (dilation,) * rank if isinstance(dilation, int) else dilation

    def ref(hs, w, training):
        x = np.moveaxis(hs[0], 1, -1) if channels_first else hs[0]
        d = depthwise_np(x, w["depthwise_kernel"], strides, padding, dilation, False)
        pw = w["pointwise_kernel"].reshape(w["pointwise_kernel"].shape[-2:])
        y = d @ pw + w.get("bias", 0.0)
        y = ACTIVATIONS[activation](y)
        return np.moveaxis(y, -1, 1) if channels_first else y
    return ref


CF = "channels_first"
CASES = [
    LayerCase("depthwise_conv2d", lambda: L.DepthwiseConv2D(2), [(4, 3, 2)], depthwise_ref()),
    LayerCase("depthwise_conv2d_same_stride2_mult2_relu",
              lambda: L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, activation="relu"),
              [(5, 4, 2)], depthwise_ref(2, "same", m=2, activation="relu")),
    LayerCase("depthwise_conv2d_dilated_same_nobias",
              lambda: L.DepthwiseConv2D((2, 3), padding="same", dilation_rate=(2, 1), use_bias=False),
              [(5, 4, 2)], depthwise_ref(padding="same", dilation=(2, 1))),
    LayerCase("depthwise_conv2d_channels_first_mult2",
              lambda: L.DepthwiseConv2D((2, 2), strides=(1, 2), depth_multiplier=2, data_format=CF),
              [(2, 4, 5)], depthwise_ref((1, 2), m=2, channels_first=True)),
    LayerCase("depthwise_conv2d_channels_first_same_tanh",
              lambda: L.DepthwiseConv2D(3, padding="same", data_format=CF, activation="tanh"),
              [(3, 3, 4)], depthwise_ref(padding="same", channels_first=True, activation="tanh")),
    LayerCase("depthwise_conv1d", lambda: L.DepthwiseConv1D(3), [(6, 2)], depthwise_ref(rank=1)),
    LayerCase("depthwise_conv1d_same_stride2_mult3",
              lambda: L.DepthwiseConv1D(2, strides=2, padding="same", depth_multiplier=3), [(7, 2)],
              depthwise_ref(2, "same", m=3, rank=1)),
    LayerCase("depthwise_conv1d_channels_first_dilated",
              lambda: L.DepthwiseConv1D(2, dilation_rate=2, padding="same", data_format=CF, depth_multiplier=2),
              [(2, 6)], depthwise_ref(padding="same", dilation=2, m=2, channels_first=True, rank=1)),
    LayerCase("separable_conv2d", lambda: L.SeparableConv2D(3, 2), [(4, 3, 2)], separable_ref()),
    LayerCase("separable_conv2d_same_stride2_mult2_relu",
              lambda: L.SeparableConv2D(2, 3, strides=2, padding="same", depth_multiplier=2, activation="relu"),
              [(5, 4, 2)], separable_ref(2, "same", activation="relu")),
    LayerCase("separable_conv2d_dilated_nobias",
              lambda: L.SeparableConv2D(2, 2, dilation_rate=2, use_bias=False), [(5, 5, 3)],
              separable_ref(dilation=2)),
    LayerCase("separable_conv2d_channels_first_same",
              lambda: L.SeparableConv2D(3, (3, 2), padding="same", depth_multiplier=2, data_format=CF),
              [(2, 4, 3)], separable_ref(padding="same", channels_first=True)),
    LayerCase("separable_conv1d", lambda: L.SeparableConv1D(3, 2), [(5, 2)], separable_ref(rank=1)),
    LayerCase("separable_conv1d_same_stride2_mult2_tanh",
              lambda: L.SeparableConv1D(2, 3, strides=2, padding="same", depth_multiplier=2, activation="tanh"),
              [(7, 3)], separable_ref(2, "same", activation="tanh", rank=1)),
    LayerCase("separable_conv1d_channels_first",
              lambda: L.SeparableConv1D(2, 2, dilation_rate=2, data_format=CF), [(2, 6)],
              separable_ref(dilation=2, channels_first=True, rank=1)),
]

# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)
