"""Where a benchmark workload's time goes: ``tools/bench.py``'s workload run under
Linux ``perf`` (sampling, all threads), its samples grouped by kind of work.

    python tools/perf_profile.py keras_transformer predict_small_64 --threads 2

It runs the same child process as bench.py (the installed pyggml of this
interpreter, never the source tree) with ``perf record``, then sums the samples
of each symbol into the groups below and prints one table per workload: the
share of all samples (every thread's), and of the main thread's.  Needs
``perf`` (linux-tools); the README's profile table is this tool's output.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (the workloads and their child process)

# (group, pattern of a symbol or a library): the first that matches
GROUPS = [
    ("matrix products (tinyBLAS, pyggml's packed kernels, dot products)",
     r"tinyBLAS|opk_|pgm_|mul_mat|out_prod|vec_dot|gemm|sgemm"),
    ("convolutions (pyggml's channels-last ops, im2col)", r"conv_cl|im2col|col2im|conv_|pyg_gather|pyg_dc_|pyg_bf_|pyg_mm_"),
    ("recurrent cells (pyggml's fused LSTM/GRU)", r"lstm|gru"),
    ("softmax and cross-entropy", r"soft_max|cross_entropy|expf|vec_exp"),
    ("normalization (layer, batch)", r"norm|batch_norm"),
    ("pooling", r"pool_cl|pool_1d|pool_2d|max_pool"),
    ("bias, activations and their backward", r"bias_act|unary|relu|gelu|silu|tanh|sigmoid|leaky"),
    ("element-wise arithmetic and sums", r"forward_(add|sub|mul|div|scale|sqr|sqrt|sum|acc|neg|log|repeat|mean)|vec_(add|mul|acc|scale|set|max|sum)"),
    ("copies and layout (cont, permute, get_rows, memcpy)", r"dup|cpy|cont|permute|get_rows|memmove|memcpy|memset|transpose|concat|pad"),
    ("optimizer update (AdamW, SGD)", r"opt_step|adamw|sgd"),
    ("threads waiting (ggml_barrier, spinning, sleeping)", r"barrier|sched_yield|futex|spin|finish_task_switch|do_idle|pthread_cond"),
    ("Python and numpy (the host side: the model layer, data, random masks)",
     r"(?-i:^_Py|^Py[A-Z])"),
]
OTHER = "other (graph set-up, ggml's scheduler, the kernel, libc)"


def group_of(sym, dso):
    if sym.startswith("__pyx") or "pyggml_guard" in sym:
        return "pyggml's core (Cython: checks, locks, array copies)"
    if re.search(r"libpython|numpy|multiarray|umath|_pcg64|_generator|_bounded|mtrand", dso):
        return GROUPS[-1][0]
    for name, pat in GROUPS:
        if re.search(pat, sym, re.IGNORECASE):
            return name
    return OTHER


def _wall(python, wl, threads, repeats, env):
    t = time.perf_counter()
    subprocess.run([python, "-c", bench.CHILD, "pyggml", wl, str(threads), str(repeats)], capture_output=True,
                   env=env, cwd=HERE, timeout=1800)
    return time.perf_counter() - t


def plan(python, wl, threads, seconds):
    """(repeats, delay in ms): enough timed repeats for ``seconds`` of samples, which start
    once the process has built, compiled and warmed up its model (from two short runs)."""
    env = dict(os.environ, PYGGML_ROOT=os.path.dirname(HERE))
    t1, t3 = _wall(python, wl, threads, 1, env), _wall(python, wl, threads, 3, env)
    per = max((t3 - t1) / 2, 1e-3)
    start = max(t1 - 2 * per, 0.0)
    return min(max(int(seconds / per) + 1, 3), 5000), int((start + 1.5 * per) * 1000)


def profile(python, wl, threads, repeats, perf, delay_ms, detail):
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        env = dict(os.environ, PYGGML_ROOT=os.path.dirname(HERE))
        # --delay: the samples start after the model is built, compiled and warmed up
        cmd = [perf, "record", "-q", "-F", "2000", "-D", str(delay_ms), "-o", data, "--", python, "-c", bench.CHILD,
               "pyggml", wl, str(threads), str(repeats)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE, timeout=1800)
        if r.returncode != 0 or not os.path.exists(data):
            raise SystemExit(f"perf record failed for {wl}: {(r.stderr or r.stdout)[-500:]}")
        rep = subprocess.run([perf, "report", "-i", data, "--no-children", "--sort", "pid,dso,sym", "--stdio",
                              "-g", "none", "--percent-limit", "0"], capture_output=True, text=True).stdout
    rows = []                     # (percent, tid, dso, symbol)
    for line in rep.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\d+):\S+\s+(\S+)\s+\[[.k]\]\s+(.*)$", line)
        if m:
            rows.append((float(m.group(1)), int(m.group(2)), m.group(3), m.group(4).strip()))
    if not rows:
        raise SystemExit(f"no samples read for {wl}:\n{rep[-800:]}")
    # the main thread: the one that also ran Python
    py = {}
    for pct, tid, dso, sym in rows:
        if "python" in dso.lower():
            py[tid] = py.get(tid, 0.0) + pct
    main = max(py, key=py.get) if py else rows[0][1]
    total = sum(r[0] for r in rows)
    main_total = sum(r[0] for r in rows if r[1] == main) or 1.0
    shares = {}
    if detail:
        per_tid = {}
        for pct, tid, dso, sym in rows:
            per_tid[tid] = per_tid.get(tid, 0.0) + pct
        print("  samples per thread: " + ", ".join(
            f"{'main' if t == main else t} {p / total * 100:.0f}%" for t, p in sorted(per_tid.items(), key=lambda kv: -kv[1])))
        for pct, tid, dso, sym in sorted(rows, reverse=True)[:detail]:
            print(f"  {pct:5.2f}%  {'main' if tid == main else 'other'}  {group_of(sym, dso)[:30]:30s}  {sym[:60]}  ({dso})")
    for pct, tid, dso, sym in rows:
        g = group_of(sym, dso)
        a, b = shares.get(g, (0.0, 0.0))
        shares[g] = (a + pct, b + (pct if tid == main else 0.0))
    return {g: (a / total * 100, b / main_total * 100) for g, (a, b) in shares.items()}, len({r[1] for r in rows})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="+", help="bench.py workloads: " + ", ".join(bench.WORKLOADS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0, help="about this long of samples per workload")
    ap.add_argument("--detail", type=int, default=0, help="also list this many top symbols")
    ap.add_argument("--python", default=sys.executable, help="the interpreter whose pyggml is profiled")
    a = ap.parse_args()
    perf = shutil.which("perf")
    if perf is None:
        raise SystemExit("perf_profile.py needs Linux perf (the linux-tools package) on PATH")
    for wl in a.workloads:
        if wl not in bench.WORKLOADS:
            raise SystemExit(f"unknown workload {wl!r}; known: {', '.join(bench.WORKLOADS)}")
        repeats, delay_ms = plan(a.python, wl, a.threads, a.seconds)
        shares, n_threads = profile(a.python, wl, a.threads, repeats, perf, delay_ms, a.detail)
        print(f"\n{wl}, {a.threads} threads ({n_threads} threads sampled): share of the samples")
        print("| where the time goes | all threads | main thread |")
        print("|---|---|---|")
        for g, (all_, main_) in sorted(shares.items(), key=lambda kv: -kv[1][0]):
            if all_ >= 0.5:
                print(f"| {g} | {all_:.0f}% | {main_:.0f}% |")


if __name__ == "__main__":
    main()
