#!/usr/bin/env python3
"""Raw ggml training graphs (pyggml.core + pyggml.ops) beside PyTorch, one run.

Four models shaped like the benchmark's keras-io ports, each trained with
AdamW and a cross-entropy loss, one step = forward + backward + optimizer:

- ``cnn``: tools/bench.py's MNIST CNN (Conv2D 8 3x3 same + relu, 2x2 max pool,
  Conv2D 16 3x3 same + relu, 2x2 max pool, Dense 10), batch 256.
- ``cnn_keras``: keras-io's mnist_convnet (Conv2D 32 3x3 valid + relu, 2x2 max pool,
  Conv2D 64 3x3 valid + relu, 2x2 max pool, Dense 10; dropout left out), batch 128.
- ``conv1d_bn``: keras-io's timeseries classifier (3 x [Conv1D 64 k3 same,
  BatchNormalization (batch statistics), relu], global average pooling,
  Dense 2) on 500 steps of 1 feature, batch 32.
- ``bilstm``: keras-io's IMDB model (Embedding 20000x128, bidirectional
  LSTM 64 returning sequences, bidirectional LSTM 64, Dense 2) over 200
  tokens, batch 32.
- ``transformer``: keras-io's text transformer (token + position embedding
  32, one block: 2-head attention with key_dim 32, residual + LayerNorm,
  feed-forward 32 relu -> 32, residual + LayerNorm; global average pooling,
  Dense 20 relu, Dense 2) over 200 tokens, batch 32.

Variants: ``base`` builds each model from the ops ggml had before pyggml's
patches 0020+ (as the layers compose them today: sigmoid from softplus and
exp, LayerNorm and BatchNorm from sums, channels-first convolutions through
im2col with permuted copies between layers); ``fused`` uses the new ops
(channels-last convolution and pooling, fused bias + activation, LSTM cell,
batch and layer norm); ``torch`` is PyTorch on the same shapes and threads.
Every (model, variant) runs in its own process, rounds alternate, and each
keeps its best time (the machine is shared).  A benchmark, never a test.

    python tools/bench_kernels.py [--threads 2] [--rounds 3] [--steps 5]
                                  [--only cnn,bilstm] [--variants base,fused,torch]
    python tools/bench_kernels.py --child cnn fused --steps 50   # one process, e.g. under perf
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

MODELS = ["cnn", "cnn_keras", "conv1d_bn", "bilstm", "transformer"]
VARIANTS = ["base", "fused", "torch"]
BATCH = {"cnn": 256, "cnn_keras": 128, "conv1d_bn": 32, "bilstm": 32, "transformer": 32}
SEQ = 200          # tokens of the text models
VOCAB = 20000
TS_LEN = 500       # steps of the timeseries


# --- pyggml ----------------------------------------------------------------------------


class Net:
    """Leaf tensors (weights, inputs, constants) and the compute context of one raw graph."""

    def __init__(self, core, ops, batch, n_tensors=400000):
        self.core, self.ops, self.batch = core, ops, batch
        self.leaf = core.Context(n_tensors=4096)
        self.ctx = core.Context(n_tensors=n_tensors, graph_size=0)
        self.fused_concat = False
        self.values = []            # (tensor, array) set after allocation
        self.rng = np.random.default_rng(0)

    def weight(self, shape, scale=None, value=None):
        t = self.leaf.new_tensor(shape)
        if value is None:
            fan_in = shape[-1] if len(shape) > 1 else 1
            s = scale if scale is not None else 1.0 / math.sqrt(max(fan_in, 1))
            value = self.rng.uniform(-s, s, size=shape).astype(np.float32)
        self.values.append((t, np.broadcast_to(np.asarray(value, np.float32), shape)))
        return t.set_param()

    def const(self, value, dtype="f32"):
        value = np.asarray(value)
        t = self.leaf.new_tensor(value.shape, dtype=dtype)
        self.values.append((t, value))
        return t

    def input(self, shape, dtype="f32"):
        t = self.leaf.new_tensor(shape, dtype=dtype)
        return t

    def allocate(self, backend):
        self.buf = self.core.BackendBuffer(self.leaf, backend)
        for t, v in self.values:
            t.set(v)


def _bias_act(n, x, b, act, fused):
    """act(x + b), b broadcast over rows (ggml dim 0 = b's length)."""
    ops, ctx = n.ops, n.ctx
    if fused:
        return ops.bias_act(x, b, act, ctx=ctx)
    y = ops.add(x, b, ctx=ctx)
    if act == "relu":
        y = ops.relu(y, ctx=ctx)
    return y


def _sigmoid_base(ops, x, ctx):
    return ops.exp(ops.neg(ops.softplus(ops.neg(x, ctx=ctx), ctx=ctx), ctx=ctx), ctx=ctx)


def _permute_numpy(ops, x, perm, ctx):
    r = len(perm)
    ax = list(range(4))
    for i, p in enumerate(perm):
        ax[r - 1 - p] = r - 1 - i
    return ops.cont(ops.permute(x, ax, ctx=ctx), ctx=ctx)


def build_cnn(n, fused):
    ops, ctx, b = n.ops, n.ctx, n.batch
    x = n.input((b, 28, 28, 1))
    w1, b1 = n.weight((8, 3, 3, 1) if fused else (8, 1, 3, 3)), n.weight((8,), value=0)
    w2, b2 = n.weight((16, 3, 3, 8) if fused else (16, 8, 3, 3)), n.weight((16,), value=0)
    wd, bd = n.weight((10, 7 * 7 * 16)), n.weight((10,), value=0)
    if fused:
        # channels-last all the way: no permuted copies
        h = ops.conv_2d_cl(x, w1, b1, padding="same", act="relu", ctx=ctx)          # (b, 28, 28, 8)
        h = ops.pool_cl(h, "max", (2, 2), ctx=ctx)                               # (b, 14, 14, 8)
        h = ops.conv_2d_cl(h, w2, b2, padding="same", act="relu", ctx=ctx)          # (b, 14, 14, 16)
        h = ops.pool_cl(h, "max", (2, 2), ctx=ctx)                               # (b, 7, 7, 16)
        h = ops.reshape(h, (b, 7 * 7 * 16), ctx=ctx)
    else:
        xc = _permute_numpy(ops, x, (0, 3, 1, 2), ctx)                          # (b, 1, 28, 28)
        k1 = n.input((8, 1, 3, 3))
        cols = ops.reshape(ops.im2col(k1, xc, 1, 1, 1, 1, 1, 1, True, ctx=ctx), (b * 784, 9), ctx=ctx)
        h = ops.relu(ops.add(ops.mul_mat(ops.reshape(w1, (8, 9), ctx=ctx), cols, ctx=ctx), b1, ctx=ctx), ctx=ctx)
        h = _permute_numpy(ops, ops.reshape(h, (b, 28, 28, 8), ctx=ctx), (0, 3, 1, 2), ctx)
        h = ops.pool_2d(h, "max", 2, 2, 2, 2, ctx=ctx)                           # (b, 8, 14, 14)
        k2 = n.input((16, 8, 3, 3))
        cols = ops.reshape(ops.im2col(k2, h, 1, 1, 1, 1, 1, 1, True, ctx=ctx), (b * 196, 72), ctx=ctx)
        h = ops.relu(ops.add(ops.mul_mat(ops.reshape(w2, (16, 72), ctx=ctx), cols, ctx=ctx), b2, ctx=ctx), ctx=ctx)
        h = _permute_numpy(ops, ops.reshape(h, (b, 14, 14, 16), ctx=ctx), (0, 3, 1, 2), ctx)
        h = ops.pool_2d(h, "max", 2, 2, 2, 2, ctx=ctx)                           # (b, 16, 7, 7)
        h = _permute_numpy(ops, h, (0, 2, 3, 1), ctx)                           # (b, 7, 7, 16)
        h = ops.reshape(h, (b, 7 * 7 * 16), ctx=ctx)
        n.values += [(k1, np.zeros((8, 1, 3, 3), np.float32)), (k2, np.zeros((16, 8, 3, 3), np.float32))]
    out = ops.add(ops.mul_mat(wd, h, ctx=ctx), bd, ctx=ctx)
    return x, out, 10


def build_cnn_keras(n, fused):
    ops, ctx, b = n.ops, n.ctx, n.batch
    x = n.input((b, 28, 28, 1))
    w1, b1 = n.weight((32, 3, 3, 1) if fused else (32, 1, 3, 3)), n.weight((32,), value=0)
    w2, b2 = n.weight((64, 3, 3, 32) if fused else (64, 32, 3, 3)), n.weight((64,), value=0)
    wd, bd = n.weight((10, 5 * 5 * 64)), n.weight((10,), value=0)
    if fused:
        h = ops.conv_2d_cl(x, w1, b1, act="relu", ctx=ctx)                      # (b, 26, 26, 32)
        h = ops.pool_cl(h, "max", (2, 2), ctx=ctx)                               # (b, 13, 13, 32)
        h = ops.conv_2d_cl(h, w2, b2, act="relu", ctx=ctx)                      # (b, 11, 11, 64)
        h = ops.pool_cl(h, "max", (2, 2), ctx=ctx)                               # (b, 5, 5, 64)
    else:
        xc = _permute_numpy(ops, x, (0, 3, 1, 2), ctx)
        k1 = n.input((32, 1, 3, 3))
        cols = ops.reshape(ops.im2col(k1, xc, 1, 1, 0, 0, 1, 1, True, ctx=ctx), (b * 676, 9), ctx=ctx)
        h = ops.relu(ops.add(ops.mul_mat(ops.reshape(w1, (32, 9), ctx=ctx), cols, ctx=ctx), b1, ctx=ctx), ctx=ctx)
        h = _permute_numpy(ops, ops.reshape(h, (b, 26, 26, 32), ctx=ctx), (0, 3, 1, 2), ctx)
        h = ops.pool_2d(h, "max", 2, 2, 2, 2, ctx=ctx)                           # (b, 32, 13, 13)
        k2 = n.input((64, 32, 3, 3))
        cols = ops.reshape(ops.im2col(k2, h, 1, 1, 0, 0, 1, 1, True, ctx=ctx), (b * 121, 288), ctx=ctx)
        h = ops.relu(ops.add(ops.mul_mat(ops.reshape(w2, (64, 288), ctx=ctx), cols, ctx=ctx), b2, ctx=ctx), ctx=ctx)
        h = _permute_numpy(ops, ops.reshape(h, (b, 11, 11, 64), ctx=ctx), (0, 3, 1, 2), ctx)
        h = ops.pool_2d(h, "max", 2, 2, 2, 2, ctx=ctx)                           # (b, 64, 5, 5)
        h = _permute_numpy(ops, h, (0, 2, 3, 1), ctx)                           # (b, 5, 5, 64)
        n.values += [(k1, np.zeros((32, 1, 3, 3), np.float32)), (k2, np.zeros((64, 32, 3, 3), np.float32))]
    h = ops.reshape(h, (b, 5 * 5 * 64), ctx=ctx)
    return x, ops.add(ops.mul_mat(wd, h, ctx=ctx), bd, ctx=ctx), 10


def _mean_rows(ops, x, ctx):
    return ops.scale(ops.sum_rows(x, ctx=ctx), 1.0 / x.ne[0], ctx=ctx)


def _rsqrt(ops, v, eps, ctx):
    return ops.exp(ops.scale(ops.log(ops.scale_bias(v, 1.0, eps, ctx=ctx), ctx=ctx), -0.5, ctx=ctx), ctx=ctx)


def build_conv1d_bn(n, fused):
    ops, ctx, b = n.ops, n.ctx, n.batch
    L, C = TS_LEN, 64
    x = n.input((b, L, 1))
    h, cin = x, 1
    for i in range(3):
        w = n.weight((C, 3, cin) if fused else (C, cin, 3))
        bias = n.weight((C,), value=0)
        gamma, beta = n.weight((C,), value=1), n.weight((C,), value=0)
        if fused:
            # Conv1D as a channels-last convolution of height 1, then batch norm + relu
            y = ops.conv_2d_cl(ops.reshape(h, (b, 1, L, cin), ctx=ctx), ops.reshape(w, (C, 1, 3, cin), ctx=ctx),
                               bias, padding="same", ctx=ctx)
            y = ops.reshape(y, (b * L, C), ctx=ctx)
            stats = n.const(np.zeros((2, C), np.float32))    # receives the batch's mean and variance
            y = ops.batch_norm(y, gamma, beta, stats, eps=1e-3, act="relu", ctx=ctx)
            h = ops.reshape(y, (b, L, C), ctx=ctx)
        else:
            xc = _permute_numpy(ops, ops.reshape(h, (b, 1, L, cin), ctx=ctx), (0, 3, 1, 2), ctx)   # (b, cin, 1, L)
            k = n.input((C, cin, 1, 3))
            n.values.append((k, np.zeros((C, cin, 1, 3), np.float32)))
            cols = ops.reshape(ops.im2col(k, xc, 1, 1, 1, 0, 1, 1, True, ctx=ctx), (b * L, cin * 3), ctx=ctx)
            y = ops.add(ops.mul_mat(ops.reshape(w, (C, cin * 3), ctx=ctx), cols, ctx=ctx), bias, ctx=ctx)   # (b*L, C)
            # BatchNormalization as the layer composes it today
            xt = ops.cont(ops.transpose(y, ctx=ctx), ctx=ctx)
            mean = ops.reshape(_mean_rows(ops, xt, ctx), (1, C), ctx=ctx)
            xcen = ops.sub(y, ops.repeat(mean, y, ctx=ctx), ctx=ctx)
            var = _mean_rows(ops, ops.cont(ops.transpose(ops.sqr(xcen, ctx=ctx), ctx=ctx), ctx=ctx), ctx)
            var = ops.reshape(var, (1, C), ctx=ctx)
            y = ops.mul(xcen, _rsqrt(ops, var, 1e-3, ctx), ctx=ctx)
            y = ops.relu(ops.add(ops.mul(y, gamma, ctx=ctx), beta, ctx=ctx), ctx=ctx)
            h = ops.reshape(y, (b, L, C), ctx=ctx)
        cin = C
    # global average pooling over the steps
    if fused:
        g = ops.pool_cl(ops.reshape(h, (b, 1, L, C), ctx=ctx), "avg", (1, L), ctx=ctx)
        g = ops.reshape(g, (b, C), ctx=ctx)
    else:
        ht = ops.cont(ops.transpose(ops.reshape(h, (b, L, C), ctx=ctx), ctx=ctx), ctx=ctx)   # (b, C, L)
        g = ops.reshape(_mean_rows(ops, ht, ctx), (b, C), ctx=ctx)
    wd, bd = n.weight((2, C)), n.weight((2,), value=0)
    return x, ops.add(ops.mul_mat(wd, g, ctx=ctx), bd, ctx=ctx), 2


def _lstm_dir(n, xt, steps, feats, units, reverse, seq, fused):
    """One direction of an LSTM over time-major xt (steps * batch, feats); returns the
    per-step outputs (time order) or the last state."""
    ops, ctx, b = n.ops, n.ctx, n.batch
    u = units
    w_ih, w_hh = n.weight((4 * u, feats)), n.weight((4 * u, u))
    bias = np.zeros(4 * u, np.float32)
    bias[u:2 * u] = 1.0
    b_ih = n.weight((4 * u,), value=bias)
    p = ops.add(ops.mul_mat(w_ih, xt, ctx=ctx), b_ih, ctx=ctx)                   # (steps * b, 4u)
    zeros = n.const(np.zeros((b, u), np.float32))
    h, c = zeros, zeros
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    outs = {}
    if not fused:
        sc = np.ones(4 * u, np.float32)
        sc[2 * u:3 * u] = 2.0
        gscale = n.const(sc)
    for t in order:
        zx = ops.view(p, (b, 4 * u), offset=t * b * 4 * u * 4, ctx=ctx)
        zh = ops.mul_mat(w_hh, h, ctx=ctx)
        if fused:
            st = ops.lstm_cell(zx, zh, c, ctx=ctx)                               # (2, b, u): h, c
            h = ops.view(st, (b, u), offset=0, ctx=ctx)
            c = ops.view(st, (b, u), offset=b * u * 4, ctx=ctx)
        else:
            gates = ops.add(zx, zh, ctx=ctx)
            sg = _sigmoid_base(ops, ops.mul(gates, gscale, ctx=ctx), ctx)

            def cols(k):
                return ops.view(sg, (b, u), strides=(sg.nb[1], 4), offset=k * u * 4, ctx=ctx)
            i, f, o = cols(0), cols(1), cols(3)
            g = ops.scale_bias(ops.cont(cols(2), ctx=ctx), 2.0, -1.0, ctx=ctx)
            c = ops.add(ops.mul(f, c, ctx=ctx), ops.mul(i, g, ctx=ctx), ctx=ctx)
            tc = ops.scale_bias(_sigmoid_base(ops, ops.scale(c, 2.0, ctx=ctx), ctx), 2.0, -1.0, ctx=ctx)
            h = ops.mul(o, tc, ctx=ctx)
        outs[t] = h
    if not seq:
        return h
    return [outs[t] for t in range(steps)]


def _stack_time_major(n, hs, units):
    """(b, u) per step -> (steps, b, u), joined pairwise with acc (which trains)."""
    ops, ctx, b = n.ops, n.ctx, n.batch
    if hasattr(ops, "concat") and n.fused_concat:
        parts = [ops.reshape(h, (1, b, units), ctx=ctx) for h in hs]
        while len(parts) > 1:
            nxt = [ops.concat(a, c, 2, ctx=ctx) for a, c in zip(parts[0::2], parts[1::2])]
            if len(parts) % 2:
                nxt.append(parts[-1])
            parts = nxt
        return parts[0]
    steps, block = len(hs), b * units
    zeros = n.const(np.zeros(steps * block, np.float32))
    parts = [(ops.reshape(h, (block,), ctx=ctx), 1) for h in hs]
    while len(parts) > 1:
        joined = []
        for (a, ka), (c, kc) in zip(parts[0::2], parts[1::2]):
            z = ops.view(zeros, ((ka + kc) * block,), ctx=ctx)
            z = ops.acc(ops.acc(z, a, ctx=ctx), c, offset=ka * block * 4, ctx=ctx)
            joined.append((z, ka + kc))
        if len(parts) % 2:
            joined.append(parts[-1])
        parts = joined
    return ops.reshape(parts[0][0], (steps, b, units), ctx=ctx)


def build_bilstm(n, fused):
    ops, ctx, b = n.ops, n.ctx, n.batch
    n.fused_concat = fused
    T, E, U = SEQ, 128, 64
    ids = n.input((b * T,), dtype="i32")
    emb = n.weight((VOCAB, E), scale=0.05)
    # time-major token ids: row t * b + i is sample i's token t
    xt = ops.get_rows(emb, ids, ctx=ctx)                                         # (T * b, E)
    fwd = _lstm_dir(n, xt, T, E, U, False, True, fused)
    bwd = _lstm_dir(n, xt, T, E, U, True, True, fused)
    seq = ops.concat(_stack_time_major(n, fwd, U), _stack_time_major(n, bwd, U), 0, ctx=ctx) if fused else None
    if not fused:
        # the layer joins the directions with constant placement matrices (ggml's concat does not train)
        pf = np.zeros((2 * U, U), np.float32)
        pf[np.arange(U), np.arange(U)] = 1
        pb = np.zeros((2 * U, U), np.float32)
        pb[U + np.arange(U), np.arange(U)] = 1
        pft, pbt = n.const(pf), n.const(pb)
        sf = ops.reshape(_stack_time_major(n, fwd, U), (T * b, U), ctx=ctx)
        sb = ops.reshape(_stack_time_major(n, bwd, U), (T * b, U), ctx=ctx)
        seq = ops.add(ops.mul_mat(pft, sf, ctx=ctx), ops.mul_mat(pbt, sb, ctx=ctx), ctx=ctx)
    seq = ops.reshape(seq, (T * b, 2 * U), ctx=ctx)
    h_f = _lstm_dir(n, seq, T, 2 * U, U, False, False, fused)
    h_b = _lstm_dir(n, seq, T, 2 * U, U, True, False, fused)
    wf, wb, bd = n.weight((2, U)), n.weight((2, U)), n.weight((2,), value=0)
    out = ops.add(ops.add(ops.mul_mat(wf, h_f, ctx=ctx), ops.mul_mat(wb, h_b, ctx=ctx), ctx=ctx), bd, ctx=ctx)
    return ids, out, 2


def build_transformer(n, fused):
    ops, ctx, b = n.ops, n.ctx, n.batch
    T, E, H, KD, FF = SEQ, 32, 2, 32, 32
    ids = n.input((b * T,), dtype="i32")
    tok = n.weight((VOCAB, E), scale=0.05)
    pos = n.weight((T, E), scale=0.05)
    x = ops.add(ops.reshape(ops.get_rows(tok, ids, ctx=ctx), (b, T, E), ctx=ctx), pos, ctx=ctx)
    x2 = ops.reshape(x, (b * T, E), ctx=ctx)

    def dense(inp, rows, cols, act=None):
        w, bb = n.weight((rows, cols)), n.weight((rows,), value=0)
        return _bias_act(n, ops.mul_mat(w, inp, ctx=ctx), bb, act or "linear", fused)

    def layer_norm(inp):
        gamma, beta = n.weight((E,), value=1), n.weight((E,), value=0)
        if fused:
            return ops.add(ops.mul(ops.norm(inp, 1e-6, ctx=ctx), gamma, ctx=ctx), beta, ctx=ctx)
        xc = ops.sub(inp, ops.repeat(_mean_rows(ops, inp, ctx), inp, ctx=ctx), ctx=ctx)
        var = _mean_rows(ops, ops.sqr(xc, ctx=ctx), ctx)
        y = ops.mul(xc, _rsqrt(ops, var, 1e-6, ctx), ctx=ctx)
        return ops.add(ops.mul(y, gamma, ctx=ctx), beta, ctx=ctx)

    q = ops.reshape(dense(x2, H * KD, E), (b, T, H, KD), ctx=ctx)
    k = ops.reshape(dense(x2, H * KD, E), (b, T, H, KD), ctx=ctx)
    v = ops.reshape(dense(x2, H * KD, E), (b, T, H, KD), ctx=ctx)
    q = _permute_numpy(ops, q, (0, 2, 1, 3), ctx)
    k = _permute_numpy(ops, k, (0, 2, 1, 3), ctx)
    vt = _permute_numpy(ops, v, (0, 2, 3, 1), ctx)
    scores = ops.mul_mat(k, q, ctx=ctx)                                          # (b, H, T, T)
    if fused:
        probs = ops.soft_max_ext(scores, None, 1.0 / math.sqrt(KD), ctx=ctx)
    else:
        probs = ops.soft_max(ops.scale(scores, 1.0 / math.sqrt(KD), ctx=ctx), ctx=ctx)
    att = _permute_numpy(ops, ops.mul_mat(vt, probs, ctx=ctx), (0, 2, 1, 3), ctx)
    att = dense(ops.reshape(att, (b * T, H * KD), ctx=ctx), E, H * KD)
    x2 = layer_norm(ops.add(x2, att, ctx=ctx))
    ff = dense(dense(x2, FF, E, "relu"), E, FF)
    x2 = layer_norm(ops.add(x2, ff, ctx=ctx))
    # global average pooling over the tokens
    xt = ops.cont(ops.transpose(ops.reshape(x2, (b, T, E), ctx=ctx), ctx=ctx), ctx=ctx)   # (b, E, T)
    g = ops.reshape(_mean_rows(ops, xt, ctx), (b, E), ctx=ctx)
    h = dense(g, 20, E, "relu")
    return ids, dense(h, 2, 20), 2


BUILDERS = {"cnn": build_cnn, "cnn_keras": build_cnn_keras, "conv1d_bn": build_conv1d_bn, "bilstm": build_bilstm, "transformer": build_transformer}


def pyggml_step(model, fused, threads):
    from pyggml import core, ops
    core.set_n_threads(threads)
    backend = core.Backend("cpu")
    n = Net(core, ops, BATCH[model])
    inp, out, classes = BUILDERS[model](n, fused)
    n.allocate(backend)
    rng = np.random.default_rng(1)
    b = n.batch
    if inp.dtype == "i32":
        inp.set(rng.integers(1, VOCAB, size=inp.shape).astype(np.int32))
    else:
        inp.set(rng.random(inp.shape, dtype=np.float32))
    nodes = len(n.ctx.tensors()) + len(n.leaf.tensors())
    sched = core.Scheduler([backend], graph_size=6 * nodes + 4096)
    opt = core.OptContext(sched, n.ctx, inp, out, loss="cross_entropy", graph_size=None)
    labels = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, b)]
    opt.set_labels(labels)

    def step():
        opt.step(threads)
    step._keep = (n, sched, opt, backend)
    return step


