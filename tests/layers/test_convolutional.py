"""Conv1D, Conv2D and the pooling layers through the layer harness
(channels-last inputs, PyTorch's (filters, channels, kh, kw) kernels)."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

L = pg.layers


def _same(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2          # Keras: the extra row/column at the end


def conv2d_ref(strides=(1, 1), padding="valid", activation=None):
    def ref(hs, w, training):
        x = hs[0]
        kern = w["weight"]                           # (filters, channels, kh, kw)
        _, _, kh, kw = kern.shape
        sh, sw = strides
        if padding == "same":
            x = np.pad(x, ((0, 0), _same(x.shape[1], kh, sh), _same(x.shape[2], kw, sw), (0, 0)))
        oh, ow = (x.shape[1] - kh) // sh + 1, (x.shape[2] - kw) // sw + 1
        out = np.empty((x.shape[0], oh, ow, kern.shape[0]))
        for i in range(oh):
            for j in range(ow):
                patch = x[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :]
                out[:, i, j, :] = np.einsum("nhwc,fchw->nf", patch, kern)
        return ACTIVATIONS[activation](out + w.get("bias", 0.0))
    return ref


def conv1d_ref(stride=1, padding="valid", activation=None):
    inner = conv2d_ref((1, stride), padding, activation)

    def ref(hs, w, training):
        w2 = dict(w, weight=w["weight"][:, :, None, :])           # a height-1 image
        return inner([hs[0][:, None]], w2, training)[:, 0]
    return ref


def pool_ref(op, pool=(2, 2), strides=None):
    strides = strides or pool

    def ref(hs, w, training):
        x = hs[0]
        (kh, kw), (sh, sw) = pool, strides
        oh, ow = (x.shape[1] - kh) // sh + 1, (x.shape[2] - kw) // sw + 1
        out = np.empty((x.shape[0], oh, ow, x.shape[3]))
        for i in range(oh):
            for j in range(ow):
                win = x[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :]
                out[:, i, j, :] = win.max(axis=(1, 2)) if op == "max" else win.mean(axis=(1, 2))
        return out
    return ref


CASES = [
    LayerCase("conv2d", lambda: L.Conv2D(3, 2), [(4, 3, 2)], conv2d_ref()),
    LayerCase("conv2d_3x3_relu", lambda: L.Conv2D(2, (3, 2), activation="relu"), [(5, 4, 1)],
              conv2d_ref(activation="relu")),
    LayerCase("conv2d_same_stride2", lambda: L.Conv2D(2, 3, strides=2, padding="same"), [(5, 4, 2)],
              conv2d_ref((2, 2), "same")),
    LayerCase("conv2d_same_even_kernel", lambda: L.Conv2D(2, 2, padding="same"), [(3, 3, 1)],
              conv2d_ref(padding="same")),
    LayerCase("conv2d_nobias", lambda: L.Conv2D(2, 2, strides=(1, 2), use_bias=False), [(3, 5, 2)],
              conv2d_ref((1, 2))),
    LayerCase("conv1d", lambda: L.Conv1D(3, 2), [(5, 2)], conv1d_ref()),
    LayerCase("conv1d_same_stride2_tanh", lambda: L.Conv1D(2, 3, strides=2, padding="same", activation="tanh"),
              [(6, 3)], conv1d_ref(2, "same", "tanh")),
    LayerCase("maxpool", lambda: L.MaxPooling2D(), [(4, 4, 2)], pool_ref("max")),
    LayerCase("maxpool_overlapping", lambda: L.MaxPooling2D((2, 3), strides=(1, 2)), [(3, 7, 1)],
              pool_ref("max", (2, 3), (1, 2))),
    LayerCase("avgpool", lambda: L.AveragePooling2D(), [(5, 4, 2)], pool_ref("avg")),
    LayerCase("avgpool_3x1", lambda: L.AveragePooling2D((3, 1), strides=(2, 1)), [(5, 2, 1)],
              pool_ref("avg", (3, 1), (2, 1))),
    LayerCase("global_avgpool", lambda: L.GlobalAveragePooling2D(), [(3, 2, 3)],
              lambda hs, w, t: hs[0].mean(axis=(1, 2))),
    LayerCase("global_maxpool", lambda: L.GlobalMaxPooling2D(), [(3, 2, 3)],
              lambda hs, w, t: hs[0].max(axis=(1, 2))),
    LayerCase("global_avgpool_keepdims", lambda: L.GlobalAveragePooling2D(keepdims=True), [(3, 2, 3)],
              lambda hs, w, t: hs[0].mean(axis=(1, 2), keepdims=True)),
    LayerCase("global_maxpool_keepdims", lambda: L.GlobalMaxPooling2D(keepdims=True), [(2, 4, 2)],
              lambda hs, w, t: hs[0].max(axis=(1, 2), keepdims=True)),
]


# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)
