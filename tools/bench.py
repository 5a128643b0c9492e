#!/usr/bin/env python3
"""pyggml beside PyTorch on the same workloads, same thread count, one run.

Each (framework, workload) runs in a fresh subprocess so that its peak memory
is its own.  Prints a table: both figures and their ratio (higher is better
for pyggml in the last column).  A benchmark, never a test.

    python tools/bench.py [--threads 2] [--repeats 3] [--rounds 3] [--only step_,mlp,...] [--no-rpc]
    python tools/bench.py --threads 1,2 --only keras_,mnist    # thread counts side by side, one run

The ``keras_*`` rows are models shaped like keras-io's examples, each trained
with ``fit`` (Adam, the example's loss, its batch size) beside the same
network in PyTorch: ``keras_convnet`` (mnist_convnet: Conv2D 32 and 64, max
pooling, dropout, batch 128), ``keras_conv1d_bn`` (timeseries classification:
3 x [Conv1D 64 k3 same, BatchNormalization, ReLU] over 500 steps, global
average pooling, batch 32), ``keras_bilstm`` (IMDB: Embedding 20000x128,
Bidirectional(LSTM 64, sequences), Bidirectional(LSTM 64) over 200 tokens,
batch 32), ``keras_transformer`` (text classification: token and position
embedding 32, one transformer block with 2 heads, dropout, global average
pooling, over 200 tokens, batch 32), ``keras_convmixer`` (image_classification_with_convmixer:
ConvMixer-256/8 on 32x32x3 images, a 2x2 stride-2 stem, eight blocks of a 5x5 depthwise
convolution, gelu, BatchNormalization, a residual add and a 1x1 convolution, batch 128, AdamW).
``products_wide`` times the five
large matrix products of a ``wide_mlp`` step alone (the forward products of
its two 2048-wide layers, their weight gradients and the hidden layer's input
gradient, batch 256): pyggml's ``mul_mat``/``out_prod`` in one graph beside
``torch.mm`` on the same operands.  ``tape_actor_critic`` is keras-io's
actor-critic step as that example writes it (one state, a 4-128 network with
an actor and a critic head, ``GradientTape`` and Adam) beside the same step in
eager PyTorch; ``tape_wgan_gp`` is keras-io's WGAN-GP critic step as that example
writes it (four 5x5 stride-2 convolutions of 64 to 512 filters on padded 28x28
images, LeakyReLU, dropout, a dense head; the critic on fake, real and
interpolated images, the gradient penalty from a tape inside the step's tape,
Adam; batch 64) beside PyTorch's ``create_graph=True`` twin; ``_busy`` rows run
with another process busy on one core.
Besides wall time, every row reports
the CPU time of its process per step (all its threads): steadier than wall
time on a shared machine.

A second table sets a Trainer step and the MNIST MLP's fit on a remote device
(a pyggml RPC server on 127.0.0.1, in its own process) beside the same on the
local CPU, with the round trips each training step makes.

Two builds of pyggml side by side instead (e.g. the portable wheel and a native
build, each installed in its own venv; default workload: the MNIST MLP):

    python tools/bench.py --wheel-python WHEELVENV/bin/python --native-python NATIVEVENV/bin/python
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = ["step_4_8_2", "step_8_64_64_4", "mnist_mlp", "mnist_mlp_busy", "wide_mlp", "mnist_cnn",
             "predict_small_1", "predict_small_64", "predict_1", "predict_1000", "dqn_cartpole_150ep", "keras_convnet", "keras_conv1d_bn", "keras_bilstm", "keras_transformer", "keras_convmixer",
             "products_wide",
             "tape_actor_critic", "tape_actor_critic_busy", "tape_wgan_gp"]
RPC_WORKLOADS = ["step_8_64_64_4", "mnist_mlp"]      # also over loopback RPC (fw "pyggml-rpc")

CHILD = r"""
import json, os, resource, sys, time
import numpy as np
fw, wl, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

CPU = []          # the least CPU time (this process, all threads) of the repeats of best_time, per call

def best_time(f, n):
    # the best of the repeats: on a shared machine the slow ones measure the neighbours
    f()
    out, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(n):
            f()
        out.append((time.perf_counter() - t) / n)
        cpu.append((time.process_time() - c) / n)
    CPU.append(min(cpu))
    return min(out)

rng = np.random.default_rng(0)
VOCAB, SEQ, TS_LEN = 20000, 200, 500
SPECS = {
    "step_4_8_2": ((4, 8, 2), 16, "ce"), "step_8_64_64_4": ((8, 64, 64, 4), 32, "mse"),
    "mnist_mlp": ((784, 500, 10), 500, "ce"), "wide_mlp": ((1024, 2048, 2048, 10), 256, "ce"),
    "predict_1": ((784, 500, 10), 1, "ce"), "predict_1000": ((784, 500, 10), 1000, "ce"),
    "predict_small_1": ((4, 64, 64, 2), 1, "ce"), "predict_small_64": ((4, 64, 64, 2), 64, "ce"),
}

