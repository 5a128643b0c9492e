"""pyggml.ops's neural-network functions (pyggml._ops_nn): forward against float64 numpy
references and gradients against central differences through a model (check_op_in_model),
PyTorch parity for the convolutions, pooling, attention and CTC, eager calls on arrays,
functional nodes, and bad arguments."""

import math
import zlib

import numpy as np
import pytest

import pyggml as pg
from pyggml import ops

from op_checks import check_op_in_model

RNG = np.random.default_rng(11)


# --- float64 numpy references --------------------------------------------------------------------

def _softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _sparsemax(z, axis=-1):
    z = np.moveaxis(z, axis, -1)
    s = -np.sort(-z, axis=-1)
    k = np.arange(1, z.shape[-1] + 1)
    cs = np.cumsum(s, -1)
    support = 1 + k * s > cs
    kz = support.sum(-1, keepdims=True)
    tau = (np.take_along_axis(cs, kz - 1, -1) - 1) / kz
    return np.moveaxis(np.maximum(z - tau, 0), -1, axis)


_erf = np.vectorize(math.erf)


def _erfinv64(y):
    z = np.zeros_like(y)
    for _ in range(60):                      # Newton from 0 (slow but sure for |y| < 1)
        z = z - (_erf(z) - y) / (2 / np.sqrt(np.pi) * np.exp(-z * z))
    return z


