#!/usr/bin/env python3
"""pyggml beside PyTorch on the same workloads, same thread count, one run.

Each (framework, workload) runs in a fresh subprocess so that its peak memory
is its own.  Prints a table: both figures and their ratio (higher is better
for pyggml in the last column).  A benchmark, never a test.

    python tools/bench.py [--threads 2] [--repeats 3] [--rounds 3] [--only step_,mlp,...]

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

WORKLOADS = ["step_4_8_2", "step_8_64_64_4", "mnist_mlp", "wide_mlp", "mnist_cnn", "predict_1", "predict_1000",
             "dqn_cartpole_150ep"]

CHILD = r"""
import json, os, resource, sys, time
import numpy as np
fw, wl, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def best_time(f, n):
    # the best of the repeats: on a shared machine the slow ones measure the neighbours
    f()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            f()
        out.append((time.perf_counter() - t) / n)
    return min(out)

rng = np.random.default_rng(0)
SPECS = {
    "step_4_8_2": ((4, 8, 2), 16, "ce"), "step_8_64_64_4": ((8, 64, 64, 4), 32, "mse"),
    "mnist_mlp": ((784, 500, 10), 500, "ce"), "wide_mlp": ((1024, 2048, 2048, 10), 256, "ce"),
    "predict_1": ((784, 500, 10), 1, "ce"), "predict_1000": ((784, 500, 10), 1000, "ce"),
}

if fw == "pyggml":
    import pyggml as pg
    pg.set_n_threads(threads)

    def mlp(sizes, loss):
        layers = [pg.layers.Dense(h, activation="relu") for h in sizes[1:-1]]
        layers.append(pg.layers.Dense(sizes[-1], activation="softmax" if loss == "ce" else None))
        return pg.Sequential(layers, input_shape=sizes[0]).compile(
            optimizer="adam", loss="categorical_crossentropy" if loss == "ce" else "mse", seed=0)

    def cnn():
        L = pg.layers
        return pg.Sequential([L.Conv2D(8, 3, padding="same", activation="relu"), L.MaxPooling2D(),
                              L.Conv2D(16, 3, padding="same", activation="relu"), L.MaxPooling2D(),
                              L.Flatten(), L.Dense(10, activation="softmax")], input_shape=(28, 28, 1)).compile(
            optimizer="adam", loss="categorical_crossentropy", seed=0)
else:
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)

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
    if fw == "pyggml":
        tr = pg.Trainer(mlp(sizes, loss), batch_size=b)
        f = lambda: tr.step(x, y)
    else:
        f = torch_step(mlp(sizes, loss), torch.from_numpy(x), torch.from_numpy(y), loss)
    result = {"value": best_time(f, 2000) * 1e6, "unit": "us/step", "better": "lower"}
elif wl in ("mnist_mlp", "wide_mlp", "mnist_cnn"):
    if wl == "mnist_cnn":
        b, n, shape = 256, 256 * 8, (28, 28, 1)
    else:
        sizes, b, loss = SPECS[wl]
        n, shape = b * (8 if wl == "mnist_mlp" else 4), (sizes[0],)
    x = rng.random((n,) + shape).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    if fw == "pyggml":
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
        result = {"value": sps * flops / 1e9, "unit": "GFLOP/s", "better": "higher"}
    else:
        result = {"value": sps, "unit": "samples/s", "better": "higher"}
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
    result = {"value": best_time(f, 200 if n == 1 else 20) * 1e6, "unit": "us/call", "better": "lower"}
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
print("RESULT " + json.dumps(result))
"""


# the children run from tools/: from the source root, `import pyggml` would find the unbuilt source
HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(fw, wl, threads, repeats, python=None):
    env = dict(os.environ, PYGGML_ROOT=os.path.dirname(HERE))
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
    ap.add_argument("--wheel-python", help="with --native-python: compare two pyggml installations "
                                           "(interpreters of two venvs) instead of pyggml and PyTorch")
    ap.add_argument("--native-python", help="the interpreter of the venv holding a native build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats inside a process (best kept)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per framework and workload, taking turns")
    ap.add_argument("--only", default="", help="comma-separated workloads: " + ",".join(WORKLOADS))
    a = ap.parse_args()
    if a.wheel_python or a.native_python:
        if not (a.wheel_python and a.native_python):
            ap.error("--wheel-python and --native-python go together")
        compare_builds(a)
        return
    wls = [w for w in WORKLOADS if not a.only or any(o in w for o in a.only.split(","))]
    # found, not imported: the children forked from here would start with its memory
    import importlib.util
    have_torch = importlib.util.find_spec("torch") is not None
    rows = []
    for wl in wls:
        # the two frameworks take turns, a.rounds times each; each keeps its best round
        ours_runs, theirs_runs = [], []
        for _ in range(a.rounds):
            ours_runs.append(run_child("pyggml", wl, a.threads, a.repeats))
            if have_torch:
                theirs_runs.append(run_child("torch", wl, a.threads, a.repeats))
        ours = best(ours_runs)
        theirs = best(theirs_runs) if have_torch else {"value": float("nan"), "peak_mb": float("nan")}
        if ours["better"] == "lower":
            ratio = theirs["value"] / ours["value"]
        else:
            ratio = ours["value"] / theirs["value"]
        rows.append((wl, ours, theirs, ratio))
        if "error" in ours:
            print(f"# {wl} (pyggml) failed: {ours['error']}", file=sys.stderr)
    import platform
    print(f"pyggml vs PyTorch, {a.threads} threads, best of {a.rounds} alternating rounds x {a.repeats} repeats; "
          f"{platform.machine()}, "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    print(f"| workload | unit | pyggml | PyTorch | pyggml advantage | peak MB pyggml | peak MB PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for wl, o, t, r in rows:
        print(f"| {wl} | {o['unit']} | {o['value']:.4g} | {t['value']:.4g} | {r:.2f}x | {o['peak_mb']:.0f} | "
              f"{t['peak_mb']:.0f} |")
    ceiling = sgemm_ceiling(a.threads)
    wide = [(o["value"], t["value"]) for w, o, t, _ in rows if w == "wide_mlp"]
    if wide:
        # GFLOP/s above count 6 flops per weight and sample (the usual convention); neither library
        # computes the first layer's input gradient, so the work done is 2 flops per weight less there
        sizes = (1024, 2048, 2048, 10)
        conv = 6 * sum(p * q for p, q in zip(sizes[:-1], sizes[1:]))
        done = (conv - 2 * sizes[0] * sizes[1]) / conv
        print(f"| wide_mlp, flops done, vs numpy sgemm ({ceiling:.0f} GFLOP/s) | share of ceiling | "
              f"{wide[0][0] * done / ceiling:.0%} | {wide[0][1] * done / ceiling:.0%} | | | |")
    it_ours = import_time("pyggml")
    it_theirs = import_time("torch") if have_torch else float("nan")
    print(f"| import | ms | {it_ours:.0f} | {it_theirs:.0f} | {it_theirs / it_ours:.1f}x | | |")
    sz_ours, sz_theirs = installed_mb("pyggml"), installed_mb("torch") if have_torch else float("nan")
    print(f"| installed size | MB | {sz_ours:.1f} | {sz_theirs:.0f} | {sz_theirs / sz_ours:.0f}x | | |")


if __name__ == "__main__":
    main()