BUSY = None
if wl.endswith("_busy"):
    # one other process busy on the machine for the whole measurement (a pure-Python
    # loop on one core), the same for both frameworks
    import subprocess as _sp
    BUSY = _sp.Popen([sys.executable, "-c", "while True: pass"])
    wl = wl[:-len("_busy")]

if fw.startswith("pyggml"):
    import pyggml as pg
    pg.set_n_threads(threads)
    # pyggml-rpc: the same models on the device of the RPC server at $PYGGML_RPC
    BACKEND = pg.rpc.connect(os.environ["PYGGML_RPC"])[0] if fw == "pyggml-rpc" else "auto"

    def mlp(sizes, loss):
        layers = [pg.layers.Dense(h, activation="relu") for h in sizes[1:-1]]
        layers.append(pg.layers.Dense(sizes[-1], activation="softmax" if loss == "ce" else None))
        return pg.Sequential(layers, input_shape=sizes[0]).compile(
            optimizer="adam", loss="categorical_crossentropy" if loss == "ce" else "mse", seed=0, backend=BACKEND)

    def cnn():
        L = pg.layers
        return pg.Sequential([L.Conv2D(8, 3, padding="same", activation="relu"), L.MaxPooling2D(),
                              L.Conv2D(16, 3, padding="same", activation="relu"), L.MaxPooling2D(),
                              L.Flatten(), L.Dense(10, activation="softmax")], input_shape=(28, 28, 1)).compile(
            optimizer="adam", loss="categorical_crossentropy", seed=0, backend=BACKEND)
    def keras_model(wl):
        L = pg.layers
        if wl == "keras_convnet":
            m = pg.Sequential([L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
                               L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2), L.Flatten(), L.Dropout(0.5),
                               L.Dense(10, activation="softmax")], input_shape=(28, 28, 1))
            loss = "categorical_crossentropy"
        elif wl == "keras_conv1d_bn":
            layers = []
            for _ in range(3):
                layers += [L.Conv1D(64, 3, padding="same"), L.BatchNormalization(), L.ReLU()]
            m = pg.Sequential(layers + [L.GlobalAveragePooling1D(), L.Dense(2, activation="softmax")],
                              input_shape=(TS_LEN, 1))
            loss = "sparse_categorical_crossentropy"
        elif wl == "keras_convmixer":
            def act_bn(x):
                return L.BatchNormalization()(L.Activation("gelu")(x))
            inp = pg.Input((32, 32, 3))
            x = act_bn(L.Conv2D(256, 2, strides=2)(L.Rescaling(1 / 255)(inp)))
            for _ in range(8):
                x0 = x
                x = L.Add()([act_bn(L.DepthwiseConv2D(5, padding="same")(x)), x0])
                x = act_bn(L.Conv2D(256, 1)(x))
            m = pg.Model(inp, L.Dense(10, activation="softmax")(L.GlobalAveragePooling2D()(x)))
            return m.compile(optimizer=pg.optimizers.AdamW(learning_rate=1e-3, weight_decay=1e-4),
                             loss="sparse_categorical_crossentropy", seed=0, backend=BACKEND)
        elif wl == "keras_bilstm":
            inp = pg.Input((SEQ,), dtype="int32")
            x = L.Embedding(VOCAB, 128)(inp)
            x = L.Bidirectional(L.LSTM(64, return_sequences=True))(x)
            x = L.Bidirectional(L.LSTM(64))(x)
            m = pg.Model(inp, L.Dense(1, activation="sigmoid")(x))
            loss = "binary_crossentropy"
        else:
            class TokPos(L.Layer):
                def __init__(self, **kw):
                    super().__init__(**kw)
                    self.tok, self.pos = L.Embedding(VOCAB, 32), L.Embedding(SEQ, 32)

                def call(self, x):
                    return self.tok(x) + self.pos(pg.ops.arange(0, x.shape[-1]))

            class Block(L.Layer):
                def __init__(self, **kw):
                    super().__init__(**kw)
                    self.att = L.MultiHeadAttention(num_heads=2, key_dim=32)
                    self.ffn = pg.Sequential([L.Dense(32, activation="relu"), L.Dense(32)])
                    self.ln1, self.ln2 = L.LayerNormalization(epsilon=1e-6), L.LayerNormalization(epsilon=1e-6)
                    self.d1, self.d2 = L.Dropout(0.1), L.Dropout(0.1)

                def call(self, x):
                    x = self.ln1(x + self.d1(self.att(x, x)))
                    return self.ln2(x + self.d2(self.ffn(x)))

            inp = pg.Input((SEQ,), dtype="int32")
            x = L.GlobalAveragePooling1D()(Block()(TokPos()(inp)))
            x = L.Dense(20, activation="relu")(L.Dropout(0.1)(x))
            m = pg.Model(inp, L.Dense(2, activation="softmax")(L.Dropout(0.1)(x)))
            loss = "sparse_categorical_crossentropy"
        return m.compile(optimizer="adam", loss=loss, seed=0, backend=BACKEND)