def _conv_ref(x, k, stride=1, padding="valid", dilation=1):
    """x (N, *spatial, C), k (*ks, Cin, O), Keras's 'same' (the odd cell after)."""
    rank = x.ndim - 2
    st = (stride,) * rank if np.isscalar(stride) else stride
    dl = (dilation,) * rank if np.isscalar(dilation) else dilation
    ks = k.shape[:rank]
    pads = []
    outs = []
    for n, kk, s, d in zip(x.shape[1:-1], ks, st, dl):
        span = (kk - 1) * d + 1
        if padding == "same":
            out = -(-n // s)
            tot = max((out - 1) * s + span - n, 0)
            pads.append((tot // 2, tot - tot // 2))
        else:
            out = (n - span) // s + 1
            pads.append((0, 0))
        outs.append(out)
    xp = np.pad(x, [(0, 0)] + pads + [(0, 0)])
    groups = x.shape[-1] // k.shape[-2]
    og = k.shape[-1] // groups
    y = np.zeros((x.shape[0],) + tuple(outs) + (k.shape[-1],))
    for tap in np.ndindex(*ks):
        idx = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dl, outs, st))
        patch = xp[(slice(None),) + idx]
        for g in range(groups):
            cin = slice(g * k.shape[-2], (g + 1) * k.shape[-2])
            y[..., g * og:(g + 1) * og] += patch[..., cin] @ k[tap][:, g * og:(g + 1) * og]
    return y


def _conv_transpose_ref(x, k, stride, padding="valid", output_padding=None, dilation=1):
    """The scatter definition, then Keras's output window (x (N, *sp, C), k (*ks, O, C))."""
    rank = x.ndim - 2
    ks = k.shape[:rank]
    full = [(n - 1) * stride + (kk - 1) * dilation + 1 for n, kk in zip(x.shape[1:-1], ks)]
    y = np.zeros((x.shape[0],) + tuple(full) + (k.shape[-2],))
    for pos in np.ndindex(*x.shape[1:-1]):
        for tap in np.ndindex(*ks):
            at = tuple(p * stride + t * dilation for p, t in zip(pos, tap))
            y[(slice(None),) + at] += x[(slice(None),) + pos] @ k[tap].T
    out = []
    for n, kk in zip(x.shape[1:-1], ks):
        # Keras's rule (its JAX backend's): the zero-inserted input padded by (left, right)
        span = (kk - 1) * dilation + 1
        if padding == "valid":
            left = span - 1
            right = span - 1 + (max(span, stride) - span if output_padding is None else output_padding)
        else:
            total = stride + span - 2 if output_padding is None else span + span % 2 - 2 + output_padding
            left = min(total // 2 + total % 2, span - 1)
            right = total - left
        length = (n - 1) * stride + 1 + left + right - span + 1
        out.append((span - 1 - left, length))
    res = np.zeros((x.shape[0],) + tuple(L for _, L in out) + (k.shape[-2],))
    src = tuple(slice(c, min(c + L, f)) for (c, L), f in zip(out, full))
    dst = tuple(slice(0, min(c + L, f) - c) for (c, L), f in zip(out, full))
    res[(slice(None),) + dst] = y[(slice(None),) + src]
    return res


def _unfold_ref(x, k, d, p, s):
    """x (N, C, H, W) -> (N, C * kh * kw, L), PyTorch's order."""
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    oh = (xp.shape[2] - (k[0] - 1) * d[0] - 1) // s[0] + 1
    ow = (xp.shape[3] - (k[1] - 1) * d[1] - 1) // s[1] + 1
    out = np.zeros((x.shape[0], x.shape[1], k[0], k[1], oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            out[:, :, i, j] = xp[:, :, i * d[0]:i * d[0] + (oh - 1) * s[0] + 1:s[0],
                                 j * d[1]:j * d[1] + (ow - 1) * s[1] + 1:s[1]]
    return out.reshape(x.shape[0], -1, oh * ow)


def _adaptive_ref(x, out, op):
    """Channels-last x pooled over PyTorch's adaptive bins, one spatial axis after the other."""
    for ax, o in enumerate(out, start=1):
        n = x.shape[ax]
        parts = []
        for i in range(o):
            a, b = (i * n) // o, -(-(i + 1) * n // o)
            win = np.take(x, np.arange(a, b), axis=ax)
            parts.append(win.max(ax) if op == "max" else win.mean(ax))
        x = np.stack(parts, ax)
    return x


def _depthwise_ref(x, k, stride=1, padding="valid", dilation=1):
    c, m = k.shape[-2], k.shape[-1]
    full = np.zeros(k.shape[:-2] + (c, c * m))
    for ci in range(c):
        full[..., ci, ci * m:(ci + 1) * m] = k[..., ci, :]
    return _conv_ref(x, full, stride, padding, dilation)


def _pool_ref(x, size, stride, padding, op):
    rank = x.ndim - 2
    size = (size,) * rank if np.isscalar(size) else size
    stride = size if stride is None else ((stride,) * rank if np.isscalar(stride) else stride)
    outs, pads = [], []
    for n, k, s in zip(x.shape[1:-1], size, stride):
        if padding == "same":
            out = -(-n // s)
            tot = max((out - 1) * s + k - n, 0)
            pads.append(tot // 2)
        else:
            out = (n - k) // s + 1
            pads.append(0)
        outs.append(out)
    y = np.zeros((x.shape[0],) + tuple(outs) + (x.shape[-1],))
    for o in np.ndindex(*outs):
        idx = tuple(slice(max(i * s - p, 0), min(i * s - p + k, n))
                    for i, s, p, k, n in zip(o, stride, pads, size, x.shape[1:-1]))
        win = x[(slice(None),) + idx + (slice(None),)].reshape(x.shape[0], -1, x.shape[-1])
        y[(slice(None),) + o] = win.max(1) if op == "max" else win.mean(1)
    return y


def _attention_ref(q, k, v, bias=None, mask=None, scale=None, causal=False):
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    s = (1 / np.sqrt(q.shape[-1])) if scale is None else scale
    logits = np.einsum("bthd,bshd->bhts", q, k) * s
    if bias is not None:
        logits = logits + bias
    keep = np.ones(logits.shape, dtype=bool)
    if mask is not None:
        keep &= np.broadcast_to(mask.astype(bool), logits.shape)
    if causal:
        keep &= np.tril(np.ones(logits.shape[-2:], dtype=bool))
    logits = np.where(keep, logits, -1e9)
    return np.einsum("bhts,bshd->bthd", _softmax(logits), v)


def _stft_ref(x, length, stride, fft_length, window="hann", center=True):
    if center:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(fft_length // 2,) * 2], mode="reflect")
    n = length
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n) if window == "hann" else np.ones(n)
    left = (fft_length - n) // 2
    win = np.pad(win, (left, fft_length - n - left))
    count = 1 + (x.shape[-1] - fft_length) // stride
    frames = np.stack([x[..., i * stride:i * stride + fft_length] for i in range(count)], -2)
    y = np.fft.rfft(frames * win, n=fft_length)
    return y.real, y.imag


# --- constants for the cases (the batch is 2 in check_op_in_model) ----------------------------------

C34 = RNG.normal(size=(3, 4))
P34 = _softmax(RNG.normal(size=(3, 4)))
B34 = (RNG.uniform(size=(3, 4)) > 0.5).astype(np.float64)
IDS = np.array([[0, 2], [1, 1], [3, 3]])
OFF4 = np.array([0.3, -0.2, 0.5, 0.0])
K2D = RNG.normal(size=(3, 3, 2, 3))
K2D_G = RNG.normal(size=(2, 2, 1, 4))
K1D = RNG.normal(size=(3, 2, 3))
KT2D = RNG.normal(size=(3, 3, 3, 2))
KT1D = RNG.normal(size=(2, 3, 2))
DW = RNG.normal(size=(3, 3, 2, 2))
PW = RNG.normal(size=(1, 1, 4, 3))
GAMMA, BETA = RNG.uniform(0.5, 1.5, size=4), RNG.normal(size=4)
MEAN4, VAR4 = RNG.normal(size=4), RNG.uniform(0.5, 2, size=4)
KEYC = RNG.normal(size=(3, 2, 4))
BIAS = RNG.normal(size=(1, 2, 3, 3))
MASK = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=bool)
E45 = RNG.normal(size=(4, 5))
SEG = np.array([1, 0, 1])
WIN = RNG.uniform(0.5, 1.5, size=6)


def _cat(pair):
    return ops.concatenate(list(pair), axis=-1)


def _np_cat(pair):
    return np.concatenate(pair, axis=-1)


def _irfft_in(a, n):
    return np.fft.irfft(a[..., :a.shape[-1] // 2] + 1j * a[..., a.shape[-1] // 2:], n=n)


def _istft_ref(a, length, stride, fft_length, window="hann"):
    re, im = a[..., :a.shape[-1] // 2], a[..., a.shape[-1] // 2:]
    n = length
    win = np.pad(0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n), ((fft_length - n) // 2,
                                                                     fft_length - n - (fft_length - n) // 2))
    if window is None:
        return _istft_ref(a, fft_length, stride, fft_length, "ones") * fft_length / stride
    if window == "ones":
        win = np.ones(fft_length)
    seg = np.fft.irfft(re + 1j * im, n=fft_length) * win
    frames = seg.shape[-2]
    total = fft_length + stride * (frames - 1)
    y = np.zeros(seg.shape[:-2] + (total,))
    norm = np.zeros(total)
    for f in range(frames):
        y[..., f * stride:f * stride + fft_length] += seg[..., f, :]
        norm[f * stride:f * stride + fft_length] += win ** 2
    y = y / np.where(norm > 1e-10, norm, 1.0)
    return y[..., fft_length // 2:total - fft_length // 2]


# id: (op on the (batch, *shape) tensor, float64 numpy reference, the input's shape without the batch,
#      positive inputs only)
CASES = {
    "celu": (lambda t: ops.celu(t, alpha=0.7), lambda a: np.maximum(a, 0) + 0.7 * np.expm1(np.minimum(a, 0) / 0.7),
             (3, 4), False),
    "glu": (lambda t: ops.glu(t), lambda a: a[..., :2] * _sigmoid(a[..., 2:]), (3, 4), False),
    "glu_axis": (lambda t: ops.glu(t, axis=1), lambda a: a[:, :2] * _sigmoid(a[:, 2:]), (4, 3), False),
    "hard_shrink": (lambda t: ops.hard_shrink(t, threshold=0.4), lambda a: np.where(np.abs(a) > 0.4, a, 0), (3, 4),
                    False),
    "hard_silu": (lambda t: ops.hard_silu(t * 3.0), lambda a: 3 * a * np.clip(3 * a + 3, 0, 6) / 6, (3, 4), False),
    "sparse_sigmoid": (lambda t: ops.sparse_sigmoid(t * 2.0), lambda a: np.clip(2 * a + 1, 0, 2) / 2, (3, 4), False),
    "unfold": (lambda t: ops.unfold(t, 2, stride=(1, 2), padding=1),
               lambda a: _unfold_ref(a, (2, 2), (1, 1), (1, 1), (1, 2)), (2, 4, 5), False),
    "unfold_dilated": (lambda t: ops.unfold(t, (2, 3), dilation=2),
                       lambda a: _unfold_ref(a, (2, 3), (2, 2), (0, 0), (1, 1)), (2, 4, 5), False),
    "adaptive_average_pool": (lambda t: ops.adaptive_average_pool(t, (3, 2)),
                              lambda a: _adaptive_ref(a, (3, 2), "avg"), (5, 4, 2), False),
    "adaptive_max_pool": (lambda t: ops.adaptive_max_pool(t, (2, 3)), lambda a: _adaptive_ref(a, (2, 3), "max"),
                          (5, 4, 2), False),
    "adaptive_max_pool1d": (lambda t: ops.adaptive_max_pool(t, 4), lambda a: _adaptive_ref(a, (4,), "max"), (7, 2),
                            False),
    "hard_tanh": (lambda t: ops.hard_tanh(t * 2.0), lambda a: np.clip(2 * a, -1, 1), (3, 4), False),
    "soft_shrink": (lambda t: ops.soft_shrink(t), lambda a: np.sign(a) * np.maximum(np.abs(a) - 0.5, 0), (3, 4),
                    False),
    "sparse_plus": (lambda t: ops.sparse_plus(t * 2.0),
                    lambda a: np.where(2 * a <= -1, 0, np.where(2 * a >= 1, 2 * a, (2 * a + 1) ** 2 / 4)), (3, 4),
                    False),
    "sparsemax": (lambda t: ops.sparsemax(t), lambda a: _sparsemax(a), (3, 4), False),
    "sparsemax_axis": (lambda t: ops.sparsemax(t * 2.0, axis=1), lambda a: _sparsemax(2 * a, axis=1), (3, 4), False),
    "squareplus": (lambda t: ops.squareplus(t, b=2), lambda a: (a + np.sqrt(a * a + 2)) / 2, (3, 4), False),
    "tanh_shrink": (lambda t: ops.tanh_shrink(t * 2.0), lambda a: 2 * a - np.tanh(2 * a), (3, 4), False),
    "threshold": (lambda t: ops.threshold(t, 0.1, -2.0), lambda a: np.where(a > 0.1, a, -2.0), (3, 4), False),
    "erf": (lambda t: ops.erf(t * 1.5), lambda a: _erf(1.5 * a), (3, 4), False),
    "erfinv": (lambda t: ops.erfinv(t * 0.4 - 0.5), lambda a: _erfinv64(0.4 * a - 0.5), (3, 4), True),
    "multi_hot": (lambda t: t * ops.multi_hot(IDS, 4), lambda a: a * (IDS[..., None] == np.arange(4)).any(1),
                  (3, 4), False),
    "multi_hot_axis": (lambda t: t[:, :2] * ops.transpose(ops.multi_hot(IDS, 4, axis=0)),
                       lambda a: a[:, :2] * (IDS[None] == np.arange(4)[:, None, None]).any(1).T, (3, 4), False),
    "normalize": (lambda t: ops.normalize(t), lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True), (3, 4),
                  False),
    "normalize_l1": (lambda t: ops.normalize(t, axis=1, order=1), lambda a: a / np.abs(a).sum(1, keepdims=True),
                     (3, 4), False),
    "psnr": (lambda t: t * ops.psnr(t, C34, 3.0),
             lambda a: a * (20 * np.log10(3.0) - 10 * np.log10(np.mean((a - C34) ** 2))), (3, 4), False),
    "layer_normalization": (lambda t: ops.layer_normalization(t, GAMMA, BETA, epsilon=1e-3),
                            lambda a: (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-3)
                            * GAMMA + BETA, (3, 4), False),
    "layer_normalization_axes": (lambda t: ops.layer_normalization(t, axis=(1, 2)),
                                 lambda a: (a - a.mean((1, 2), keepdims=True)) /
                                 np.sqrt(a.var((1, 2), keepdims=True) + 1e-7), (3, 4), False),
    "rms_normalization": (lambda t: ops.rms_normalization(t, GAMMA, epsilon=1e-4),
                          lambda a: a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-4) * GAMMA, (3, 4), False),
    "batch_normalization": (lambda t: ops.batch_normalization(t, MEAN4, VAR4, axis=-1, offset=BETA, scale=GAMMA),
                            lambda a: (a - MEAN4) / np.sqrt(VAR4 + 1e-3) * GAMMA + BETA, (3, 4), False),
    "categorical_crossentropy_logits": (lambda t: ops.categorical_crossentropy(P34, t, from_logits=True),
                                        lambda a: -(P34 * np.log(_softmax(a))).sum(-1), (3, 4), False),
    "categorical_crossentropy_probs": (lambda t: ops.categorical_crossentropy(P34, t, axis=1),
                                       lambda a: -(P34 * np.log(np.clip(a / a.sum(1, keepdims=True), 1e-7,
                                                                        1 - 1e-7))).sum(1), (3, 4), True),
    "sparse_categorical_crossentropy": (
        lambda t: ops.sparse_categorical_crossentropy(ops.greater(t[..., 0], 0.0) * 2.0, t, from_logits=True),
        lambda a: -np.log(np.take_along_axis(_softmax(a), 2 * (a[..., :1] > 0), -1))[..., 0], (3, 4),
        False),
    "sparse_categorical_crossentropy_probs": (
        lambda t: ops.sparse_categorical_crossentropy(ops.greater(t[..., 0], 1.0) * 3.0, t),
        lambda a: -np.log(np.take_along_axis(a / a.sum(-1, keepdims=True), 3 * (a[..., :1] > 1),
                                             -1))[..., 0], (3, 4), True),
    "binary_crossentropy_logits": (lambda t: ops.binary_crossentropy(B34, t, from_logits=True),
                                   lambda a: -(B34 * np.log(_sigmoid(a)) + (1 - B34) * np.log(1 - _sigmoid(a))),
                                   (3, 4), False),
    "binary_crossentropy_probs": (lambda t: ops.binary_crossentropy(B34, t * 0.5),
                                  lambda a: -(B34 * np.log(a / 2) + (1 - B34) * np.log(1 - a / 2)), (3, 4), True),
    "dot_product_attention": (lambda t: ops.dot_product_attention(t, t * 0.5 + KEYC, t),
                              lambda a: _attention_ref(a, a * 0.5 + KEYC, a), (3, 2, 4), False),
    "dot_product_attention_bias_mask_causal": (
        lambda t: ops.dot_product_attention(t, t + KEYC, t * 2.0, bias=BIAS, mask=MASK, scale=0.3, is_causal=True),
        lambda a: _attention_ref(a, a + KEYC, 2 * a, BIAS, MASK, 0.3, True), (3, 2, 4), False),
    "dot_product_attention_grouped": (
        lambda t: ops.dot_product_attention(t, (t + KEYC)[:, :, :1], t[:, :, 1:]),
        lambda a: _attention_ref(a, (a + KEYC)[:, :, :1], a[:, :, 1:]), (3, 2, 4), False),
    "conv2d_valid": (lambda t: ops.conv(t, K2D), lambda a: _conv_ref(a, K2D), (5, 4, 2), False),
    "conv2d_same_strided": (lambda t: ops.conv(t, K2D, strides=2, padding="same"),
                            lambda a: _conv_ref(a, K2D, 2, "same"), (5, 4, 2), False),
    "conv2d_dilated_same": (lambda t: ops.conv(t, K2D, padding="same", dilation_rate=2),
                            lambda a: _conv_ref(a, K2D, 1, "same", 2), (5, 4, 2), False),
    "conv2d_groups": (lambda t: ops.conv(t, K2D_G, strides=(1, 2)), lambda a: _conv_ref(a, K2D_G, (1, 2)),
                      (4, 4, 2), False),
    "conv2d_channels_first": (lambda t: ops.conv(t, K2D, data_format="channels_first"),
                              lambda a: _conv_ref(a.transpose(0, 2, 3, 1), K2D).transpose(0, 3, 1, 2), (2, 4, 5),
                              False),
    "conv1d_same": (lambda t: ops.conv(t, K1D, padding="same"), lambda a: _conv_ref(a, K1D, 1, "same"), (6, 2),
                    False),
    "conv_transpose2d": (lambda t: ops.conv_transpose(t, KT2D, strides=2),
                         lambda a: _conv_transpose_ref(a, KT2D, 2), (3, 2, 2), False),
    "conv_transpose2d_same": (lambda t: ops.conv_transpose(t, KT2D, strides=2, padding="same"),
                              lambda a: _conv_transpose_ref(a, KT2D, 2, "same"), (3, 2, 2), False),
    "conv_transpose2d_output_padding": (
        lambda t: ops.conv_transpose(t, KT2D, strides=2, padding="same", output_padding=1),
        lambda a: _conv_transpose_ref(a, KT2D, 2, "same", 1), (3, 2, 2), False),
    "conv_transpose1d": (lambda t: ops.conv_transpose(t, KT1D, strides=3),
                         lambda a: _conv_transpose_ref(a, KT1D, 3), (4, 2), False),
    "depthwise_conv": (lambda t: ops.depthwise_conv(t, DW, padding="same"),
                       lambda a: _depthwise_ref(a, DW, 1, "same"), (4, 5, 2), False),
    "depthwise_conv_strided": (lambda t: ops.depthwise_conv(t, DW, strides=2),
                               lambda a: _depthwise_ref(a, DW, 2), (5, 5, 2), False),
    "separable_conv": (lambda t: ops.separable_conv(t, DW, PW, padding="same"),
                       lambda a: _depthwise_ref(a, DW, 1, "same") @ PW[0, 0], (4, 4, 2), False),
    "max_pool": (lambda t: ops.max_pool(t, 2), lambda a: _pool_ref(a, 2, None, "valid", "max"), (4, 5, 2), False),
    "max_pool_same": (lambda t: ops.max_pool(t, 3, strides=2, padding="same"),
                      lambda a: _pool_ref(a, 3, 2, "same", "max"), (5, 4, 2), False),
    "average_pool_same": (lambda t: ops.average_pool(t, (2, 3), strides=(2, 2), padding="same"),
                          lambda a: _pool_ref(a, (2, 3), (2, 2), "same", "avg"), (5, 4, 2), False),
    "average_pool1d": (lambda t: ops.average_pool(t, 2, strides=1), lambda a: _pool_ref(a, 2, 1, "valid", "avg"),
                       (5, 3), False),
    "max_pool1d_channels_first": (lambda t: ops.max_pool(t, 2, data_format="channels_first"),
                                  lambda a: _pool_ref(a.transpose(0, 2, 1), 2, None, "valid", "max").transpose(0, 2, 1),
                                  (3, 6), False),
    "einsum_matmul": (lambda t: ops.einsum("bij,jk->bik", t, E45), lambda a: a @ E45, (3, 4), False),
    "einsum_transpose": (lambda t: ops.einsum("bij->bji", t), lambda a: a.transpose(0, 2, 1), (3, 4), False),
    "einsum_gram": (lambda t: ops.einsum("bij,bik->bjk", t, t * 2.0), lambda a: np.einsum("bij,bik->bjk", a, 2 * a),
                    (3, 4), False),
    "einsum_sum_implicit": (lambda t: ops.einsum("bij", t), lambda a: a, (3, 4), False),
    "einsum_ellipsis_outer": (lambda t: ops.einsum("...i,j->...ij", t, E45[0]),
                              lambda a: np.einsum("...i,j->...ij", a, E45[0]), (3, 4), False),
    "einsum_reduce": (lambda t: ops.einsum("bij,ij->bi", t, C34), lambda a: (a * C34).sum(-1), (3, 4), False),
    "einsum_diagonal": (lambda t: ops.einsum("bii->bi", t), lambda a: np.einsum("bii->bi", a), (3, 3), False),
    "einsum_trace_product": (lambda t: ops.einsum("bij,bji->b", t, t), lambda a: np.einsum("bij,bji->b", a, a),
                             (3, 3), False),
    "einsum_three_operands": (lambda t: ops.einsum("bij,jk,bkl->bil", t, E45[:, :1],
                                                   ops.transpose(t, (0, 2, 1))[:, :1]),
                              lambda a: np.einsum("bij,jk,bkl->bil", a, E45[:, :1], a.transpose(0, 2, 1)[:, :1]),
                              (3, 4), False),
    "in_top_k": (lambda t: t * ops.expand_dims(ops.expand_dims(
        ops.in_top_k(ops.greater(t[:, 0, 0], 0.0) * 3.0, ops.sum(t, axis=1), 2), -1), -1),
        lambda a: a * (np.argsort(-a.sum(1), -1)[:, :2] == 3 * (a[:, :1, 0] > 0)).any(-1)[:, None, None],
        (3, 4), False),
    "segment_sum": (lambda t: ops.transpose(ops.segment_sum(ops.transpose(t, (1, 0, 2)), SEG, num_segments=3),
                                            (1, 0, 2)),
                    lambda a: np.stack([a[:, SEG == s].sum(1) for s in range(3)], 1), (3, 4), False),
    "segment_max": (lambda t: ops.transpose(ops.segment_max(ops.transpose(t, (1, 0, 2)), SEG, num_segments=2),
                                            (1, 0, 2)),
                    lambda a: np.stack([a[:, SEG == s].max(1) for s in range(2)], 1), (3, 4), False),
    "extract_sequences": (lambda t: ops.extract_sequences(t, 3, 2),
                          lambda a: np.stack([a[..., i * 2:i * 2 + 3] for i in range(3)], -2), (2, 8), False),
    "rfft": (lambda t: _cat(ops.rfft(t)), lambda a: _np_cat((np.fft.rfft(a).real, np.fft.rfft(a).imag)), (3, 8),
             False),
    "rfft_length": (lambda t: _cat(ops.rfft(t, fft_length=6)),
                    lambda a: _np_cat((np.fft.rfft(a, 6).real, np.fft.rfft(a, 6).imag)), (3, 8), False),
    "irfft": (lambda t: ops.irfft((t[..., :5], t[..., 5:])), lambda a: _irfft_in(a, 8), (3, 10), False),
    "irfft_odd": (lambda t: ops.irfft((t[..., :5], t[..., 5:]), fft_length=9), lambda a: _irfft_in(a, 9), (3, 10),
                  False),
    "stft": (lambda t: _cat(ops.stft(t, 6, 3, 8)), lambda a: _np_cat(_stft_ref(a, 6, 3, 8)), (14,), False),
    "stft_no_center": (lambda t: _cat(ops.stft(t, 8, 4, 8, window=None, center=False)),
                       lambda a: _np_cat(_stft_ref(a, 8, 4, 8, None, False)), (2, 16), False),
    "istft": (lambda t: ops.istft((t[..., :5], t[..., 5:]), 6, 2, 8), lambda a: _istft_ref(a, 6, 2, 8), (5, 10),
              False),
    "istft_stride_not_dividing": (lambda t: ops.istft((t[..., :5], t[..., 5:]), 7, 3, 8, length=9),
                                  lambda a: _istft_ref(a, 7, 3, 8)[..., :9], (5, 10), False),
    "istft_no_window": (lambda t: ops.istft((t[..., :5], t[..., 5:]), 8, 4, 8, window=None),
                        lambda a: _istft_ref(a, 8, 4, 8, None), (5, 10), False),
    "polar": (lambda t: _cat(ops.polar(t, t * 2.0)), lambda a: _np_cat((a * np.cos(2 * a), a * np.sin(2 * a))),
              (3, 4), False),
    "pad_constant": (lambda t: ops.pad(t, [(0, 0), (1, 2), (0, 1)], constant_values=0.5),
                     lambda a: np.pad(a, [(0, 0), (1, 2), (0, 1)], constant_values=0.5), (3, 4), False),
    "pad_reflect": (lambda t: ops.pad(t, [(0, 0), (2, 1), (1, 3)], mode="reflect"),
                    lambda a: np.pad(a, [(0, 0), (2, 1), (1, 3)], mode="reflect"), (3, 4), False),
    "pad_symmetric": (lambda t: ops.pad(t, [(0, 0), (1, 1), (2, 0)], mode="symmetric"),
                      lambda a: np.pad(a, [(0, 0), (1, 1), (2, 0)], mode="symmetric"), (3, 4), False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient_in_a_model(name):
    fn, ref, shape, positive = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))          # the same values in any test order
    x = rng.uniform(0.5, 1.5, size=(2,) + shape) if positive else rng.normal(size=(2,) + shape)
    w = rng.uniform(0.6, 1.4, size=shape)
    check_op_in_model(fn, ref, x, w, rng, atol=5e-5)


# --- gradients with respect to a kernel (a layer's weight) -------------------------------------------

class _KernelLayer(pg.layers.Layer):
    def __init__(self, fn, kernel_shape, **kw):
        super().__init__(**kw)
        self.fn, self.kernel_shape = fn, kernel_shape

    def build(self, input_shape):
        self.k = self.add_weight("k", self.kernel_shape, "ones")

    def call(self, x):
        return self.fn(x, self.k)


@pytest.mark.parametrize("name, fn, ref, x_shape, k_shape", [
    ("conv", lambda x, k: ops.conv(x, k, strides=2, padding="same"), lambda x, k: _conv_ref(x, k, 2, "same"),
     (5, 4, 2), (3, 3, 2, 3)),
    ("conv1d_dilated", lambda x, k: ops.conv(x, k, dilation_rate=2), lambda x, k: _conv_ref(x, k, 1, "valid", 2),
     (7, 2), (2, 2, 3)),
    ("conv_transpose", lambda x, k: ops.conv_transpose(x, k, strides=2, padding="same"),
     lambda x, k: _conv_transpose_ref(x, k, 2, "same"), (3, 2, 2), (3, 3, 3, 2)),
    ("depthwise_conv", lambda x, k: ops.depthwise_conv(x, k, padding="same"),
     lambda x, k: _depthwise_ref(x, k, 1, "same"), (4, 4, 2), (3, 3, 2, 2)),
    ("separable_pointwise", lambda x, k: ops.separable_conv(x, DW[:2, :2], k),
     lambda x, k: _depthwise_ref(x, DW[:2, :2]) @ k[0, 0], (4, 4, 2), (1, 1, 4, 3)),
])
def test_kernel_gradients_through_a_model(name, fn, ref, x_shape, k_shape):
    x = RNG.normal(size=(2,) + x_shape)
    k = RNG.normal(size=k_shape)
    m = pg.Sequential([pg.Input(x_shape), _KernelLayer(fn, k_shape)])
    m.compile(loss="mse", optimizer="sgd")
    m.set_weights({n: k.astype(np.float32) for n in m.get_weights()})
    want = ref(x, k)
    np.testing.assert_allclose(m.predict(x.astype(np.float32), verbose=0), want, rtol=1e-4, atol=1e-4)
    y = RNG.normal(size=want.shape)
    (g,) = m.gradients(x.astype(np.float32), y.astype(np.float32)).values()
    num = np.zeros_like(k)
    h = 1e-6
    for i in np.ndindex(*k.shape):
        d = np.zeros_like(k)
        d[i] = h
        num[i] = (np.mean((ref(x, k + d) - y) ** 2) - np.mean((ref(x, k - d) - y) ** 2)) / (2 * h)
    np.testing.assert_allclose(g, num, rtol=2e-3, atol=2e-4)
    m.free()


def test_a_model_with_a_kernel_from_ops_conv_trains():
    x = RNG.normal(size=(16, 6, 6, 1)).astype(np.float32)
    k_true = RNG.normal(size=(3, 3, 1, 2))
    y = _conv_ref(x.astype(np.float64), k_true, 1, "same").astype(np.float32)
    m = pg.Sequential([pg.Input((6, 6, 1)), _KernelLayer(lambda t, k: ops.conv(t, k, padding="same"), (3, 3, 1, 2))])
    m.compile(loss="mse", optimizer=pg.optimizers.Adam(0.1))
    before = m.evaluate(x, y, verbose=0)
    m.fit(x, y, epochs=100, batch_size=16, verbose=0)
    assert m.evaluate(x, y, verbose=0) < 0.01 * before          # the kernel is recovered
    m.free()


# --- PyTorch parity -----------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("strides, padding, dilation, groups", [
    (1, "valid", 1, 1), (2, "valid", 1, 1), (1, "same", 1, 1), (1, "same", 2, 1), (2, "valid", 1, 2),
    (1, "valid", 2, 2), (2, "valid", 2, 1),
])
def test_conv_matches_pytorch(strides, padding, dilation, groups):
    torch = _torch()
    x = RNG.normal(size=(2, 7, 6, 4)).astype(np.float32)
    k = RNG.normal(size=(3, 2, 4 // groups, 6)).astype(np.float32)
    got = ops.conv(x, k, strides=strides, padding=padding, dilation_rate=dilation)
    want = torch.nn.functional.conv2d(torch.tensor(x).permute(0, 3, 1, 2), torch.tensor(k).permute(3, 2, 0, 1),
                                      stride=strides, padding=padding, dilation=dilation, groups=groups)
    np.testing.assert_allclose(got, want.permute(0, 2, 3, 1).numpy(), rtol=1e-4, atol=1e-4)
    x1 = RNG.normal(size=(2, 9, 4)).astype(np.float32)
    k1 = RNG.normal(size=(3, 4 // groups, 5 if groups == 1 else 4)).astype(np.float32)
    got = ops.conv(x1, k1, strides=strides, padding=padding, dilation_rate=dilation)
    want = torch.nn.functional.conv1d(torch.tensor(x1).permute(0, 2, 1), torch.tensor(k1).permute(2, 1, 0),
                                      stride=strides, padding=padding, dilation=dilation, groups=groups)
    np.testing.assert_allclose(got, want.permute(0, 2, 1).numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k, strides, padding, output_padding", [
    (3, 2, "valid", None), (3, 2, "same", None), (4, 2, "same", None), (2, 3, "valid", None), (3, 2, "same", 1),
    (3, 1, "same", None), (3, 2, "valid", 1),
])
def test_conv_transpose_matches_pytorch(k, strides, padding, output_padding):
    torch = _torch()
    x = RNG.normal(size=(2, 4, 3, 3)).astype(np.float32)
    w = RNG.normal(size=(k, k, 2, 3)).astype(np.float32)                 # (kh, kw, out, in)
    got = ops.conv_transpose(x, w, strides=strides, padding=padding, output_padding=output_padding)
    full = torch.nn.functional.conv_transpose2d(torch.tensor(x).permute(0, 3, 1, 2),
                                                torch.tensor(w).permute(3, 2, 0, 1), stride=strides)
    full = full.permute(0, 2, 3, 1).numpy()
    # Keras's window of the full transposed convolution (left pad of the zero-inserted input)
    if padding == "valid":
        left = k - 1
    else:
        total = strides + k - 2 if output_padding is None else k + k % 2 - 2 + output_padding
        left = min(total // 2 + total % 2, k - 1)
    crop = k - 1 - left
    want = np.zeros_like(got)
    h = min(got.shape[1], full.shape[1] - crop)
    wd = min(got.shape[2], full.shape[2] - crop)
    want[:, :h, :wd] = full[:, crop:crop + h, crop:crop + wd]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_dilated_conv_transpose_matches_pytorch():
    torch = _torch()
    x = RNG.normal(size=(2, 4, 3, 3)).astype(np.float32)
    w = RNG.normal(size=(3, 2, 2, 3)).astype(np.float32)
    want = torch.nn.functional.conv_transpose2d(torch.tensor(x).permute(0, 3, 1, 2),
                                                torch.tensor(w).permute(3, 2, 0, 1), dilation=2)
    np.testing.assert_allclose(ops.conv_transpose(x, w, dilation_rate=2), want.permute(0, 2, 3, 1).numpy(),
                               rtol=1e-4, atol=1e-4)


def test_depthwise_and_separable_conv_match_pytorch():
    torch = _torch()
    x = RNG.normal(size=(2, 6, 5, 3)).astype(np.float32)
    dw = RNG.normal(size=(3, 3, 3, 2)).astype(np.float32)
    pw = RNG.normal(size=(1, 1, 6, 4)).astype(np.float32)
    tx = torch.tensor(x).permute(0, 3, 1, 2)
    tdw = torch.tensor(dw).reshape(3, 3, 6).permute(2, 0, 1)[:, None]
    want = torch.nn.functional.conv2d(tx, tdw, stride=2, groups=3)
    np.testing.assert_allclose(ops.depthwise_conv(x, dw, strides=2), want.permute(0, 2, 3, 1).numpy(), rtol=1e-4,
                               atol=1e-4)
    want = torch.nn.functional.conv2d(tx, tdw, dilation=2, groups=3)
    np.testing.assert_allclose(ops.depthwise_conv(x, dw, dilation_rate=2), want.permute(0, 2, 3, 1).numpy(),
                               rtol=1e-4, atol=1e-4)
    x1 = RNG.normal(size=(2, 9, 3)).astype(np.float32)
    dw1 = RNG.normal(size=(3, 3, 2)).astype(np.float32)
    want = torch.nn.functional.conv1d(torch.tensor(x1).permute(0, 2, 1),
                                      torch.tensor(dw1).reshape(3, 6).permute(1, 0)[:, None], stride=2, groups=3)
    np.testing.assert_allclose(ops.depthwise_conv(x1, dw1, strides=2), want.permute(0, 2, 1).numpy(), rtol=1e-4,
                               atol=1e-4)
    mid = torch.nn.functional.conv2d(tx, tdw, padding=1, groups=3)
    want = torch.nn.functional.conv2d(mid, torch.tensor(pw).permute(3, 2, 0, 1))
    np.testing.assert_allclose(ops.separable_conv(x, dw, pw, padding="same"), want.permute(0, 2, 3, 1).numpy(),
                               rtol=1e-4, atol=1e-4)


def test_unfold_matches_pytorch():
    torch = _torch()
    x = RNG.normal(size=(2, 3, 6, 5)).astype(np.float32)
    for kw in ({"kernel_size": 3}, {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": 2}):
        want = torch.nn.functional.unfold(torch.tensor(x), **kw).numpy()
        np.testing.assert_allclose(ops.unfold(x, **kw), want, rtol=1e-6)


def test_adaptive_pooling_matches_pytorch():
    torch = _torch()
    F = torch.nn.functional
    x = RNG.normal(size=(2, 7, 5, 3)).astype(np.float32)
    tx = torch.tensor(x).permute(0, 3, 1, 2)
    for size in ((3, 2), (7, 4), 1):
        np.testing.assert_allclose(ops.adaptive_average_pool(x, size),
                                   F.adaptive_avg_pool2d(tx, size).permute(0, 2, 3, 1).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ops.adaptive_max_pool(x, size),
                                   F.adaptive_max_pool2d(tx, size).permute(0, 2, 3, 1).numpy(), rtol=1e-6)
    x1 = np.ascontiguousarray(x[:, :, 0].transpose(0, 2, 1))         # (batch, channels, 7)
    np.testing.assert_allclose(ops.adaptive_average_pool(x1, 3, data_format="channels_first"),
                               F.adaptive_avg_pool1d(torch.tensor(x1), 3).numpy(), rtol=1e-5, atol=1e-6)


def test_pooling_matches_pytorch():
    torch = _torch()
    F = torch.nn.functional
    x = RNG.normal(size=(2, 6, 5, 3)).astype(np.float32)
    tx = torch.tensor(x).permute(0, 3, 1, 2)

    def back(t):
        return t.permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(ops.max_pool(x, 2), back(F.max_pool2d(tx, 2)), rtol=1e-6)
    np.testing.assert_allclose(ops.average_pool(x, (3, 2), strides=(1, 2)), back(F.avg_pool2d(tx, (3, 2), (1, 2))),
                               rtol=1e-5, atol=1e-6)
    # "same" with a window of 3 and stride 1 pads one cell each side; the average counts real cells only
    np.testing.assert_allclose(ops.max_pool(x, 3, strides=1, padding="same"),
                               back(F.max_pool2d(tx, 3, 1, padding=1)), rtol=1e-6)
    np.testing.assert_allclose(ops.average_pool(x, 3, strides=1, padding="same"),
                               back(F.avg_pool2d(tx, 3, 1, padding=1, count_include_pad=False)), rtol=1e-5, atol=1e-6)
    x1 = RNG.normal(size=(2, 7, 3)).astype(np.float32)
    np.testing.assert_allclose(ops.max_pool(x1, 3, strides=2),
                               F.max_pool1d(torch.tensor(x1).permute(0, 2, 1), 3, 2).permute(0, 2, 1).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("kind", ["plain", "mask", "causal", "grouped", "scale"])
def test_dot_product_attention_matches_pytorch(kind):
    torch = _torch()
    q = RNG.normal(size=(2, 4, 4, 8)).astype(np.float32)
    k = RNG.normal(size=(2, 5, 2 if kind == "grouped" else 4, 8)).astype(np.float32)
    v = RNG.normal(size=k.shape[:3] + (6,)).astype(np.float32)
    mask = RNG.uniform(size=(2, 1, 4, 5)) > 0.3
    mask[..., 0] = True
    kwargs = {"mask": mask} if kind == "mask" else {"is_causal": True} if kind == "causal" else \
        {"scale": 0.2} if kind == "scale" else {}
    got = ops.dot_product_attention(q, k, v, **kwargs)
    tq, tk, tv = (torch.tensor(a).permute(0, 2, 1, 3) for a in (q, k, v))
    tkw = {"attn_mask": torch.tensor(mask)} if kind == "mask" else {"scale": 0.2} if kind == "scale" else {}
    if kind == "causal":
        tkw = {"attn_mask": torch.tril(torch.ones(4, 5, dtype=torch.bool))}      # Keras's: top-left aligned
    if kind == "grouped":
        tkw = {"enable_gqa": True}
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **tkw).permute(0, 2, 1, 3).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_dot_product_attention_three_d_inputs_and_soft_cap():
    q, k, v = (RNG.normal(size=(2, n, 4)) for n in (3, 5, 5))
    np.testing.assert_allclose(ops.dot_product_attention(q, k, v),
                               _attention_ref(q[:, :, None], k[:, :, None], v[:, :, None])[:, :, 0], rtol=1e-5,
                               atol=1e-6)
    q, k, v = (RNG.normal(size=(1, n, 2, 4)) * 3 for n in (3, 5, 5))
    logits = np.einsum("bthd,bshd->bhts", q, k) / 2.0
    want = np.einsum("bhts,bshd->bthd", _softmax(1.5 * np.tanh(logits / 1.5)), v)
    np.testing.assert_allclose(ops.dot_product_attention(q, k, v, attn_logits_soft_cap=1.5), want, rtol=1e-5,
                               atol=1e-5)


def test_ctc_loss_matches_pytorch():
    torch = _torch()
    logits = RNG.normal(size=(3, 8, 5)).astype(np.float32)
    target = np.array([[1, 2, 2, 0], [3, 1, 0, 0], [4, 4, 4, 1]])
    tlen = np.array([3, 2, 4])
    olen = np.array([8, 6, 8])
    got = ops.ctc_loss(target, logits, tlen, olen, mask_index=0)
    want = torch.nn.functional.ctc_loss(torch.log_softmax(torch.tensor(logits), -1).permute(1, 0, 2),
                                        torch.tensor(target), torch.tensor(olen), torch.tensor(tlen), blank=0,
                                        reduction="none", zero_infinity=False).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = ops.ctc_loss(np.where(target == 0, 4, target - 1) % 4, logits, tlen, olen, mask_index=4)
    want = torch.nn.functional.ctc_loss(torch.log_softmax(torch.tensor(logits), -1).permute(1, 0, 2),
                                        torch.tensor(np.where(target == 0, 4, target - 1) % 4), torch.tensor(olen),
                                        torch.tensor(tlen), blank=4, reduction="none").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)


# --- eager calls on arrays ------------------------------------------------------------------------------

def test_activations_and_norms_on_arrays():
    a = RNG.normal(size=(3, 5)) * 2
    np.testing.assert_allclose(ops.celu(a), np.maximum(a, 0) + np.expm1(np.minimum(a, 0)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.glu(a[:, :4]), a[:, :2] * _sigmoid(a[:, 2:4]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.hard_silu(a), ops.hard_swish(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.hard_tanh(a), np.clip(a, -1, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.soft_shrink(a, 1.0), np.sign(a) * np.maximum(np.abs(a) - 1, 0), atol=1e-6)
    np.testing.assert_allclose(ops.hard_shrink(a), np.where(np.abs(a) > 0.5, a, 0), atol=1e-6)
    np.testing.assert_allclose(ops.sparse_plus(a), np.where(a <= -1, 0, np.where(a >= 1, a, (a + 1) ** 2 / 4)),
                               atol=1e-6)
    s = ops.sparsemax(a)
    np.testing.assert_allclose(s, _sparsemax(a), atol=1e-6)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-5, atol=1e-6)
    # (for a far below 0 the sum cancels: float32's error is that of |a|, not of the small result)
    np.testing.assert_allclose(ops.squareplus(a), (a + np.sqrt(a * a + 4)) / 2, rtol=1e-5,
                               atol=2e-7 * np.abs(a).max())
    np.testing.assert_allclose(ops.tanh_shrink(a), a - np.tanh(a), atol=1e-6)
    np.testing.assert_allclose(ops.threshold(a, 0.0, 7.0), np.where(a > 0, a, 7.0), rtol=1e-5)
    np.testing.assert_allclose(ops.normalize(a, axis=0), a / np.linalg.norm(a, axis=0), rtol=1e-5)
    np.testing.assert_allclose(ops.normalize(a, order=3), a / (np.abs(a) ** 3).sum(-1, keepdims=True) ** (1 / 3),
                               rtol=1e-4)
    np.testing.assert_allclose(ops.psnr(a, a + 0.1, 1.0), 20.0, rtol=1e-4)
    np.testing.assert_allclose(ops.layer_normalization(a, np.arange(5.0), np.ones(5), rms_scaling=True),
                               a / np.sqrt(a.var(-1, keepdims=True) + 1e-7) * np.arange(5.0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.rms_normalization(a, (10,)), 10 * a / np.sqrt((a * a).mean(-1, keepdims=True)
                                                                                   + 1e-7), rtol=1e-5)
    np.testing.assert_allclose(ops.rms_normalization(a), a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-7),
                               rtol=1e-5)
    np.testing.assert_allclose(ops.batch_normalization(a, a.mean(0), a.var(0), axis=1),
                               (a - a.mean(0)) / np.sqrt(a.var(0) + 1e-3), rtol=1e-4, atol=1e-5)


def test_erf_and_erfinv_on_arrays():
    y = np.array([-0.999, -0.5, 0.0, 0.1, 0.5, 0.9, 0.999999])
    np.testing.assert_allclose(ops.erf(np.array([0.5, -1.0, 3.0])), _erf(np.array([0.5, -1.0, 3.0])), rtol=1e-7)
    z = ops.erfinv(y)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z[4], 0.4769362762044699, rtol=1e-6)
    np.testing.assert_allclose(_erf(z.astype(np.float64)), y, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(ops.erfinv(np.array([1.0, -1.0])), [np.inf, -np.inf])
    assert np.isnan(ops.erfinv(np.array([1.5]))).all()
    # in a graph (Giles's approximation), both of its ranges
    y = np.array([-0.9999, -0.999, -0.3, 0.0, 0.2, 0.95, 0.9995])
    got = _eager_call(lambda t: ops.erfinv(t), y)
    np.testing.assert_allclose(got, _erfinv64(y.astype(np.float32).astype(np.float64)), rtol=2e-5, atol=1e-7)


def test_losses_on_arrays_follow_keras():
    t = np.eye(3)[[0, 2, 1, 1]]
    p = _softmax(RNG.normal(size=(4, 3)))
    np.testing.assert_allclose(ops.categorical_crossentropy(t, p), -(t * np.log(p)).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(ops.sparse_categorical_crossentropy(np.array([0, 2, 1, 1]), p),
                               -(t * np.log(p)).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(ops.sparse_categorical_crossentropy(np.array([[0], [2], [1], [1]]), np.log(p),
                                                                   from_logits=True), -(t * np.log(p)).sum(-1),
                               rtol=1e-5)
    # a probability of 0 is clipped to 1e-7 (Keras's epsilon), not -log(0)
    np.testing.assert_allclose(ops.binary_crossentropy(np.array([1.0, 0.0]), np.array([0.0, 0.0])),
                               [-np.log(1e-7), -np.log(1 - 1e-7)], rtol=1e-4, atol=3e-8)
    z = np.array([-30.0, 0.5, 30.0])
    np.testing.assert_allclose(ops.binary_crossentropy(np.array([1.0, 1.0, 0.0]), z, from_logits=True),
                               [30.0, np.log1p(np.exp(-0.5)), 30.0], rtol=1e-5)


def test_multi_hot_in_top_k_and_segments_on_arrays():
    np.testing.assert_array_equal(ops.multi_hot(np.array([[0, 3, 3], [1, 2, 1]]), 4), [[1, 0, 0, 1], [0, 1, 1, 0]])
    np.testing.assert_array_equal(ops.multi_hot(np.array([2, 0]), num_classes=3), [1, 0, 1])
    np.testing.assert_array_equal(ops.multi_hot(np.array([[1]]), num_tokens=2, dtype="int32"), [[0, 1]])
    # Keras's axis: the one-hot axis placed there, then axis 1 reduced
    np.testing.assert_array_equal(ops.multi_hot(np.array([[0, 2], [1, 1]]), 3, axis=0), [[1, 0], [1, 1], [0, 1]])
    p = np.array([[0.1, 0.5, 0.5, 0.2], [0.9, 0.0, 0.3, 0.3]])
    got = ops.in_top_k(np.array([2, 3]), p, 1)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, [True, False])                # a tie with the largest counts in
    np.testing.assert_array_equal(ops.in_top_k(np.array([2, 3]), p, 2), [True, True])
    d = RNG.normal(size=(5, 2))
    ids = np.array([2, 0, 2, 2, 5])
    want = np.zeros((3, 2))
    for i, s in enumerate(ids):
        if s < 3:
            want[s] += d[i]
    np.testing.assert_allclose(ops.segment_sum(d, ids, num_segments=3), want, rtol=1e-6)
    got = ops.segment_max(d[:4], ids[:4])
    assert got.shape == (3, 2)
    np.testing.assert_allclose(got[0], d[1], rtol=1e-6)
    np.testing.assert_allclose(got[2], d[[0, 2, 3]].max(0), rtol=1e-6)
    assert (got[1] == np.finfo(np.float32).min).all()                 # an empty segment


def test_variables_outside_a_graph_are_their_values():
    v = pg.Variable("v", (3, 4), "ones")
    np.testing.assert_allclose(ops.einsum("ij->j", v), np.full(4, 3.0))
    np.testing.assert_allclose(ops.celu(v), np.ones((3, 4)))
    np.testing.assert_allclose(ops.rfft(v)[0][:, 0], np.full(3, 4.0))
    np.testing.assert_allclose(ops.segment_sum(v, np.array([0, 0, 1])), [[2.0] * 4, [1.0] * 4])


def test_einsum_on_arrays_is_numpy_s():
    a, b = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(4, 5))
    for eq, args in [("ijk,kl->ijl", (a, b)), ("ii->i", (b[:4, :4],)), ("ijk->", (a,)), ("...k,kl", (a, b)),
                     ("bij,bkj->bik", (a, a)), ("i,j,k->ijk", (b[0], b[1], b[2]))]:
        np.testing.assert_allclose(ops.einsum(eq, *args), np.einsum(eq, *args), rtol=1e-5, atol=1e-6)


def test_sequences_and_fourier_transforms_on_arrays():
    x = RNG.normal(size=(2, 20))
    np.testing.assert_array_equal(ops.extract_sequences(np.arange(7.0), 3, 2), [[0, 1, 2], [2, 3, 4], [4, 5, 6]])
    re, im = ops.rfft(x, fft_length=16)
    np.testing.assert_allclose(re + 1j * im, np.fft.rfft(x, 16), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ops.irfft((re, im)), np.fft.irfft(np.fft.rfft(x, 16)), rtol=1e-5, atol=1e-5)
    sr, si = ops.stft(x, 10, 4, 16)
    wr, wi = _stft_ref(x, 10, 4, 16)
    np.testing.assert_allclose(sr, wr, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(si, wi, rtol=1e-5, atol=1e-5)
    # istft undoes stft (the overlapped windows cover every sample)
    np.testing.assert_allclose(ops.istft((sr, si), 10, 4, 16, length=20), x, rtol=1e-4, atol=1e-5)
    sr, si = ops.stft(x, 8, 2, 8, window="hamming", center=False)
    np.testing.assert_allclose(ops.istft((sr, si), 8, 2, 8, window="hamming", center=False), x, rtol=1e-4,
                               atol=1e-5)
    # no window: Keras's scaling, the plain overlap-add (here two frames cover every sample)
    plain = ops.stft(x, 8, 4, 8, window=None)
    np.testing.assert_allclose(ops.istft(plain, 8, 4, 8, window=None, length=20), 2 * x, rtol=1e-4, atol=1e-5)
    r, i = ops.polar(np.array([2.0, 1.0]), np.array([0.0, np.pi / 2]))
    np.testing.assert_allclose(r + 1j * i, [2.0, 1j], atol=1e-7)


def test_pad_on_arrays_and_ggml_s_pad_on_low_level_tensors():
    a = np.arange(6.0).reshape(2, 3)
    for mode in ("constant", "reflect", "symmetric"):
        np.testing.assert_array_equal(ops.pad(a, [(1, 0), (2, 2)], mode=mode), np.pad(a, [(1, 0), (2, 2)], mode=mode))
    np.testing.assert_array_equal(ops.pad(a, 1, constant_values=-1), np.pad(a, 1, constant_values=-1))
    np.testing.assert_array_equal(ops.pad(a, (0, 2)), np.pad(a, (0, 2)))
    from pyggml import core
    backend = core.Backend("cpu")
    lctx = core.Context(n_tensors=2)
    t = lctx.new_tensor((2, 3))
    buf = core.BackendBuffer(lctx, backend)
    t.set(a.astype(np.float32))
    cctx = core.Context(n_tensors=8, graph_size=16)
    out = ops.pad(t, 1, 0, 0, 0, ctx=cctx)                            # ggml's: ne0 (the last axis) grows by 1
    g = core.Graph(cctx, 16)
    g.build_forward(out)
    sched = core.Scheduler([backend], graph_size=32)
    sched.compute(g)
    np.testing.assert_array_equal(out.numpy(), np.pad(a, [(0, 0), (0, 1)]))
    for o in (sched, g, cctx, buf, lctx, backend):
        o.free()


def _paths_best(logp, blank):
    """Every labelling's probability by brute force over all alignments, best first."""
    from itertools import product
    probs = {}
    for path in product(range(logp.shape[1]), repeat=logp.shape[0]):
        lab, prev = [], None
        for c in path:
            if c != prev and c != blank:
                lab.append(c)
            prev = c
        p = np.exp(sum(logp[t, c] for t, c in enumerate(path)))
        probs[tuple(lab)] = probs.get(tuple(lab), 0.0) + p
    return sorted(probs.items(), key=lambda kv: -kv[1])


def test_ctc_decode_greedy_and_beam_search():
    x = np.log(np.array([[[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.7, 0.2], [0.5, 0.1, 0.4], [0.1, 0.2, 0.7]],
                         [[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.9, 0.05, 0.05]]]))
    decoded, scores = ops.ctc_decode(x, np.array([5, 4]))
    np.testing.assert_array_equal(decoded, [[[1, 2, -1, -1, -1], [1, 1, 2, -1, -1]]])
    np.testing.assert_allclose(scores[:, 0], -np.array([np.log([0.6, 0.7, 0.7, 0.5, 0.7]).sum(),
                                                        np.log([0.8, 0.7, 0.8, 0.6]).sum()]), rtol=1e-5)
    decoded, _ = ops.ctc_decode(x, np.array([5, 5]), merge_repeated=False, mask_index=2)
    np.testing.assert_array_equal(decoded[0, 0], [0, 1, 1, 0, -1])
    decoded, scores = ops.ctc_decode(x, np.array([5, 5]), strategy="beam_search", beam_width=50, top_paths=2)
    assert decoded.shape == (2, 2, 5) and scores.shape == (2, 2)
    for i in range(2):
        best = _paths_best(x[i], 0)[:2]
        for p, (lab, prob) in enumerate(best):
            np.testing.assert_array_equal(decoded[p, i, :len(lab)], lab)
            np.testing.assert_allclose(scores[i, p], np.log(prob), rtol=1e-5)


# --- functional models, bad arguments, coverage -----------------------------------------------------------

def test_functional_nodes_take_the_nn_ops(tmp_path):
    inp = pg.Input((6, 5, 2))
    y = ops.conv(inp, K2D, padding="same")
    y = ops.celu(ops.layer_normalization(y), alpha=0.5)
    y = ops.max_pool(ops.pad(y, [(0, 0), (1, 1), (0, 1), (0, 0)], mode="reflect"), 2)
    m = pg.Model(inp, y)
    x = RNG.normal(size=(3, 6, 5, 2))
    h = _conv_ref(x, K2D, 1, "same")
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-7)
    h = np.maximum(h, 0) + 0.5 * np.expm1(np.minimum(h, 0) / 0.5)
    want = _pool_ref(np.pad(h, [(0, 0), (1, 1), (0, 1), (0, 0)], mode="reflect"), 2, None, "valid", "max")
    np.testing.assert_allclose(m.predict(x.astype(np.float32), verbose=0), want, rtol=1e-4, atol=1e-4)
    m.compile(loss="mse")
    for name in ("m.keras", "m.gguf"):
        m.save(tmp_path / name)
        np.testing.assert_allclose(pg.load_model(tmp_path / name).predict(x, verbose=0), m.predict(x, verbose=0),
                                   rtol=1e-6)
    # an op that returns a pair (real, imag) and attention on the result, as functional nodes
    re, im = ops.rfft(inp)
    q = ops.concatenate([re, im], -1)
    y = ops.dot_product_attention(q, q, inp, is_causal=True)
    m2 = pg.Model(inp, y)
    spec = np.fft.rfft(x, axis=-1)
    q = np.concatenate([spec.real, spec.imag], -1)
    np.testing.assert_allclose(m2.predict(x.astype(np.float32), verbose=0), _attention_ref(q, q, x, causal=True),
                               rtol=1e-4, atol=1e-5)


def test_lambda_layers_in_sequential_models_train_with_the_nn_ops():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 4, 6)).astype(np.float32)
    y = np.abs(x[..., :3]) * 0.5 + x[..., 3:]                       # a function the layers can fit
    m = pg.Sequential([pg.Input((4, 6)), pg.layers.Dense(16),
                       pg.layers.Lambda(lambda t: ops.glu(ops.sparse_plus(t))), pg.layers.Dense(3)])
    m.compile(loss="mse", optimizer=pg.optimizers.Adam(0.02))
    before = m.evaluate(x, y, verbose=0)
    m.fit(x, y, epochs=40, batch_size=16, verbose=0)
    assert m.evaluate(x, y, verbose=0) < 0.3 * before


def _eager_call(fn, *arrays):
    from pyggml import _eager
    return _eager.evaluate(fn, [np.asarray(a, np.float32) for a in arrays])


@pytest.mark.parametrize("call, error, match", [
    (lambda: ops.glu(np.zeros((2, 3))), ValueError, "even length"),
    (lambda: ops.unfold(np.zeros((2, 3, 4)), 2), ValueError, "4-D"),
    (lambda: ops.adaptive_max_pool(np.zeros((1, 3, 3, 2)), 0), ValueError, "output_size"),
    (lambda: ops.adaptive_average_pool(np.zeros((1, 3, 3, 2)), (0, 1)), ValueError, "output_size"),
    (lambda: ops.unfold(np.zeros((1, 1, 2, 2)), 3), ValueError, "smaller than"),
    (lambda: ops.unfold(np.zeros((1, 1, 4, 4)), 2, padding=-1), ValueError, "padding"),
    (lambda: ops.celu(np.zeros(3), alpha=0.0), ValueError, "alpha"),
    (lambda: ops.threshold(np.zeros(3), "a", 0.0), TypeError, "threshold must be a number"),
    (lambda: ops.squareplus(np.zeros(3), b=-1), ValueError, "b must be"),
    (lambda: ops.sparsemax(np.zeros((600, 6000))), ValueError, "pairs"),
    (lambda: ops.multi_hot(np.array([0.5]), 3), TypeError, "integers"),
    (lambda: ops.multi_hot(np.array([1]), 0), ValueError, "num_classes"),
    (lambda: ops.multi_hot(np.array([1]), 3, sparse=True), ValueError, "sparse"),
    (lambda: ops.multi_hot(np.array([1]), 3, axis=2), ValueError, "axis"),
    (lambda: ops.normalize(np.zeros(3), order=0), ValueError, "order"),
    (lambda: ops.normalize(np.zeros(3), epsilon=-1.0), ValueError, "epsilon"),
    (lambda: ops.binary_crossentropy(np.zeros(3), np.zeros(3), from_logits="yes"), TypeError, "True or False"),
    (lambda: ops.conv(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 2, 4)), padding=np.array(["same"])), ValueError,
     "padding must be one of"),
    (lambda: ops.max_pool(np.zeros((1, 4, 4, 2)), 2, strides=2 ** 40), ValueError, "strides"),
    (lambda: ops.conv_transpose(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 4, 2)), 10 ** 9), ValueError, "too large"),
    (lambda: ops.segment_sum(np.zeros((2, 3)), np.array([0, 1]), 10 ** 9), ValueError, "too large"),
    (lambda: ops.rfft(np.zeros((2, 3)), fft_length=10 ** 9), ValueError, "too large"),
    (lambda: ops.psnr(np.zeros(3), np.zeros(4), 1.0), ValueError, "one shape"),
    (lambda: ops.psnr(np.zeros(3), np.zeros(3), 0.0), ValueError, "max_val"),
    (lambda: ops.layer_normalization(np.zeros((2, 3)), gamma=np.ones(4)), ValueError, "gamma"),
    (lambda: ops.rms_normalization(np.zeros((2, 3)), scale=np.ones(4)), ValueError, "broadcast"),
    (lambda: ops.batch_normalization(np.zeros((2, 3)), np.zeros(2), np.ones(3), axis=1), ValueError, "mean"),
    (lambda: ops.categorical_crossentropy(np.zeros((2, 3)), np.zeros((2, 4))), ValueError, "one shape"),
    (lambda: ops.sparse_categorical_crossentropy(np.zeros((3,), int), np.zeros((2, 4))), ValueError, "target"),
    (lambda: ops.dot_product_attention(np.zeros((1, 2, 2, 4)), np.zeros((1, 3, 2, 5)), np.zeros((1, 3, 2, 4))),
     ValueError, "key must be"),
    (lambda: ops.dot_product_attention(np.zeros((1, 2, 3, 4)), np.zeros((1, 3, 2, 4)), np.zeros((1, 3, 2, 4))),
     ValueError, "multiple"),
    (lambda: ops.dot_product_attention(np.zeros((1, 2, 2, 4)), np.zeros((1, 3, 2, 4)), np.zeros((1, 3, 2, 4)),
                                       mask=np.ones((3, 2), bool)), ValueError, "does not broadcast"),
    (lambda: ops.dot_product_attention(np.zeros((1, 2, 4)), np.zeros((1, 3, 4)), np.zeros((1, 3, 2, 4))),
     ValueError, "3-D or 4-D"),
    (lambda: ops.conv(np.zeros((1, 4, 4, 4, 2)), np.zeros((1, 1, 1, 2, 2))), ValueError, "4 dimensions"),
    (lambda: ops.conv(np.zeros((1, 4, 4, 3)), np.zeros((3, 3, 2, 4))), ValueError, "multiple"),
    (lambda: ops.conv(np.zeros((1, 4, 4, 2)), np.zeros((3, 2, 4))), ValueError, "kernel must be 4-D"),
    (lambda: ops.conv(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 2, 4)), padding="causal"), ValueError, "padding"),
    (lambda: ops.conv(np.zeros((1, 2, 2, 2)), np.zeros((3, 3, 2, 4))), ValueError, "smaller than|larger than the input"),
    (lambda: ops.conv(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 2, 4)), strides=0), ValueError, "strides"),
    (lambda: ops.conv(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 2, 4)), data_format="nhwc"), ValueError,
     "data_format"),
    (lambda: ops.conv_transpose(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 4, 3)), 2), ValueError, "last axis"),
    (lambda: ops.conv_transpose(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 4, 2)), 2, output_padding=2), ValueError,
     "output_padding"),
    (lambda: ops.depthwise_conv(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 3, 1))), ValueError, "input channels"),
    (lambda: ops.separable_conv(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 2, 2)), np.zeros((1, 1, 3, 2))),
     ValueError, "pointwise_kernel"),
    (lambda: ops.max_pool(np.zeros((1, 2, 2, 1)), 3), ValueError, "smaller than"),
    (lambda: ops.average_pool(np.zeros((1, 4, 1)), (2, 2)), ValueError, "pool_size"),
    (lambda: ops.einsum("ij,jk->ik", np.zeros((2, 3)), np.zeros((4, 5))), ValueError, "sizes"),
    (lambda: ops.einsum("ij->k", np.zeros((2, 3))), ValueError, "output"),
    (lambda: ops.einsum("ij,jk", np.zeros((2, 3))), ValueError, "operands"),
    (lambda: ops.einsum(3, np.zeros(2)), TypeError, "string"),
    (lambda: ops.in_top_k(np.array([0]), np.zeros((1, 3)), 0), ValueError, "k must"),
    (lambda: ops.in_top_k(np.array([0, 1]), np.zeros((1, 3)), 1), ValueError, "targets"),
    (lambda: ops.segment_sum(np.zeros((3, 2)), np.array([0, 1])), ValueError, "one id per row"),
    (lambda: ops.segment_max(np.zeros((2, 2)), np.array([0.5, 1.0]), 2), TypeError, "integers"),
    (lambda: ops.extract_sequences(np.zeros(4), 5, 1), ValueError, "shorter"),
    (lambda: ops.extract_sequences(np.zeros(4), 2, 0), ValueError, "positive"),
    (lambda: ops.rfft(np.zeros(4), fft_length=0), ValueError, "fft_length"),
    (lambda: ops.irfft(np.zeros(4)), TypeError, "pair"),
    (lambda: ops.stft(np.zeros(16), 10, 4, 8), ValueError, "sequence_length"),
    (lambda: ops.stft(np.zeros(16), 8, 4, 8, window="kaiser"), ValueError, "window"),
    (lambda: ops.stft(np.zeros(16), 8, 4, 8, window=np.ones(3)), ValueError, "window array"),
    (lambda: ops.istft((np.zeros((3, 5)), np.zeros((3, 5))), 8, 2, 8, length=100), ValueError, "result"),
    (lambda: ops.polar(np.zeros(3), np.zeros(2)), ValueError, "broadcast"),
    (lambda: ops.pad(np.zeros((2, 3)), [(1, 1)] * 3), ValueError, "pad_width"),
    (lambda: ops.pad(np.zeros((2, 3)), -1), ValueError, "pad_width"),
    (lambda: ops.pad(np.zeros((2, 3)), 1, mode="wrap"), ValueError, "mode"),
    (lambda: ops.pad(np.zeros((2, 3)), 1, mode="reflect", constant_values=1.0), ValueError, "constant_values"),
    (lambda: ops.pad(np.zeros((2, 3, 4, 5)), [(0, 0)] * 4 + [(1, 1)]), ValueError, "pad_width"),
    (lambda: ops.ctc_loss(np.zeros((1, 2), int), np.zeros((1, 4, 3)), np.array([2]), np.array([4]), mask_index=3),
     ValueError, "mask_index"),
    (lambda: ops.ctc_loss(np.zeros((1, 2)), np.zeros((1, 4, 3)), np.array([2]), np.array([4])), TypeError,
     "integers"),
    (lambda: _eager_call(lambda y: ops.ctc_loss(np.zeros((2, 2), int), y, np.ones(2, int), np.ones(3, int)),
                         np.zeros((2, 4, 3))), ValueError, "output_length must have shape"),
    (lambda: _eager_call(lambda y: ops.ctc_loss(np.zeros((2, 2), int), y, np.ones(2, int), np.ones(2, int),
                                                mask_index=5), np.zeros((2, 4, 3))), ValueError, "mask_index"),
    (lambda: _eager_call(lambda y: ops.einsum("ij,kl->ijkl", y[:, :, None, None], y), np.zeros((2, 2))),
     ValueError, "term"),
    (lambda: ops.ctc_decode(np.zeros((1, 4, 3)), np.array([4]), strategy="best"), ValueError, "strategy"),
    (lambda: ops.ctc_decode(np.zeros((1, 4, 3)), np.array([4]), strategy="beam_search", top_paths=3, beam_width=2),
     ValueError, "top_paths"),
])
def test_bad_arguments_are_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_ctc_decode_is_refused_in_a_graph():
    m = pg.Sequential([pg.Input((3, 4)), pg.layers.Lambda(lambda t: ops.ctc_decode(t, np.full(2, 3))[1])])
    with pytest.raises(TypeError, match="works on arrays"):
        m.compile(loss="mse")
        m.predict(np.zeros((2, 3, 4)), verbose=0)


