"""Shared pieces of the PyTorch twins of the keras-io ports: the ports' data
(examples/keras_io/offline_data.py, imported from there so that both sides
train on the same arrays), Keras's default initialisation, and a ``fit`` loop
that does what ``keras.Model.fit`` does (validation_split takes the last rows
before shuffling; shuffled batches each epoch; the last short batch is used)."""

import os
import sys
import time

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "keras_io"))

import offline_data  # noqa: E402

__all__ = ["offline_data", "keras_init", "fit", "evaluate", "predict", "setup", "pad_sequences"]


def setup(seed, threads=None):
    """Seed every generator; use the thread count pyggml uses (all cores) unless given."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    if threads:
        torch.set_num_threads(threads)


def pad_sequences(seqs, maxlen):
    """Keras's pad_sequences defaults: zeros in front, the first words cut (int64)."""
    out = np.zeros((len(seqs), maxlen), dtype=np.int64)
    for i, s in enumerate(seqs):
        s = list(s)[-maxlen:]
        if s:
            out[i, maxlen - len(s):] = s
    return out


def keras_init(module):
    """Keras's defaults: glorot_uniform kernels (Dense, Conv, the RNN input kernels),
    orthogonal recurrent kernels, zero biases (an LSTM's forget-gate bias 1), ones
    and zeros for normalisation, uniform(-0.05, 0.05) embeddings."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.ConvTranspose1d, nn.ConvTranspose2d)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.LSTM, nn.GRU)):
            for name, p in m.named_parameters():
                if name.startswith("weight_ih"):          # Keras: one (in, gates*units) glorot kernel
                    nn.init.xavier_uniform_(p)
                elif name.startswith("weight_hh"):        # one orthogonal (units, gates*units) kernel
                    nn.init.orthogonal_(p)
                else:
                    nn.init.zeros_(p)
                    if isinstance(m, nn.LSTM) and name.startswith("bias_ih"):
                        p.data[m.hidden_size:2 * m.hidden_size] = 1.0      # unit_forget_bias
        elif isinstance(m, nn.Embedding):
            nn.init.uniform_(m.weight, -0.05, 0.05)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm)):
            if m.weight is not None:
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
    return module


def _index(a, idx):
    if isinstance(a, dict):
        return {k: _index(v, idx) for k, v in a.items()}
    if isinstance(a, (list, tuple)):
        return [_index(v, idx) for v in a]
    return a[idx]


def _length(a):
    if isinstance(a, dict):
        return len(next(iter(a.values())))
    if isinstance(a, (list, tuple)):
        return len(a[0])
    return len(a)


def _tensor(a):
    if isinstance(a, dict):
        return {k: _tensor(v) for k, v in a.items()}
    if isinstance(a, (list, tuple)):
        return [_tensor(v) for v in a]
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.float() if t.dtype in (torch.float64, torch.float16) else t


def fit(model, loss_fn, optimizer, x, y, batch_size=32, epochs=1, validation_split=0.0, validation_data=None,
        metric=None, callbacks=None, verbose=True, shuffle=True):
    """Keras-style training; returns {"loss": [...], "val_loss": [...], metric and val_ metric}."""
    n = _length(x)
    if validation_split:
        split = int(n * (1.0 - validation_split))
        validation_data = (_index(x, slice(split, None)), _index(y, slice(split, None)))
        x, y, n = _index(x, slice(0, split)), _index(y, slice(0, split)), split
    hist = {}
    for epoch in range(epochs):
        model.train()
        order = np.random.permutation(n) if shuffle else np.arange(n)
        tot, seen, hits = 0.0, 0, 0.0
        for s in range(0, n, batch_size):
            idx = order[s:s + batch_size]
            xb, yb = _tensor(_index(x, idx)), _tensor(_index(y, idx))
            optimizer.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            optimizer.step()
            tot += float(loss.detach()) * len(idx)
            seen += len(idx)
            if metric:
                hits += float(metric(out.detach(), yb)) * len(idx)
        logs = {"loss": tot / seen}
        if metric:
            logs["accuracy"] = hits / seen
        if validation_data is not None:
            logs.update({"val_" + k: v for k, v in evaluate(model, loss_fn, *validation_data, metric=metric).items()})
        for k, v in logs.items():
            hist.setdefault(k, []).append(v)
        if verbose:
            print(f"epoch {epoch + 1}/{epochs}: " + ", ".join(f"{k}={v:.4f}" for k, v in logs.items()), flush=True)
        stop = False
        for cb in callbacks or ():
            stop = cb(epoch, logs, model, optimizer) or stop
        if stop:
            break
    return hist


@torch.no_grad()
def evaluate(model, loss_fn, x, y, batch_size=256, metric=None):
    model.eval()
    n = _length(x)
    tot, hits = 0.0, 0.0
    for s in range(0, n, batch_size):
        idx = np.arange(s, min(n, s + batch_size))
        xb, yb = _tensor(_index(x, idx)), _tensor(_index(y, idx))
        out = model(xb)
        tot += float(loss_fn(out, yb)) * len(idx)
        if metric:
            hits += float(metric(out, yb)) * len(idx)
    res = {"loss": tot / n}
    if metric:
        res["accuracy"] = hits / n
    return res


@torch.no_grad()
def predict(model, x, batch_size=256):
    model.eval()
    n = _length(x)
    outs = [model(_tensor(_index(x, np.arange(s, min(n, s + batch_size))))) for s in range(0, n, batch_size)]
    return torch.cat(outs).numpy()


class Timer:
    def __enter__(self):
        self.t = time.perf_counter()
        return self

    def __exit__(self, *a):
        self.s = time.perf_counter() - self.t