else:
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)

    def keras_model(wl):
        nn = torch.nn
        if wl == "keras_convnet":
            return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(5 * 5 * 64, 10))
        if wl == "keras_conv1d_bn":
            layers, cin = [], 1
            for _ in range(3):
                # Keras's BatchNormalization: epsilon 1e-3, momentum 0.99 (PyTorch's momentum is 1 - that)
                layers += [nn.Conv1d(cin, 64, 3, padding=1), nn.BatchNorm1d(64, eps=1e-3, momentum=0.01), nn.ReLU()]
                cin = 64
            return nn.Sequential(*layers, nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 2))
        if wl == "keras_convmixer":
            def act_bn():
                # Keras's gelu is the exact one; its BatchNormalization: epsilon 1e-3, momentum 0.99
                return [nn.GELU(), nn.BatchNorm2d(256, eps=1e-3, momentum=0.01)]

            class Residual(nn.Module):
                def __init__(self, *mods):
                    super().__init__()
                    self.f = nn.Sequential(*mods)

                def forward(self, x):
                    return self.f(x) + x
            blocks = []
            for _ in range(8):
                blocks += [Residual(nn.Conv2d(256, 256, 5, padding=2, groups=256), *act_bn()),
                           nn.Conv2d(256, 256, 1), *act_bn()]
            return nn.Sequential(nn.Conv2d(3, 256, 2, stride=2), *act_bn(), *blocks, nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(256, 10))
        if wl == "keras_bilstm":
            class BiLSTM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.emb = nn.Embedding(VOCAB, 128)
                    self.l1 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
                    self.l2 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
                    self.fc = nn.Linear(128, 1)

                def forward(self, ids):
                    s, _ = self.l1(self.emb(ids))
                    _, (h, _) = self.l2(s)
                    return self.fc(torch.cat([h[0], h[1]], dim=1))
            return BiLSTM()

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok, self.pos = nn.Embedding(VOCAB, 32), nn.Embedding(SEQ, 32)
                # Keras's key_dim=32 per head (64 wide projections), as pyggml's layer
                self.q, self.k, self.v, self.o = nn.Linear(32, 64), nn.Linear(32, 64), nn.Linear(32, 64), nn.Linear(64, 32)
                self.ln1, self.ln2 = nn.LayerNorm(32, eps=1e-6), nn.LayerNorm(32, eps=1e-6)
                self.ff = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32))
                self.drop = nn.Dropout(0.1)
                self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 20), nn.ReLU(), nn.Dropout(0.1),
                                          nn.Linear(20, 2))

            def forward(self, ids):
                x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
                bb, t, _ = x.shape
                q = self.q(x).view(bb, t, 2, 32).transpose(1, 2)
                k = self.k(x).view(bb, t, 2, 32).transpose(1, 2)
                v = self.v(x).view(bb, t, 2, 32).transpose(1, 2)
                a = torch.softmax(q @ k.transpose(-1, -2) / 32 ** 0.5, -1) @ v
                a = self.o(a.transpose(1, 2).reshape(bb, t, 64))
                x = self.ln1(x + self.drop(a))
                x = self.ln2(x + self.drop(self.ff(x)))
                return self.head(x.mean(1))
        return Block()

    def mlp(sizes, loss):
        mods = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            mods += [torch.nn.Linear(a, b), torch.nn.ReLU()]
        return torch.nn.Sequential(*mods[:-1])

    def cnn():
        return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                   torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                   torch.nn.Flatten(), torch.nn.Linear(16 * 7 * 7, 10))

    def torch_step(net, x, y, loss):
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        lf = torch.nn.CrossEntropyLoss() if loss == "ce" else torch.nn.MSELoss()

        def step():
            opt.zero_grad()
            out = lf(net(x), y)
            out.backward()
            opt.step()
        return step

result = {}
if wl.startswith("step_"):
    sizes, b, loss = SPECS[wl]
    x = rng.random((b, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], b)]
    if fw.startswith("pyggml"):
        tr = pg.Trainer(mlp(sizes, loss), batch_size=b)
        f = lambda: tr.step(x, y)
    else:
        f = torch_step(mlp(sizes, loss), torch.from_numpy(x), torch.from_numpy(y), loss)
    result = {"value": best_time(f, 2000) * 1e6, "unit": "us/step", "better": "lower", "cpu_value": CPU[-1] * 1e6}
elif wl in ("mnist_mlp", "wide_mlp", "mnist_cnn"):
    if wl == "mnist_cnn":
        b, n, shape = 256, 256 * 8, (28, 28, 1)
    else:
        sizes, b, loss = SPECS[wl]
        n, shape = b * (8 if wl == "mnist_mlp" else 4), (sizes[0],)
    x = rng.random((n,) + shape).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    if fw.startswith("pyggml"):
        m = cnn() if wl == "mnist_cnn" else mlp(sizes, "ce")
        f = lambda: m.fit(x, y, epochs=1, batch_size=b, verbose=0, shuffle=False)
    else:
        net = cnn() if wl == "mnist_cnn" else mlp(sizes, "ce")
        xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy() if wl == "mnist_cnn" else x)
        yt = torch.from_numpy(y)
        steps = [torch_step(net, xt[i:i + b], yt[i:i + b], "ce") for i in range(0, n, b)]
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        lf = torch.nn.CrossEntropyLoss()

        def f():
            for i in range(0, n, b):
                opt.zero_grad()
                lf(net(xt[i:i + b]), yt[i:i + b]).backward()
                opt.step()
    t = best_time(f, 1)
    sps = n / t
    if wl == "wide_mlp":
        flops = 6 * sum(a * c for a, c in zip(sizes[:-1], sizes[1:]))
        result = {"value": sps * flops / 1e9, "unit": "GFLOP/s", "better": "higher",
                  "cpu_value": n / CPU[-1] * flops / 1e9}
    else:
        result = {"value": sps, "unit": "samples/s", "better": "higher", "cpu_value": n / CPU[-1]}