def test_ctc_loss_in_a_graph_keeps_long_sequences_finite():
    """Log-likelihoods of -100 and below beside the -1e30 of unreachable states (a max as
    b + relu(a - b) lost them and gave nan)."""
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(2, 60, 12)).astype(np.float32) * 2
    target = rng.integers(1, 12, size=(2, 9))
    tl, ol = np.array([9, 6]), np.array([60, 41])
    want = ops.ctc_loss(target, logits, tl, ol)
    assert (want > 100).all()
    got = _eager_call(lambda y, t, a, b: ops.ctc_loss(t, y, a, b), logits, target, tl, ol)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_ctc_loss_in_a_model_matches_pytorch_forward_and_gradient():
    """keras-io's OCR/ASR pattern: logits from a Dense layer, the CTC loss computed in the graph
    (targets, their lengths and the output lengths as model inputs); the Dense kernel's
    gradient against PyTorch's autograd through its ctc_loss."""
    torch = _torch()
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    steps, feats, classes = 7, 3, 5
    x = rng.normal(size=(3, steps, feats)).astype(np.float32)
    target = np.array([[1, 2, 2, 0], [3, 1, 0, 0], [4, 4, 4, 1]])
    tl, ol = np.array([3, 2, 4]), np.array([7, 5, 7])
    ins = [pg.Input((steps, feats)), pg.Input((4,)), pg.Input((1,)), pg.Input((1,))]
    logits = pg.layers.Dense(classes, use_bias=False)(ins[0])
    out = ops.expand_dims(ops.ctc_loss(ins[1], logits, ins[2], ins[3], mask_index=0), -1)
    m = pg.Model(ins, out)
    m.compile(loss="mse", optimizer="sgd")
    w = rng.normal(size=(feats, classes)).astype(np.float32)
    dense = [layer for layer in m.layers if isinstance(layer, pg.layers.Dense)][0]
    dense.set_weights([w])
    inputs = [x, target.astype(np.float32), tl[:, None].astype(np.float32), ol[:, None].astype(np.float32)]
    tw = torch.tensor(w, requires_grad=True)
    lp = torch.log_softmax(torch.tensor(x) @ tw, -1).permute(1, 0, 2)
    want = F.ctc_loss(lp, torch.tensor(target), torch.tensor(ol), torch.tensor(tl), blank=0, reduction="none")
    np.testing.assert_allclose(m.predict(inputs, verbose=0)[:, 0], want.detach().numpy(), rtol=1e-5)
    y = rng.normal(size=(3, 1)).astype(np.float32)
    torch.mean((want[:, None] - torch.tensor(y)) ** 2).backward()
    (g,) = m.gradients(inputs, y).values()
    np.testing.assert_allclose(g.reshape(classes, feats).T, tw.grad.numpy(), rtol=1e-4, atol=1e-5)  # (out, in)
    m.free()


def test_every_op_here_is_tested():
    import pathlib
    import pyggml._ops_nn as nn_ops
    text = pathlib.Path(__file__).read_text()
    missing = [n for n in nn_ops.__all__ if f"ops.{n}(" not in text]
    assert missing == []