# --- PyTorch ---------------------------------------------------------------------------


def torch_step(model, threads):
    import torch
    import torch.nn as nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    b = BATCH[model]
    rng = np.random.default_rng(1)
    if model == "cnn":
        net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
        x = torch.from_numpy(rng.random((b, 1, 28, 28), dtype=np.float32))
        classes = 10
    elif model == "cnn_keras":
        net = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(5 * 5 * 64, 10))
        x = torch.from_numpy(rng.random((b, 1, 28, 28), dtype=np.float32))
        classes = 10
    elif model == "conv1d_bn":
        layers = []
        cin = 1
        for _ in range(3):
            layers += [nn.Conv1d(cin, 64, 3, padding=1), nn.BatchNorm1d(64, eps=1e-3), nn.ReLU()]
            cin = 64
        net = nn.Sequential(*layers, nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 2))
        x = torch.from_numpy(rng.random((b, 1, TS_LEN), dtype=np.float32))
        classes = 2
    elif model == "bilstm":
        class BiLSTM(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(VOCAB, 128)
                self.l1 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
                self.l2 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
                self.fc = nn.Linear(128, 2)

            def forward(self, ids):
                s, _ = self.l1(self.emb(ids))
                _, (h, _) = self.l2(s)
                return self.fc(torch.cat([h[0], h[1]], dim=1))
        net = BiLSTM()
        x = torch.from_numpy(rng.integers(1, VOCAB, size=(b, SEQ)))
        classes = 2
    else:
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(VOCAB, 32)
                self.pos = nn.Parameter(torch.randn(SEQ, 32) * 0.05)
                self.q = nn.Linear(32, 64)
                self.k = nn.Linear(32, 64)
                self.v = nn.Linear(32, 64)
                self.o = nn.Linear(64, 32)
                self.ln1 = nn.LayerNorm(32, eps=1e-6)
                self.ln2 = nn.LayerNorm(32, eps=1e-6)
                self.ff = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32))
                self.head = nn.Sequential(nn.Linear(32, 20), nn.ReLU(), nn.Linear(20, 2))

            def forward(self, ids):
                x = self.tok(ids) + self.pos
                bb, t, _ = x.shape
                q = self.q(x).view(bb, t, 2, 32).transpose(1, 2)
                k = self.k(x).view(bb, t, 2, 32).transpose(1, 2)
                v = self.v(x).view(bb, t, 2, 32).transpose(1, 2)
                a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(32), -1) @ v
                a = self.o(a.transpose(1, 2).reshape(bb, t, 64))
                x = self.ln1(x + a)
                x = self.ln2(x + self.ff(x))
                return self.head(x.mean(1))
        net = Block()
        x = torch.from_numpy(rng.integers(1, VOCAB, size=(b, SEQ)))
        classes = 2
    y = torch.from_numpy(rng.integers(0, classes, b))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.0)
    lf = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        lf(net(x), y).backward()
        opt.step()
    return step