elif wl.startswith("keras_"):
    # a training step of fit, the example's batch size, over 4 batches
    b = {"keras_convnet": 128, "keras_convmixer": 128}.get(wl, 32)
    n = 4 * b
    if wl == "keras_convnet":
        x, y = rng.random((n, 28, 28, 1)).astype(np.float32), np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    elif wl == "keras_convmixer":
        x, y = (rng.random((n, 32, 32, 3)) * 255).astype(np.float32), rng.integers(0, 10, n)
    elif wl == "keras_conv1d_bn":
        x, y = rng.random((n, TS_LEN, 1)).astype(np.float32), rng.integers(0, 2, n)
    else:
        x, y = rng.integers(1, VOCAB, size=(n, SEQ)).astype(np.int32), rng.integers(0, 2, n)
    if wl == "keras_bilstm":
        y = y.astype(np.float32)[:, None]
    if fw.startswith("pyggml"):
        m = keras_model(wl)
        f = lambda: m.fit(x, y, epochs=1, batch_size=b, verbose=0, shuffle=False)
    else:
        net = keras_model(wl).train()
        xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy() / 255 if wl == "keras_convmixer" else
                              x.transpose(0, 3, 1, 2).copy() if wl == "keras_convnet" else
                              x.transpose(0, 2, 1).copy() if wl == "keras_conv1d_bn" else x.astype(np.int64))
        yt = torch.from_numpy(y.astype(np.int64) if wl in ("keras_conv1d_bn", "keras_transformer", "keras_convmixer")
                              else y)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-4) if wl == "keras_convmixer" else \
            torch.optim.Adam(net.parameters(), lr=1e-3)
        lf = torch.nn.BCEWithLogitsLoss() if wl == "keras_bilstm" else torch.nn.CrossEntropyLoss()

        def f():
            for i in range(0, n, b):
                opt.zero_grad()
                lf(net(xt[i:i + b]), yt[i:i + b]).backward()
                opt.step()
    result = {"value": best_time(f, 1) * 1e3 / 4, "unit": "ms/step", "better": "lower"}
    result["cpu_value"] = CPU[-1] * 1e3 / 4
elif wl.startswith("predict_"):
    sizes, n, _ = SPECS[wl]
    x = rng.random((n, sizes[0])).astype(np.float32)
    if fw == "pyggml":
        m = mlp(sizes, "ce")
        f = lambda: m.predict(x, batch_size=max(n, 32))
    else:
        net = mlp(sizes, "ce").eval()
        xt = torch.from_numpy(x)

        def f():
            with torch.no_grad():
                torch.softmax(net(xt), -1).numpy()
    result = {"value": best_time(f, 200 if n == 1 else 20) * 1e6, "unit": "us/call", "better": "lower",
              "cpu_value": CPU[-1] * 1e6}
