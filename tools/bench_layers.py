#!/usr/bin/env python3
"""The layers added for Keras parity (issues 17 and 21) beside their PyTorch
twins: one training step (forward, backward, SGD) of a small model around each,
same thread count, alternating rounds in fresh subprocesses.  A benchmark,
never a test.

    python tools/bench_layers.py [--threads 1] [--repeats 3] [--rounds 3] [--only maxpool,bilstm,...]
"""

import argparse
import json
import subprocess
import sys
import tempfile

WORKLOADS = ["maxpool2d_same", "avgpool1d_same", "upsampling2d_nearest", "upsampling2d_bilinear",
             "conv2d_transpose", "conv1d_transpose", "bilstm_seq", "time_distributed_dense"]

CHILD = r"""
import json, sys, time
import numpy as np
fw, wl, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
B = 64
SHAPES = {"maxpool2d_same": (32, 32, 16), "avgpool1d_same": (256, 32), "upsampling2d_nearest": (16, 16, 16),
          "upsampling2d_bilinear": (16, 16, 16), "conv2d_transpose": (14, 14, 32), "conv1d_transpose": (64, 32),
          "bilstm_seq": (20, 16), "time_distributed_dense": (32, 64)}
shape = SHAPES[wl]
rng = np.random.default_rng(0)
x = rng.normal(size=(B,) + shape).astype(np.float32)

def best_time(f, n):
    f()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            f()
        out.append((time.perf_counter() - t) / n)
    return min(out)

if fw == "pyggml":
    import pyggml as pg
    pg.set_n_threads(threads)
    L = pg.layers
    c = shape[-1]
    body = {
        "maxpool2d_same": [L.Conv2D(c, 1), L.MaxPooling2D(3, strides=2, padding="same")],
        "avgpool1d_same": [L.Conv1D(c, 1), L.AveragePooling1D(3, strides=2, padding="same")],
        "upsampling2d_nearest": [L.Conv2D(c, 1), L.UpSampling2D(2)],
        "upsampling2d_bilinear": [L.Conv2D(c, 1), L.UpSampling2D(2, interpolation="bilinear")],
        "conv2d_transpose": [L.Conv2DTranspose(32, 3, strides=2, padding="same")],
        "conv1d_transpose": [L.Conv1DTranspose(32, 3, strides=2, padding="same")],
        "bilstm_seq": [L.Bidirectional(L.LSTM(32, return_sequences=True))],
        "time_distributed_dense": [L.TimeDistributed(L.Dense(64))],
    }[wl]
    m = pg.Sequential(body + [L.Flatten(), L.Dense(10)], input_shape=shape)
    m.compile(optimizer=pg.optimizers.SGD(learning_rate=1e-3), loss="mse", seed=0)
    y = rng.normal(size=(B, 10)).astype(np.float32)
    tr = pg.Trainer(m, batch_size=B)
    f = lambda: tr.step(x, y)
else:
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nn = torch.nn
    c = shape[-1]

    class BiLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(shape[-1], 32, batch_first=True, bidirectional=True)

        def forward(self, v):
            return self.rnn(v)[0]

    class TD(nn.Module):          # Keras's channels-last inputs: permute in, as pyggml's graph does
        def __init__(self, mod, dims):
            super().__init__()
            self.mod, self.dims = mod, dims

        def forward(self, v):
            return self.mod(v.permute(*self.dims))

    if wl == "maxpool2d_same":
        body, flat = [TD(nn.Conv2d(c, c, 1), (0, 3, 1, 2)), nn.MaxPool2d(3, 2, padding=1)], c * 16 * 16
    elif wl == "avgpool1d_same":
        body, flat = [TD(nn.Conv1d(c, c, 1), (0, 2, 1)), nn.AvgPool1d(3, 2, padding=1, count_include_pad=False)], \
            c * 128
    elif wl.startswith("upsampling2d"):
        mode = "nearest" if wl.endswith("nearest") else "bilinear"
        body, flat = [TD(nn.Conv2d(c, c, 1), (0, 3, 1, 2)), nn.Upsample(scale_factor=2, mode=mode)], c * 32 * 32
    elif wl == "conv2d_transpose":
        body, flat = [TD(nn.ConvTranspose2d(c, 32, 3, 2, padding=1, output_padding=1), (0, 3, 1, 2))], 32 * 28 * 28
    elif wl == "conv1d_transpose":
        body, flat = [TD(nn.ConvTranspose1d(c, 32, 3, 2, padding=1, output_padding=1), (0, 2, 1))], 32 * 128
    elif wl == "bilstm_seq":
        body, flat = [BiLSTM()], shape[0] * 64
    else:
        body, flat = [nn.Linear(c, 64)], shape[0] * 64
    net = nn.Sequential(*body, nn.Flatten(), nn.Linear(flat, 10))
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    xt = torch.from_numpy(x)
    yt = torch.from_numpy(rng.normal(size=(B, 10)).astype(np.float32))
    lf = nn.MSELoss()

    def f():
        opt.zero_grad()
        lf(net(xt), yt).backward()
        opt.step()
print(json.dumps({"us": best_time(f, 20) * 1e6}))
"""


def run_child(fw, wl, threads, repeats):
    # from outside the source tree, so that the installed package is imported
    r = subprocess.run([sys.executable, "-c", CHILD, fw, wl, str(threads), str(repeats)], capture_output=True,
                       text=True, cwd=tempfile.gettempdir())
    if r.returncode:
        return float("nan"), r.stderr.strip().splitlines()[-1:]
    return json.loads(r.stdout.strip().splitlines()[-1])["us"], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    wls = [w for w in WORKLOADS if not a.only or any(s in w for s in a.only.split(","))]
    print(f"one training step (batch 64), pyggml vs PyTorch, {a.threads} thread(s), best of {a.rounds} "
          f"alternating rounds x {a.repeats} repeats")
    print(f"{'workload':26s} {'pyggml us':>10s} {'torch us':>10s} {'torch/pyggml':>13s}")
    for wl in wls:
        ours, theirs, err = [], [], None
        for _ in range(a.rounds):
            t, e = run_child("pyggml", wl, a.threads, a.repeats)
            ours.append(t)
            err = err or e
            t, e = run_child("torch", wl, a.threads, a.repeats)
            theirs.append(t)
            err = err or e
        o, t = min(ours), min(theirs)
        print(f"{wl:26s} {o:10.0f} {t:10.0f} {t / o:13.2f}" + (f"   ({err})" if err else ""))


if __name__ == "__main__":
    main()