# --- driver ----------------------------------------------------------------------------


def child(model, variant, threads, steps, repeats):
    step = torch_step(model, threads) if variant == "torch" else pyggml_step(model, variant == "fused", threads)
    step()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - t) / steps)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; each variant keeps its best")
    ap.add_argument("--steps", type=int, default=5, help="training steps per timing")
    ap.add_argument("--repeats", type=int, default=2, help="timings per process (best kept)")
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "VARIANT"), help="run one in this process")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    if a.child:
        t = child(a.child[0], a.child[1], a.threads, a.steps, a.repeats)
        print("RESULT " + json.dumps({"ms": t * 1e3}))
        return 0
    models = [m for m in a.only.split(",") if m]
    variants = [v for v in a.variants.split(",") if v]
    best = {}
    for r in range(a.rounds):
        for m in models:
            for v in variants:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", m, v, "--threads",
                                    str(a.threads), "--steps", str(a.steps), "--repeats", str(a.repeats)],
                                   capture_output=True, text=True, timeout=3600)
                ms = float("nan")
                for line in p.stdout.splitlines():
                    if line.startswith("RESULT "):
                        ms = json.loads(line[7:])["ms"]
                if ms != ms:
                    print(f"{m} {v}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                best[m, v] = min(best.get((m, v), float("inf")), ms) if ms == ms else best.get((m, v), ms)
                print(f"round {r + 1}: {m:12s} {v:6s} {ms:9.2f} ms/step", file=sys.stderr, flush=True)
    print(f"\nms per training step, best of {a.rounds} alternating rounds, {a.threads} threads "
          f"(batch: {', '.join(f'{m} {BATCH[m]}' for m in models)})")
    cols = variants + [f"torch/{v}" for v in variants if v != "torch" and "torch" in variants]
    print("| model | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for m in models:
        row = [f"{best.get((m, v), float('nan')):.2f}" for v in variants]
        if "torch" in variants:
            row += [f"{best[m, 'torch'] / best[m, v]:.2f}x" for v in variants if v != "torch"]
        print(f"| {m} | " + " | ".join(row) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{m}/{v}": t for (m, v), t in best.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