elif wl == "dqn_cartpole_150ep":
    # the DQN example and its PyTorch twin for 150 training episodes (1,000 random
    # steps, then a training step per environment step): their time per env step
    import subprocess as sp
    root = os.environ["PYGGML_ROOT"]
    script = os.path.join(root, "examples", "dqn_cartpole.py") if fw == "pyggml" else \
        os.path.join(root, "tools", "dqn_cartpole_torch.py")
    if not os.path.exists(script):
        result = {"value": float("nan"), "unit": "us/env step", "better": "lower"}
    else:
        out = sp.run([sys.executable, script, "--episodes", "150", "--seed", "0", "--eval-episodes", "1"],
                     capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads))).stdout
        val = float("nan")
        for line in out.splitlines():
            if "per env step" in line or "per environment step" in line:
                for tok in line.replace("us", " us").split():
                    try:
                        val = float(tok)
                        break
                    except ValueError:
                        pass
        result = {"value": val, "unit": "us/env step", "better": "lower",
                  "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
elif wl == "tape_actor_critic":
    # keras-io's actor-critic (CartPole) as it writes its step: one state through a 4-128
    # trunk, a 2-way softmax actor and a 1-unit critic, a loss on both, a GradientTape and
    # Adam; PyTorch's twin in eager mode with backward()
    x = rng.random((1, 4)).astype(np.float32)
    if fw == "pyggml":
        L = pg.layers
        inp = pg.Input(shape=(4,))
        common = L.Dense(128, activation="relu")(inp)
        model = pg.Model(inp, [L.Dense(2, activation="softmax")(common), L.Dense(1)(common)])
        opt = pg.optimizers.Adam(learning_rate=0.01)

        def f():
            with pg.GradientTape() as tape:
                probs, value = model(x)
                loss = -pg.ops.log(probs[0, 0]) * 0.5 + pg.ops.mean((value - 1.0) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
    else:
        trunk, actor, critic = torch.nn.Linear(4, 128), torch.nn.Linear(128, 2), torch.nn.Linear(128, 1)
        opt = torch.optim.Adam([*trunk.parameters(), *actor.parameters(), *critic.parameters()], lr=0.01)
        xt = torch.from_numpy(x)

        def f():
            h = torch.relu(trunk(xt))
            probs, value = torch.softmax(actor(h), -1), critic(h)
            loss = -torch.log(probs[0, 0]) * 0.5 + ((value - 1.0) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    result = {"value": best_time(f, 300) * 1e6, "unit": "us/step", "better": "lower", "cpu_value": CPU[-1] * 1e6}
elif wl == "tape_wgan_gp":
    # keras-io's wgan_gp critic step (its discriminator model, its gradient_penalty and the
    # critic half of its train_step), batch 64
    bsz = 64
    real, fake = rng.normal(size=(2, bsz, 28, 28, 1)).astype(np.float32)
    alpha = rng.random((bsz, 1, 1, 1)).astype(np.float32)
    if fw == "pyggml":
        L, ops = pg.layers, pg.ops
        inp = pg.Input((28, 28, 1))
        h = L.ZeroPadding2D((2, 2))(inp)
        for filters, drop in ((64, False), (128, True), (256, True), (512, False)):
            h = L.LeakyReLU(0.2)(L.Conv2D(filters, 5, strides=2, padding="same")(h))
            h = L.Dropout(0.3)(h) if drop else h
        critic = pg.Model(inp, L.Dense(1)(L.Dropout(0.2)(L.Flatten()(h))))
        opt = pg.optimizers.Adam(learning_rate=2e-4, beta_1=0.5, beta_2=0.9)

        def f():
            with pg.GradientTape() as tape:
                cost = ops.mean(critic(fake, training=True)) - ops.mean(critic(real, training=True))
                interpolated = real + alpha * (fake - real)
                with pg.GradientTape() as gp_tape:
                    gp_tape.watch(interpolated)
                    pred = critic(interpolated, training=True)
                grads = gp_tape.gradient(pred, [interpolated])[0]
                norm = ops.sqrt(ops.sum(ops.square(grads), axis=[1, 2, 3]))
                loss = cost + 10.0 * ops.mean((norm - 1.0) ** 2)
            d_grads = tape.gradient(loss, critic.trainable_variables)
            opt.apply_gradients(zip(d_grads, critic.trainable_variables))
    else:
        nn, F = torch.nn, torch.nn.functional
        convs = nn.ModuleList([nn.Conv2d(a, b_, 5, 2, 2) for a, b_ in ((1, 64), (64, 128), (128, 256), (256, 512))])
        head = nn.Linear(512 * 2 * 2, 1)
        opt = torch.optim.Adam([*convs.parameters(), *head.parameters()], lr=2e-4, betas=(0.5, 0.9))

        def critic(x):
            x = F.pad(x, (2, 2, 2, 2))
            for i, c in enumerate(convs):
                x = F.leaky_relu(c(x), 0.2)
                x = F.dropout(x, 0.3, True) if i in (1, 2) else x
            return head(F.dropout(x.flatten(1), 0.2, True))
        rt, ft = (torch.from_numpy(a.transpose(0, 3, 1, 2).copy()) for a in (real, fake))
        at = torch.from_numpy(alpha)

        def f():
            opt.zero_grad()
            cost = critic(ft).mean() - critic(rt).mean()
            interpolated = (rt + at * (ft - rt)).requires_grad_(True)
            grads, = torch.autograd.grad(critic(interpolated).sum(), interpolated, create_graph=True)
            loss = cost + 10.0 * ((grads.flatten(1).norm(dim=1) - 1.0) ** 2).mean()
            loss.backward()
            opt.step()
    result = {"value": best_time(f, 2) * 1e3, "unit": "ms/step", "better": "lower", "cpu_value": CPU[-1] * 1e3}
elif wl == "products_wide":
    # the five large products of a wide_mlp step (batch 256): the two layers' forward
    # products, their weight gradients, the hidden layer's input gradient; pyggml's
    # mul_mat/out_prod in one graph, PyTorch's torch.mm on the same operands
    bsz, d0, d1 = 256, 1024, 2048
    X, W1, H1 = rng.random((bsz, d0), np.float32), rng.random((d1, d0), np.float32), rng.random((bsz, d1), np.float32)
    W2, D1, D2 = rng.random((d1, d1), np.float32), rng.random((bsz, d1), np.float32), rng.random((bsz, d1), np.float32)
    flops = 2 * bsz * d1 * (2 * d0 + 3 * d1)
    if fw == "pyggml":
        from pyggml import core, ops
        be = core.Backend("cpu")
        sch = core.Scheduler([be], graph_size=64)
        lctx = core.Context(n_tensors=8)
        arrs = [X, W1, H1, W2, D1, D2]
        ts = [lctx.new_tensor(a.shape) for a in arrs]
        buf = core.BackendBuffer(lctx, be)
        for t_, a_ in zip(ts, arrs):
            t_.set(a_)
        tx, tw1, th1, tw2, td1, td2 = ts
        cctx = core.Context(n_tensors=32, graph_size=64)
        outs = [ops.mul_mat(tw1, tx, ctx=cctx), ops.mul_mat(tw2, th1, ctx=cctx), ops.out_prod(tx, td1, ctx=cctx),
                ops.out_prod(th1, td2, ctx=cctx), ops.out_prod(tw2, ops.transpose(td2, ctx=cctx), ctx=cctx)]
        g = core.Graph(cctx, 64)
        for o in outs:
            o.set_output()
            g.build_forward(o)
        f = lambda: sch.compute(g, threads)
    else:
        Xt, W1t, H1t, W2t, D1t, D2t = (torch.from_numpy(a) for a in (X, W1, H1, W2, D1, D2))

        def f():
            Xt @ W1t.T, H1t @ W2t.T, D1t.T @ Xt, D2t.T @ H1t, D2t @ W2t
    t = best_time(f, 1)
    result = {"value": flops / t / 1e9, "unit": "GFLOP/s", "better": "higher", "cpu_value": flops / CPU[-1] / 1e9}
def peak_mb():
    # VmHWM: this process's own high-water mark (ru_maxrss would carry the
    # parent's over exec on Linux)
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result.setdefault("peak_mb", peak_mb())
if BUSY is not None:
    BUSY.kill()
    BUSY.wait()
if "PYGGML_RPC_BENCH" in os.environ and wl in ("step_8_64_64_4", "mnist_mlp"):
    # beside loopback RPC: CPU time per training step, this process's (all its threads) and,
    # over RPC, the server's ($PYGGML_RPC_PID): unlike wall time, a busy machine leaves it alone
    def server_cpu():
        pid = os.environ.get("PYGGML_RPC_PID")
        if not pid:
            return 0.0
        st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
    calls = 5000 if wl.startswith("step_") else 8
    steps = calls * (1 if wl.startswith("step_") else -(-n // b))
    if fw == "pyggml-rpc":
        s0 = pg.rpc.stats(os.environ["PYGGML_RPC"])
    c0, v0 = time.process_time(), server_cpu()
    for _ in range(calls):
        f()
    result["cpu_us_per_step"] = (time.process_time() - c0) / steps * 1e6
    result["server_cpu_us_per_step"] = (server_cpu() - v0) / steps * 1e6
    if fw == "pyggml-rpc":
        # the traffic of a training step, counted by the connection
        s1 = pg.rpc.stats(os.environ["PYGGML_RPC"])
        result.update({k + "_per_step": (s1[k] - s0[k]) / steps for k in s0})
    result["batch"] = b
print("RESULT " + json.dumps(result))
"""


# the children run from tools/: from the source root, `import pyggml` would find the unbuilt source
HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(fw, wl, threads, repeats, python=None, **extra_env):
    env = dict(os.environ, PYGGML_ROOT=os.path.dirname(HERE), **extra_env)
    r = subprocess.run([python or sys.executable, "-c", CHILD, fw, wl, str(threads), str(repeats)],
                       capture_output=True, text=True, env=env, timeout=1800, cwd=HERE)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"value": float("nan"), "unit": "?", "better": "lower", "peak_mb": float("nan"),
            "error": (r.stderr or r.stdout)[-300:]}


def best(runs):
    ok = [r for r in runs if r["value"] == r["value"]]
    if not ok:
        return runs[0]
    pick = min if ok[0]["better"] == "lower" else max
    return pick(ok, key=lambda r: r["value"])


def import_time(mod):
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {mod}"], check=False, capture_output=True, cwd=HERE)
        ts.append(time.perf_counter() - t)
    base = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=False, cwd=HERE)
        base.append(time.perf_counter() - t)
    return (min(ts) - min(base)) * 1e3


def sgemm_ceiling(threads):
    """numpy's BLAS sgemm (2048 cubed) with the same thread count, in GFLOP/s: the machine's ceiling."""
    code = ("import numpy as np, time\n"
            "a = np.random.default_rng(0).random((2048, 2048), dtype=np.float32); b = a.copy(); a @ b\n"
            "best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(10))\n"
            "print(2 * 2048 ** 3 / best / 1e9)")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    try:
        return float(r.stdout.strip())
    except ValueError:
        return float("nan")


def installed_mb(mod):
    r = subprocess.run([sys.executable, "-c", f"import {mod}, os; print(os.path.dirname({mod}.__file__))"],
                       capture_output=True, text=True, cwd=HERE)
    path = r.stdout.strip()
    if not path:
        return float("nan")
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    if mod == "torch":       # torch's own shared libraries live beside it too
        for extra in ("torch.libs", "functorch", "torchgen"):
            p = os.path.join(os.path.dirname(path), extra)
            for d, _, files in os.walk(p):
                total += sum(os.path.getsize(os.path.join(d, f)) for f in files)
    return total / 2**20


def rpc_server(threads):
    """A pyggml RPC server on 127.0.0.1 (a free port) in its own process: (process, endpoint)."""
    code = "import sys, pyggml.rpc as r; sys.exit(r.cli_main(sys.argv[1:]))"
    p = subprocess.Popen([sys.executable, "-c", code, "--port", "0", "--threads", str(threads)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=HERE)
    line = p.stdout.readline()
    if "listening on " not in line:
        p.kill()
        raise RuntimeError(f"the RPC server did not start: {line}{p.stdout.read()}")
    # its later output (one line per client) is not read: too little to fill the pipe
    return p, line.split("listening on ")[1].split()[0]


def rpc_rows(wls, threads, repeats, rounds):
    """(workload, local run, remote run) for the RPC workloads in wls; local and
    remote take turns, each keeps its best round."""
    p, endpoint = rpc_server(threads)
    rows = []
    try:
        for wl in [w for w in RPC_WORKLOADS if w in wls]:
            local, remote = [], []
            for _ in range(rounds):
                local.append(run_child("pyggml", wl, threads, repeats, PYGGML_RPC_BENCH="1"))
                remote.append(run_child("pyggml-rpc", wl, threads, repeats, PYGGML_RPC_BENCH="1", PYGGML_RPC=endpoint,
                                        PYGGML_RPC_PID=str(p.pid)))
            rows.append((wl, best(local), best(remote)))
            if "error" in rows[-1][2]:
                print(f"# {wl} (pyggml over RPC) failed: {rows[-1][2]['error']}", file=sys.stderr)
    finally:
        p.kill()
        p.wait()
    return rows


def print_rpc_table(rows, threads):
    print()
    print(f"pyggml on a remote device over loopback RPC (a server process on 127.0.0.1, {threads} threads) "
          f"beside the local CPU")
    print("| workload | unit | local CPU | loopback RPC | RPC time / local | round trips per step | "
          "KB sent per step | CPU us per step, local | CPU us per step, RPC client + server |")
    print("|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for wl, lo, re in rows:
        ratio = re["value"] / lo["value"] if lo["unit"] == "us/step" else lo["value"] / re["value"]
        print(f"| {wl} | {lo['unit']} | {lo['value']:.4g} | {re['value']:.4g} | {ratio:.2f}x | "
              f"{re.get('round_trips_per_step', nan):.2f} | {re.get('bytes_sent_per_step', nan) / 1024:.3g} | "
              f"{lo.get('cpu_us_per_step', nan):.4g} | "
              f"{re.get('cpu_us_per_step', nan):.4g} + {re.get('server_cpu_us_per_step', nan):.4g} |")


def ratio_of(ours, theirs, key="value"):
    a, b = ours.get(key, float("nan")), theirs.get(key, float("nan"))
    if ours["better"] == "lower":
        return b / a
    return a / b


def load_average():
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def build_of(python):
    """The CPU target and variant a pyggml installation runs with."""
    code = "import pyggml.core as c, pyggml._config as k; i = c.load_info(); print(k.cpu_target, i['cpu_variant'])"
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=HERE)
    return r.stdout.strip() or f"(pyggml does not import: {r.stderr.strip()[-200:]})"


def compare_builds(a):
    """Two installations of pyggml (the wheel's venv and a native build's), the
    same workloads, taking turns; each keeps its best round."""
    wls = [w for w in WORKLOADS if any(o in w for o in (a.only or "mnist_mlp").split(","))]
    builds = {"wheel": a.wheel_python, "native": a.native_python}
    print(f"pyggml builds side by side, {a.threads} threads, best of {a.rounds} alternating rounds x "
          f"{a.repeats} repeats; {time.strftime('%Y-%m-%d')}")
    for name, py in builds.items():
        print(f"- {name}: {py}: cpu target / variant {build_of(py)}")
    print("| workload | unit | wheel | native | wheel / native |")
    print("|---|---|---|---|---|")
    for wl in wls:
        runs = {name: [] for name in builds}
        for _ in range(a.rounds):
            for name, py in builds.items():
                runs[name].append(run_child("pyggml", wl, a.threads, a.repeats, python=py))
        w, n = best(runs["wheel"]), best(runs["native"])
        for name, r in (("wheel", w), ("native", n)):
            if "error" in r:
                print(f"# {wl} ({name}) failed: {r['error']}", file=sys.stderr)
        ratio = w["value"] / n["value"] if w["better"] == "higher" else n["value"] / w["value"]
        print(f"| {wl} | {w['unit']} | {w['value']:.4g} | {n['value']:.4g} | {ratio:.0%} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="2", help="a thread count, or several (1,2): measured side by side")
    ap.add_argument("--wheel-python", help="with --native-python: compare two pyggml installations "
                                           "(interpreters of two venvs) instead of pyggml and PyTorch")
    ap.add_argument("--native-python", help="the interpreter of the venv holding a native build")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats inside a process (best kept)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per framework and workload, taking turns")
    ap.add_argument("--only", default="", help="comma-separated workloads: " + ",".join(WORKLOADS))
    ap.add_argument("--no-rpc", action="store_true", help="leave out the table over loopback RPC")
    a = ap.parse_args()
    thread_counts = [int(t) for t in str(a.threads).split(",") if t.strip()]
    if a.wheel_python or a.native_python:
        if not (a.wheel_python and a.native_python):
            ap.error("--wheel-python and --native-python go together")
        a.threads = thread_counts[0]
        compare_builds(a)
        return
    wls = [w for w in WORKLOADS if not a.only or any(o in w for o in a.only.split(","))]
    # found, not imported: the children forked from here would start with its memory
    import importlib.util
    have_torch = importlib.util.find_spec("torch") is not None
    load_before = load_average()
    started = time.strftime("%H:%M")
    rows = {t: [] for t in thread_counts}
    for wl in wls:
        # the two frameworks (and the thread counts) take turns, a.rounds times each; each keeps its best round
        ours_runs = {t: [] for t in thread_counts}
        theirs_runs = {t: [] for t in thread_counts}
        for _ in range(a.rounds):
            for t in thread_counts:
                ours_runs[t].append(run_child("pyggml", wl, t, a.repeats))
                if have_torch:
                    theirs_runs[t].append(run_child("torch", wl, t, a.repeats))
        for t in thread_counts:
            ours = best(ours_runs[t])
            theirs = best(theirs_runs[t]) if have_torch else {"value": float("nan"), "peak_mb": float("nan")}
            # CPU time: each framework's least over its rounds
            for runs, pick in ((ours_runs[t], ours), (theirs_runs[t], theirs)):
                cpus = [r["cpu_value"] for r in runs if r.get("cpu_value", float("nan")) == r.get("cpu_value")]
                if cpus:
                    pick["cpu_value"] = (min if pick.get("better") == "lower" else max)(cpus)
            rows[t].append((wl, ours, theirs, ratio_of(ours, theirs), ratio_of(ours, theirs, "cpu_value")))
            if "error" in ours:
                print(f"# {wl} (pyggml, {t} threads) failed: {ours['error']}", file=sys.stderr)
    load_after = load_average()
    import platform
    for t in thread_counts:
        print(f"pyggml vs PyTorch, {t} thread{'s' if t > 1 else ''}, best of {a.rounds} alternating rounds x "
              f"{a.repeats} repeats; {platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')} "
              f"{started}-{time.strftime('%H:%M')}, load average {load_before[0]:.1f} before, "
              f"{load_after[0]:.1f} after")
        print("| workload | unit | pyggml | PyTorch | pyggml advantage | CPU-time advantage | peak MB pyggml | "
              "peak MB PyTorch |")
        print("|---|---|---|---|---|---|---|---|")
        for wl, o, th, r, rc in rows[t]:
            print(f"| {wl} | {o['unit']} | {o['value']:.4g} | {th['value']:.4g} | {r:.2f}x | {rc:.2f}x | "
                  f"{o['peak_mb']:.0f} | {th['peak_mb']:.0f} |")
        ceiling = sgemm_ceiling(t)
        wide = [(o["value"], th["value"]) for w, o, th, _, _ in rows[t] if w == "wide_mlp"]
        if wide:
            # GFLOP/s above count 6 flops per weight and sample (the usual convention); neither library
            # computes the first layer's input gradient, so the work done is 2 flops per weight less there
            sizes = (1024, 2048, 2048, 10)
            conv = 6 * sum(p * q for p, q in zip(sizes[:-1], sizes[1:]))
            done = (conv - 2 * sizes[0] * sizes[1]) / conv
            print(f"| wide_mlp, flops done, vs numpy sgemm ({ceiling:.0f} GFLOP/s) | share of ceiling | "
                  f"{wide[0][0] * done / ceiling:.0%} | {wide[0][1] * done / ceiling:.0%} | | | | |")
        print()
    it_ours = import_time("pyggml")
    it_theirs = import_time("torch") if have_torch else float("nan")
    print(f"| import | ms | {it_ours:.0f} | {it_theirs:.0f} | {it_theirs / it_ours:.1f}x | | | |")
    sz_ours, sz_theirs = installed_mb("pyggml"), installed_mb("torch") if have_torch else float("nan")
    print(f"| installed size | MB | {sz_ours:.1f} | {sz_theirs:.0f} | {sz_theirs / sz_ours:.0f}x | | | |")
    if not a.no_rpc and any(w in RPC_WORKLOADS for w in wls):
        r = subprocess.run([sys.executable, "-c", "import pyggml; print(pyggml.rpc.available())"],
                           capture_output=True, text=True, cwd=HERE)
        if r.stdout.strip() == "True":
            for t in thread_counts:
                print_rpc_table(rpc_rows(wls, t, a.repeats, a.rounds), t)


if __name__ == "__main__":
    main()
