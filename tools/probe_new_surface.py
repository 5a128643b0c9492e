#!/usr/bin/env python3
"""A hostile probe of the Keras-level surface added in the last round: every function
of ``pyggml.ops``'s Keras ops, the new layers (core, attention, convolutional,
recurrent, preprocessing), ``pg.data.Dataset`` and the image / directory utilities get
wrong ranks, zero and huge sizes, NaN/inf, wrong dtypes, None, bad arguments,
misuse after ``free()``, save/load round trips and deep or odd graphs.

Each case is a snippet run in a worker interpreter; a worker that dies (a signal:
ggml's GGML_ASSERT aborts, a segfault, the OOM killer) marks its case a crash, one that
runs past the timeout a hang, and a fresh worker goes on with the next case.  The
summary counts crashes, hangs, results and errors by the line that raised them, so
unclear errors stand out.  Workers run with an 8 GiB address-space limit: an absurd
allocation shows as a MemoryError where the limit saved it.

    python tools/probe_new_surface.py                  # every set (about 10,000 cases)
    python tools/probe_new_surface.py ops layers -v    # some sets, each error listed
"""

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time

SETUP = r"""
import numpy as np, os, tempfile, json
import pyggml as pg
from pyggml import ops
L = pg.layers
rng = np.random.default_rng(0)
X = rng.random((2, 3, 4)).astype(np.float32)
X2 = rng.random((2, 3)).astype(np.float32)
TMP = tempfile.mkdtemp()
def lam_model(fn, shape):
    return pg.Sequential([L.Lambda(fn)], input_shape=shape).compile(loss="mse")
def roundtrip(m, x):
    p = os.path.join(TMP, "m.gguf"); m.save(p); m2 = pg.models.load_model(p)
    np.testing.assert_allclose(m2.predict(x), m.predict(x), rtol=1e-5, atol=1e-6)
    p = os.path.join(TMP, "m.keras"); m.save(p); m3 = pg.models.load_model(p)
    np.testing.assert_allclose(m3.predict(x), m.predict(x), rtol=1e-5, atol=1e-6)
    return m2
class _Scale(L.Layer):
    def build(self, input_shape):
        self.w = self.add_weight("w", tuple(input_shape[1:]), "ones")
    def call(self, x):
        return x * self.w
def op_model(fn, shape):
    # fn on a graph tensor times a trainable weight: predict and fit run its backward pass
    return pg.Sequential([pg.Input(shape), _Scale(), L.Lambda(fn)]).compile(loss="mse")
X4 = rng.random((2, 4, 4, 2)).astype(np.float32)
X5 = rng.random((2, 5, 4)).astype(np.float32)
"""

WORKER = r'''
import sys, json, os, resource, traceback, io, contextlib
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
import numpy as np
import pyggml as pg
from pyggml import ops
L = pg.layers
cases = json.load(open(sys.argv[1]))
start = int(sys.argv[2])
out = open(sys.argv[3], "a")
st = open(sys.argv[4], "w")
SETUP = open(sys.argv[5]).read()
g0 = {}
exec(SETUP, g0)
for i in range(start, len(cases)):
    name, code = cases[i]
    st.seek(0); st.write(f"{i}\n"); st.truncate(); st.flush()
    g = dict(g0)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            exec(code, g)
        res = {"i": i, "name": name, "ok": True, "res": repr(g.get("R"))[:200]}
    except BaseException as e:
        res = {"i": i, "name": name, "ok": False, "etype": type(e).__name__, "msg": str(e)[:400],
               "where": traceback.extract_tb(e.__traceback__)[-1].filename.split("/")[-1] + ":" + str(traceback.extract_tb(e.__traceback__)[-1].lineno)}
    out.write(json.dumps(res) + "\n"); out.flush()
'''


def run(cases, outfile, setup_file, timeout=30):
    outfile = os.path.abspath(outfile)
    cf = outfile + ".cases.json"
    json.dump(cases, open(cf, "w"))
    wf = outfile + ".worker.py"
    open(wf, "w").write(WORKER)
    stf = outfile + ".status"
    open(outfile, "w").close()
    start = 0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    while start < len(cases):
        p = subprocess.Popen([sys.executable, wf, cf, str(start), outfile, stf, setup_file], cwd=tempfile.gettempdir(), env=env,
                             stdout=subprocess.DEVNULL, stderr=open(outfile + '.stderr', 'w'))
        last, since = None, time.time()
        while p.poll() is None:
            time.sleep(0.1)
            try:
                cur = int(open(stf).read().strip() or -1)
            except Exception:
                cur = None
            if cur != last:
                last, since = cur, time.time()
            elif time.time() - since > timeout:
                p.kill(); p.wait()
                with open(outfile, "a") as o:
                    o.write(json.dumps({"i": cur, "name": cases[cur][0], "hang": True}) + "\n")
                start = cur + 1
                break
        else:
            err = open(outfile + '.stderr').read()
            if p.returncode == 0:
                break
            cur = int(open(stf).read().strip())
            with open(outfile, "a") as o:
                o.write(json.dumps({"i": cur, "name": cases[cur][0], "crash": p.returncode, "stderr": err[-600:]}) + "\n")
            start = cur + 1
            continue


def cases_ops():
    ARR = {
     "0d": "np.float32(2.0)", "1d": "np.arange(3, dtype=np.float32)", "5d": "np.ones((1,2,1,2,3), np.float32)",
     "zero_rows": "np.zeros((0,3), np.float32)", "zero_cols": "np.zeros((2,0), np.float32)", "zero_1d": "np.zeros((0,), np.float32)",
     "nan": "np.full((2,3), np.nan, np.float32)", "inf": "np.full((2,3), -np.inf, np.float32)",
     "str": "np.array([['a','b','c']])", "obj": "np.array([[object(),1,2]], dtype=object)", "bool": "np.ones((2,3), bool)",
     "complex": "np.ones((2,3), complex)", "f64": "np.ones((2,3))", "i64": "np.ones((2,3), np.int64)", "none": "None",
     "list": "[[1,2,3],[4,5,6]]", "ragged": "[[1,2],[3]]", "pystr": "'abc'", "big_i64": "np.array([[2**40, -2**40, 3]])",
     "f16": "np.ones((2,3), np.float16)", "4d": "np.ones((2,3,4,5), np.float32)", "wide": "np.ones((1, 70000), np.float32)",
     "dict": "{'a': 1}", "u64max": "np.array([[2**64-1, 0, 1]], dtype=np.uint64)",
    }
    INT = {"neg1": "-1", "neg100": "-100", "zero": "0", "e9": "10**9", "2p40": "2**40", "minint": "-2**63", "float": "2.5",
           "str": "'2'", "none": "None", "true": "True", "npint": "np.int64(1)", "list00": "[0, 0]", "tuple05": "(0, 5)",
           "nan": "float('nan')", "inf": "float('inf')", "emptylist": "[]", "nested": "[[0]]"}
    SHAPE = {"e9": "(10**9,)", "huge2": "(100000, 100000)", "neg": "(-1, 3)", "zero": "(0, 3)", "5d": "(1,1,1,1,1)",
             "float": "(2.5, 3)", "str": "'3'", "none": "None", "int": "3", "empty": "()", "nested": "((1,2),)", "e9x4": "(10**9,10**9,10**9,10**9)",
             "bool": "(True, 3)", "neg2": "(-2, -3)"}
    # name: (base kwargs, array params, int params, shape params)
    X, X2 = "X", "X2"
    OPS = {
     "sum": ({"x": X, "axis": "1"}, ["x"], ["axis"], []),
     "mean": ({"x": X, "axis": "1"}, ["x"], ["axis"], []),
     "max": ({"x": X, "axis": "1"}, ["x"], ["axis"], []),
     "min": ({"x": X, "axis": "1", "initial": "0.5"}, ["x"], ["axis", "initial"], []),
     "var": ({"x": X, "axis": "1"}, ["x"], ["axis"], []),
     "std": ({"x": X, "axis": "(0, 2)"}, ["x"], ["axis"], []),
     "moments": ({"x": X, "axes": "[0]"}, ["x"], ["axes"], []),
     "logsumexp": ({"x": X, "axis": "-1"}, ["x"], ["axis"], []),
     "argmax": ({"x": X, "axis": "1"}, ["x"], ["axis"], []),
     "argmin": ({"x": X, "axis": "None"}, ["x"], ["axis"], []),
     "transpose": ({"x": X, "axes": "(2, 0, 1)"}, ["x"], ["axes"], []),
     "reshape": ({"x": X, "newshape": "(4, -1)"}, ["x"], [], ["newshape"]),
     "expand_dims": ({"x": X, "axis": "0"}, ["x"], ["axis"], []),
     "squeeze": ({"x": "X[:1]", "axis": "0"}, ["x"], ["axis"], []),
     "concatenate": ({"tensors": "[X, X]", "axis": "1"}, ["tensors"], ["axis"], []),
     "stack": ({"xs": "[X2, X2]", "axis": "0"}, ["xs"], ["axis"], []),
     "split": ({"x": X, "indices_or_sections": "2", "axis": "2"}, ["x"], ["indices_or_sections", "axis"], []),
     "broadcast_to": ({"x": "X2[:1]", "shape": "(4, 3)"}, ["x"], [], ["shape"]),
     "tile": ({"x": X2, "repeats": "(2, 1)"}, ["x"], ["repeats"], ["repeats"]),
     "repeat": ({"x": X2, "repeats": "2", "axis": "1"}, ["x"], ["repeats", "axis"], []),
     "take": ({"x": X, "indices": "np.array([0, 1])", "axis": "1"}, ["x", "indices"], ["axis"], []),
     "one_hot": ({"x": "np.array([0, 2, 1])", "num_classes": "3"}, ["x"], ["num_classes", "axis"], []),
     "zeros": ({"shape": "(2, 3)"}, [], [], ["shape"]),
     "ones": ({"shape": "(2, 3)", "dtype": "'float32'"}, [], ["dtype"], ["shape"]),
     "full": ({"shape": "(2, 3)", "fill_value": "1.5"}, ["fill_value"], [], ["shape"]),
     "eye": ({"N": "3", "M": "4", "k": "1"}, [], ["N", "M", "k"], []),
     "zeros_like": ({"x": X}, ["x"], ["dtype"], []),
     "ones_like": ({"x": X}, ["x"], [], []),
     "full_like": ({"x": X, "fill_value": "2"}, ["x", "fill_value"], [], []),
     "convert_to_tensor": ({"x": X}, ["x"], ["dtype"], []),
     "maximum": ({"x1": X, "x2": "X[:, :1]"}, ["x1", "x2"], [], []),
     "minimum": ({"x1": X, "x2": "0.5"}, ["x1", "x2"], [], []),
     "clip": ({"x": X, "x_min": "0.2", "x_max": "0.8"}, ["x", "x_min", "x_max"], [], []),
     "where": ({"condition": "X > 0.5", "x1": X, "x2": "0.0"}, ["condition", "x1", "x2"], [], []),
     "greater": ({"x1": X, "x2": "0.5"}, ["x1", "x2"], [], []),
     "equal": ({"x1": X, "x2": X}, ["x1", "x2"], [], []),
     "logical_and": ({"x1": X, "x2": X}, ["x1", "x2"], [], []),
     "logical_not": ({"x": X}, ["x"], [], []),
     "power": ({"x1": X, "x2": "2"}, ["x1", "x2"], [], []),
     "add": ({"x1": X, "x2": X}, ["x1", "x2"], [], []),
     "subtract": ({"x1": X, "x2": "X[0]"}, ["x1", "x2"], [], []),
     "multiply": ({"x1": X, "x2": X}, ["x1", "x2"], [], []),
     "divide": ({"x1": X, "x2": X}, ["x1", "x2"], [], []),
     "negative": ({"x": X}, ["x"], [], []),
     "reciprocal": ({"x": X}, ["x"], [], []),
     "rsqrt": ({"x": X}, ["x"], [], []),
     "sign": ({"x": X}, ["x"], [], []),
     "log1p": ({"x": X}, ["x"], [], []),
     "sinh": ({"x": X}, ["x"], [], []),
     "leaky_relu": ({"x": X, "negative_slope": "0.1"}, ["x"], ["negative_slope"], []),
     "relu6": ({"x": X}, ["x"], [], []),
     "hard_swish": ({"x": X}, ["x"], [], []),
     "selu": ({"x": X}, ["x"], [], []),
     "mish": ({"x": X}, ["x"], [], []),
     "log_sigmoid": ({"x": X}, ["x"], [], []),
     "softmax": ({"x": X, "axis": "1"}, ["x"], ["axis"], []),
     "log_softmax": ({"x": X, "axis": "0"}, ["x"], ["axis"], []),
     "cumsum": ({"x": X, "axis": "1"}, ["x"], ["axis", "dtype"], []),
     "norm": ({"x": X, "ord": "None", "axis": "1"}, ["x"], ["ord", "axis"], []),
     "dot": ({"x1": X2, "x2": "X2.T"}, ["x1", "x2"], [], []),
    }
    def call(name, kw):
        return f"R = ops.{name}(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")"
    cases = []
    for name, (base, arrs, ints, shapes) in OPS.items():
        cases.append((f"ops.{name}.base", call(name, base)))
        for p in arrs:
            for an, a in ARR.items():
                kw = dict(base); kw[p] = a
                if p in ("tensors", "xs"):
                    kw[p] = f"[{a}, {a}]"
                    cases.append((f"ops.{name}.{p}={an}", call(name, kw)))
                    kw[p] = f"[X2, {a}]"
                cases.append((f"ops.{name}.{p}={an}" + ("_mixed" if p in ("tensors", "xs") else ""), call(name, kw)))
            if p in ("tensors", "xs"):
                for v in ("[]", "[X2]", "X2", "[X2]*100", "(X2, X)"):
                    kw = dict(base); kw[p] = v
                    cases.append((f"ops.{name}.{p}={v}", call(name, kw)))
        for p in ints:
            for inn, v in INT.items():
                kw = dict(base); kw[p] = v
                cases.append((f"ops.{name}.{p}={inn}", call(name, kw)))
        for p in shapes:
            for sn, v in SHAPE.items():
                kw = dict(base); kw[p] = v
                cases.append((f"ops.{name}.{p}=S{sn}", call(name, kw)))
        # in a graph, via Lambda: odd input shapes (5-D with batch, zero-size)
        if "x" in arrs or "x1" in arrs:
            p = "x" if "x" in arrs else "x1"
            for shp, feed in (("(2,2,2,2)", "np.ones((2,2,2,2,2), np.float32)"), ("(0,)", "np.ones((2,0), np.float32)"),
                              ("(3,)", "np.ones((2,3), np.float32)"), ("(3,4)", "np.ones((2,3,4), np.float32)")):
                kw = dict(base); kw[p] = "t"
                for q in arrs:
                    if q != p and kw[q] in (X, X2):
                        kw[q] = "t"
                body = call(name, kw)[4:]
                cases.append((f"graph.{name}.in{shp}", f"m = lam_model(lambda t: {body}, {shp}); R = m.predict({feed}).shape"))
    return cases


def cases_layers():
    # layer: (ctor code, input_shape code (no batch), feed array code, multi-input?)
    LAYERS = {
     "Lambda": ("L.Lambda(lambda t: t * 2)", "(3,)", "X2", False),
     "Masking": ("L.Masking(0.0)", "(3, 4)", "X", False),
     "GaussianNoise": ("L.GaussianNoise(0.1)", "(3,)", "X2", False),
     "GaussianDropout": ("L.GaussianDropout(0.3)", "(3,)", "X2", False),
     "AlphaDropout": ("L.AlphaDropout(0.3)", "(3,)", "X2", False),
     "ActivityRegularization": ("L.ActivityRegularization(0.01, 0.01)", "(3,)", "X2", False),
     "UnitNormalization": ("L.UnitNormalization()", "(3, 4)", "X", False),
     "GroupNormalization": ("L.GroupNormalization(2)", "(3, 4)", "X", False),
     "EinsumDense": ("L.EinsumDense('ab,bc->ac', 5, bias_axes='c')", "(3,)", "X2", False),
     "EinsumDense3": ("L.EinsumDense('abc,cd->abd', (3, 5))", "(3, 4)", "X", False),
     "DepthwiseConv1D": ("L.DepthwiseConv1D(2)", "(3, 4)", "X", False),
     "DepthwiseConv2D": ("L.DepthwiseConv2D(2)", "(4, 4, 2)", "X4", False),
     "SeparableConv1D": ("L.SeparableConv1D(3, 2)", "(3, 4)", "X", False),
     "SeparableConv2D": ("L.SeparableConv2D(3, 2)", "(4, 4, 2)", "X4", False),
     "RNN_simple": ("L.RNN(L.SimpleRNNCell(4))", "(3, 4)", "X", False),
     "RNN_lstm": ("L.RNN(L.LSTMCell(4), return_sequences=True)", "(3, 4)", "X", False),
     "RNN_gru": ("L.RNN(L.GRUCell(4), return_state=True)", "(3, 4)", "X", False),
     "RNN_stacked": ("L.RNN(L.StackedRNNCells([L.SimpleRNNCell(4), L.GRUCell(3)]))", "(3, 4)", "X", False),
     "Attention": ("L.Attention()", "[(3, 4), (5, 4)]", "[X, X5]", True),
     "AdditiveAttention": ("L.AdditiveAttention()", "[(3, 4), (5, 4)]", "[X, X5]", True),
     "Dot": ("L.Dot(axes=1)", "[(3,), (3,)]", "[X2, X2]", True),
    }
    BADX = {"0d": "np.float32(1)", "1d": "np.ones(3, np.float32)", "5d": "np.ones((2,3,4,1,1), np.float32)",
            "zero_batch": "np.zeros((0,) + SHP, np.float32)", "zero_feat": "np.zeros((2, 0), np.float32)",
            "nan": "np.full((2,) + SHP, np.nan, np.float32)", "inf": "np.full((2,) + SHP, np.inf, np.float32)",
            "str": "np.full((2,) + SHP, 'a')", "obj": "np.full((2,) + SHP, None, dtype=object)",
            "bool": "np.ones((2,) + SHP, bool)", "complex": "np.ones((2,) + SHP, complex)", "f64": "np.ones((2,) + SHP)",
            "i64": "np.ones((2,) + SHP, np.int64)", "none": "None", "wrongshape": "np.ones((2, 7), np.float32)",
            "wrongshape3": "np.ones((2, 3, 9), np.float32)", "bigbatch": "np.ones((5000,) + SHP, np.float32)",
            "list": "np.ones((2,) + SHP).tolist()", "dict": "{'a': 1}"}
    cases = []
    for name, (ctor, shp, feed, multi) in LAYERS.items():
        pre = f"SHP = {shp if not multi else shp + '[0]'}\n"
        if multi:
            mk = (f"ins = [pg.Input(shape=s) for s in {shp}]\n"
                  f"out = {ctor}(ins)\nout = out[0] if isinstance(out, (list, tuple)) else out\n"
                  f"m = pg.Model(ins, out).compile(loss='mse')\n")
        else:
            mk = (f"m = pg.Sequential([{ctor}], input_shape={shp}).compile(loss='mse')\n")
            if name == "RNN_gru":
                mk = (f"i = pg.Input(shape={shp}); o = {ctor}(i)\nm = pg.Model(i, o[0]).compile(loss='mse')\n")
        cases.append((f"{name}.base_predict", pre + mk + f"R = m.predict({feed}).shape"))
        cases.append((f"{name}.fit", pre + mk + f"y = m.predict({feed}); R = m.fit({feed}, y, epochs=1, verbose=0)"))
        cases.append((f"{name}.roundtrip", pre + mk + f"roundtrip(m, {feed})"))
        cases.append((f"{name}.after_free_predict", pre + mk + f"m.free(); R = m.predict({feed})"))
        cases.append((f"{name}.after_free_save", pre + mk + f"m.free(); m.save(os.path.join(TMP, 'f.gguf'))"))
        cases.append((f"{name}.after_free_get_weights", pre + mk + f"m.free(); R = m.get_weights()"))
        cases.append((f"{name}.after_free_fit", pre + mk + f"y = m.predict({feed}); m.free(); R = m.fit({feed}, y, verbose=0)"))
        cases.append((f"{name}.eager", pre + f"lay = {ctor}; R = np.shape(lay({feed}))"))
        cases.append((f"{name}.eager_training", pre + f"lay = {ctor}; R = np.shape(lay({feed}, training=True))"))
        cases.append((f"{name}.eager_twice_diff_shapes", pre + f"lay = {ctor}; lay({feed}); R = np.shape(lay(" +
                      ("[np.ones((2, 6, 7), np.float32), np.ones((2, 6, 7), np.float32)]" if multi else "np.ones((2,) + tuple(d + 2 for d in SHP), np.float32)") + "))"))
        cases.append((f"{name}.before_build_weights", pre + f"lay = {ctor}; R = (lay.get_weights(), lay.weights)"))
        cases.append((f"{name}.config_roundtrip", pre + f"lay = {ctor}; c = lay.get_config(); R = type(lay).from_config(json.loads(json.dumps(c))).get_config() == json.loads(json.dumps(c))"))
        cases.append((f"{name}.compute_output_shape_bad", pre + f"lay = {ctor}; R = lay.compute_output_shape((None, 7, 7, 7, 7))"))
        cases.append((f"{name}.reuse_incompatible", pre + mk + (
            "ins2 = [pg.Input(shape=(6, 9)), pg.Input(shape=(6, 9))]\nR = m.layers[-1](ins2)" if multi else
            "i2 = pg.Input(shape=(9, 9)); R = m.layers[-1](i2); R = pg.Model(i2, R).compile(loss='mse').predict(np.ones((2, 9, 9), np.float32)).shape")))
        for bn, b in BADX.items():
            feed_bad = f"[{b}, X5]" if multi else b
            cases.append((f"{name}.predict_{bn}", pre + mk + f"R = m.predict({feed_bad})"))
            cases.append((f"{name}.eager_{bn}", pre + f"lay = {ctor}; R = np.shape(lay({feed_bad}))"))
            if multi:
                cases.append((f"{name}.predict2_{bn}", pre + mk + f"R = m.predict([{feed}[0], {b}])"))
                cases.append((f"{name}.eager2_{bn}", pre + f"lay = {ctor}; R = np.shape(lay([{feed}[0], {b}]))"))
        for bs in ("(0,)", "(1e9,)", "(3, 0)", "(10**9, 4)", "(3, 4, 5, 6)", "(2, 2, 2, 2, 2)", "()", "(None,)", "(-1, 4)", "(3.5, 4)"):
            if multi:
                cases.append((f"{name}.inshape{bs}", f"ins = [pg.Input(shape={bs}), pg.Input(shape={bs})]\nR = {ctor}(ins)"))
            else:
                cases.append((f"{name}.inshape{bs}", f"m = pg.Sequential([{ctor}], input_shape={bs}).compile(loss='mse'); R = m.predict(np.ones((2,) + tuple(int(d) for d in {bs} if d), np.float32))"))
    # constructor hostility
    CTOR = {
     "GaussianNoise": ["stddev"], "GaussianDropout": ["rate"], "AlphaDropout": ["rate", "noise_shape", "seed"],
     "ActivityRegularization": ["l1", "l2"], "UnitNormalization": ["axis"], "GroupNormalization": ["groups", "axis", "epsilon"],
     "Masking": ["mask_value"], "Dot": ["axes", "normalize"], "Attention": ["dropout", "seed", "score_mode", "use_scale"],
     "AdditiveAttention": ["dropout", "use_scale"],
     "DepthwiseConv1D": ["kernel_size", "strides", "padding", "depth_multiplier", "dilation_rate", "data_format"],
     "DepthwiseConv2D": ["kernel_size", "strides", "padding", "depth_multiplier", "dilation_rate", "data_format"],
     "SeparableConv1D": ["filters", "kernel_size", "strides", "padding", "depth_multiplier", "dilation_rate"],
     "SeparableConv2D": ["filters", "kernel_size", "strides", "padding", "depth_multiplier", "dilation_rate"],
     "EinsumDense": ["equation", "output_shape", "bias_axes", "lora_rank"],
     "SimpleRNNCell": ["units", "dropout", "recurrent_dropout"], "LSTMCell": ["units", "dropout"], "GRUCell": ["units", "reset_after"],
    }
    BASEKW = {"GaussianNoise": {"stddev": "0.1"}, "GaussianDropout": {"rate": "0.2"}, "AlphaDropout": {"rate": "0.2"},
              "Dot": {"axes": "1"}, "DepthwiseConv1D": {"kernel_size": "2"}, "DepthwiseConv2D": {"kernel_size": "2"},
              "SeparableConv1D": {"filters": "3", "kernel_size": "2"}, "SeparableConv2D": {"filters": "3", "kernel_size": "2"},
              "EinsumDense": {"equation": "'ab,bc->ac'", "output_shape": "5"}, "SimpleRNNCell": {"units": "4"},
              "LSTMCell": {"units": "4"}, "GRUCell": {"units": "4"}}
    SHAPES = {"GaussianNoise": ("(3,)", "X2"), "GaussianDropout": ("(3,)", "X2"), "AlphaDropout": ("(3,)", "X2"),
              "ActivityRegularization": ("(3,)", "X2"), "UnitNormalization": ("(3, 4)", "X"), "GroupNormalization": ("(3, 4)", "X"),
              "Masking": ("(3, 4)", "X"), "DepthwiseConv1D": ("(3, 4)", "X"), "DepthwiseConv2D": ("(4, 4, 2)", "X4"),
              "SeparableConv1D": ("(3, 4)", "X"), "SeparableConv2D": ("(4, 4, 2)", "X4"), "EinsumDense": ("(3,)", "X2")}
    VALS = {"neg": "-1", "zero": "0", "e9": "10**9", "float": "2.5", "str": "'x'", "none": "None", "true": "True",
            "nan": "float('nan')", "inf": "float('inf')", "list": "[1, 2, 3]", "tuple0": "(0, 0)", "tupleneg": "(-1, 2)",
            "one": "1.0", "big": "2**40", "obj": "object()", "emptystr": "''", "badeq": "'ab,bc->ad'", "eq3": "'...b,bc->...c'"}
    for lname, params in CTOR.items():
        for p in params:
            for vn, v in VALS.items():
                kw = dict(BASEKW.get(lname, {})); kw[p] = v
                args = ", ".join(f"{k}={x}" for k, x in kw.items())
                if lname.endswith("Cell"):
                    code = f"lay = L.RNN(L.{lname}({args})); m = pg.Sequential([lay], input_shape=(3, 4)).compile(loss='mse'); R = m.fit(X, np.zeros((2, m.output_shape[-1]), np.float32), verbose=0)"
                elif lname in ("Dot", "Attention", "AdditiveAttention"):
                    code = (f"ins = [pg.Input(shape=(3, 4)), pg.Input(shape=(3, 4))]; o = L.{lname}({args})(ins)\n"
                            f"m = pg.Model(ins, o).compile(loss='mse'); y = m.predict([X, X]); R = m.fit([X, X], y, verbose=0)")
                else:
                    shp, feed = SHAPES[lname]
                    code = (f"m = pg.Sequential([L.{lname}({args})], input_shape={shp}).compile(loss='mse'); y = m.predict({feed}); "
                            f"R = m.fit({feed}, y, verbose=0)")
                cases.append((f"ctor.{lname}.{p}={vn}", code))
    # RNN-specific: initial states, masks
    rnn = [
     ("rnn.initial_state_wrong_shape", "i = pg.Input(shape=(3, 4)); s = pg.Input(shape=(7,)); o = L.RNN(L.SimpleRNNCell(4))(i, initial_state=[s]); m = pg.Model([i, s], o).compile(loss='mse'); R = m.predict([X, np.ones((2, 7), np.float32)])"),
     ("rnn.initial_state_count", "i = pg.Input(shape=(3, 4)); s = pg.Input(shape=(4,)); o = L.RNN(L.LSTMCell(4))(i, initial_state=[s]); m = pg.Model([i, s], o).compile(loss='mse'); R = m.predict([X, np.ones((2, 4), np.float32)])"),
     ("rnn.initial_state_eager_wrong", "lay = L.RNN(L.GRUCell(4)); R = lay(X, initial_state=[np.ones((2, 9), np.float32)])"),
     ("rnn.initial_state_eager_batch", "lay = L.RNN(L.GRUCell(4)); R = lay(X, initial_state=[np.ones((5, 4), np.float32)])"),
     ("rnn.initial_state_eager_none", "lay = L.RNN(L.GRUCell(4)); R = lay(X, initial_state=None)"),
     ("rnn.initial_state_eager_str", "lay = L.RNN(L.GRUCell(4)); R = lay(X, initial_state='abc')"),
     ("rnn.mask_wrong_shape", "lay = L.RNN(L.SimpleRNNCell(4)); R = lay(X, mask=np.ones((2, 7), bool))"),
     ("rnn.mask_wrong_batch", "lay = L.RNN(L.SimpleRNNCell(4)); R = lay(X, mask=np.ones((5, 3), bool))"),
     ("rnn.mask_float", "lay = L.RNN(L.SimpleRNNCell(4)); R = lay(X, mask=np.full((2, 3), 0.5))"),
     ("rnn.mask_str", "lay = L.RNN(L.SimpleRNNCell(4)); R = lay(X, mask='abc')"),
     ("rnn.mask_all_zero", "lay = L.RNN(L.SimpleRNNCell(4)); R = lay(X, mask=np.zeros((2, 3), bool))"),
     ("rnn.cell_not_cell", "R = L.RNN(L.Dense(3))"),
     ("rnn.cell_none", "R = L.RNN(None)"),
     ("rnn.cell_list_empty", "R = L.RNN([])"),
     ("rnn.stacked_empty", "R = L.StackedRNNCells([])"),
     ("rnn.cell_reused_two_rnns", "c = L.SimpleRNNCell(4); a = L.RNN(c); b = L.RNN(c); i = pg.Input(shape=(3, 4)); j = pg.Input(shape=(3, 6)); R = pg.Model([i, j], [a(i), b(j)])"),
     ("rnn.cell_direct_call", "c = L.LSTMCell(4); R = c(X2, [np.zeros((2, 4), np.float32)])"),
     ("rnn.cell_direct_call_ok", "c = L.LSTMCell(4); R = c(X2, [np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32)])"),
     ("rnn.cell_direct_wrong_state", "c = L.GRUCell(4); R = c(X2, [np.zeros((2, 9), np.float32)])"),
     ("rnn.unroll_long", "m = pg.Sequential([L.RNN(L.SimpleRNNCell(2), unroll=True)], input_shape=(2000, 1)).compile(loss='mse'); R = m.predict(np.ones((1, 2000, 1), np.float32)).shape"),
     ("rnn.long_seq", "m = pg.Sequential([L.RNN(L.LSTMCell(2))], input_shape=(3000, 1)).compile(loss='mse'); R = m.predict(np.ones((1, 3000, 1), np.float32)).shape"),
     ("rnn.go_backwards_str", "R = L.RNN(L.SimpleRNNCell(2), go_backwards='yes')"),
     ("rnn.eager_1step", "R = L.RNN(L.SimpleRNNCell(2))(np.ones((2, 1, 3), np.float32)).shape"),
     ("rnn.eager_2d", "R = L.RNN(L.SimpleRNNCell(2))(np.ones((2, 3), np.float32))"),
     ("masking.then_lstm_mask_allpad", "m = pg.Sequential([L.Masking(0.0), L.RNN(L.LSTMCell(3))], input_shape=(3, 4)).compile(loss='mse'); R = m.predict(np.zeros((2, 3, 4), np.float32))"),
     ("attn.mask_wrong", "a = L.Attention(); R = a([X, X5], mask=[np.ones((2, 9), bool), None])"),
     ("attn.mask_wrong_value", "a = L.Attention(); R = a([X, X5], mask=[None, np.ones((2, 9), bool)])"),
     ("attn.mask_not_list", "a = L.Attention(); R = a([X, X5], mask=np.ones((2, 3), bool))"),
     ("attn.mask_float", "a = L.Attention(); R = a([X, X5], mask=[None, np.full((2, 5), 0.3)])"),
     ("attn.mask_all_false", "a = L.Attention(); R = a([X, X5], mask=[None, np.zeros((2, 5), bool)])"),
     ("attn.three_inputs_mismatch", "a = L.Attention(); R = a([X, X5, np.ones((2, 4, 4), np.float32)])"),
     ("attn.one_input", "a = L.Attention(); R = a([X])"),
     ("attn.not_list", "a = L.Attention(); R = a(X)"),
     ("attn.four_inputs", "a = L.Attention(); R = a([X, X5, X5, X5])"),
     ("attn.batch_mismatch", "a = L.Attention(); R = a([X, np.ones((3, 5, 4), np.float32)])"),
     ("attn.feat_mismatch", "a = L.Attention(); R = a([X, np.ones((2, 5, 6), np.float32)])"),
     ("attn.return_scores", "a = L.Attention(); R = [np.shape(t) for t in a([X, X5], return_attention_scores=True)]"),
     ("attn.causal", "a = L.Attention(); R = np.shape(a([X, X5], use_causal_mask=True))"),
     ("attn.2d", "a = L.Attention(); R = a([X2, X2])"),
     ("attn.4d", "a = L.Attention(); R = a([X4, X4])"),
     ("addattn.causal", "a = L.AdditiveAttention(); R = np.shape(a([X, X5], use_causal_mask=True))"),
     ("dot.rank_mismatch", "R = L.Dot(axes=1)([X2, X])"),
     ("dot.axes_out_of_range", "R = L.Dot(axes=5)([X2, X2])"),
     ("dot.axes_mismatch_dims", "R = L.Dot(axes=(1, 2))([X, X])"),
     ("dot.one_input", "R = L.Dot(axes=1)([X2])"),
     ("dot.three_inputs", "R = L.Dot(axes=1)([X2, X2, X2])"),
     ("dot.4d", "R = L.Dot(axes=1)([X4, X4])"),
     ("dot.batch_mismatch", "R = L.Dot(axes=1)([X2, np.ones((5, 3), np.float32)])"),
     ("einsum.bad_eq_call", "R = L.EinsumDense('abc,cd->abd', (3, 5))(X2)"),
     ("einsum.eq_garbage", "R = L.EinsumDense('a,b,c->d', 5)(X2)"),
     ("einsum.eq_unicode", "R = L.EinsumDense('aé,éc->ac', 5)(X2)"),
     ("einsum.eq_5d", "R = L.EinsumDense('abcde,ef->abcdf', (1,1,1,5))(np.ones((1,1,1,1,3), np.float32))"),
     ("einsum.output_shape_mismatch", "R = L.EinsumDense('ab,bc->ac', (5, 6))(X2)"),
     ("einsum.output_shape_huge", "R = L.EinsumDense('ab,bc->ac', 10**9)(X2)"),
     ("einsum.bias_axes_bad", "R = L.EinsumDense('ab,bc->ac', 5, bias_axes='z')(X2)"),
     ("einsum.ellipsis", "R = np.shape(L.EinsumDense('...b,bc->...c', 5)(X))"),
     ("einsum.repeat_letter", "R = L.EinsumDense('aab,bc->ac', 5)(X)"),
     ("groupnorm.groups_not_divide", "R = L.GroupNormalization(3)(X)"),
     ("groupnorm.groups_more_than_ch", "R = L.GroupNormalization(8)(X)"),
     ("groupnorm.axis_out", "R = L.GroupNormalization(2, axis=5)(X)"),
     ("groupnorm.axis0", "R = L.GroupNormalization(2, axis=0)(X)"),
     ("groupnorm.2d", "R = np.shape(L.GroupNormalization(1)(X2))"),
     ("unitnorm.axis_out", "R = L.UnitNormalization(axis=4)(X)"),
     ("unitnorm.axis0", "R = L.UnitNormalization(axis=0)(X)"),
     ("unitnorm.zero_vec", "R = L.UnitNormalization()(np.zeros((2, 3), np.float32))"),
     ("alphadrop.noise_shape_bad", "R = L.AlphaDropout(0.5, noise_shape=(5, 5))(X2, training=True)"),
     ("alphadrop.noise_shape_rank", "R = L.AlphaDropout(0.5, noise_shape=(None, 1, 1, 1))(X2, training=True)"),
     ("dwconv.kernel_too_big", "R = L.DepthwiseConv2D(9)(X4)"),
     ("dwconv.same_dilation_big", "R = np.shape(L.DepthwiseConv2D(3, padding='same', dilation_rate=40)(X4))"),
     ("dwconv.strides_dilation", "R = L.DepthwiseConv2D(3, strides=2, dilation_rate=2)(X4)"),
     ("dwconv.channels_first", "R = np.shape(L.DepthwiseConv2D(2, data_format='channels_first')(X4))"),
     ("dwconv1d.causal", "R = np.shape(L.DepthwiseConv1D(2, padding='causal')(X))"),
     ("sepconv.kernel_too_big", "R = L.SeparableConv1D(3, 9)(X)"),
     ("sepconv.huge_depth_mult", "R = L.SeparableConv2D(3, 2, depth_multiplier=10**6)(X4)"),
     ("sepconv.huge_filters", "R = L.SeparableConv2D(10**9, 2)(X4)"),
     ("dwconv.huge_mult", "R = L.DepthwiseConv1D(2, depth_multiplier=10**9)(X)"),
     ("lambda.returns_none", "R = L.Lambda(lambda t: None)(X2)"),
     ("lambda.returns_str", "R = L.Lambda(lambda t: 'x')(X2)"),
     ("lambda.returns_numpy", "R = L.Lambda(lambda t: np.ones(3))(X2)"),
     ("lambda.raises", "R = L.Lambda(lambda t: 1 / 0)(X2)"),
     ("lambda.returns_5d", "R = L.Lambda(lambda t: ops.reshape(t, (2, 1, 1, 1, 3)))(X2)"),
     ("lambda.output_shape_wrong", "m = pg.Sequential([L.Lambda(lambda t: t, output_shape=(7,))], input_shape=(3,)).compile(loss='mse'); R = m.predict(X2)"),
     ("lambda.output_shape_garbage", "m = pg.Sequential([L.Lambda(lambda t: t, output_shape='abc')], input_shape=(3,)).compile(loss='mse'); R = m.predict(X2)"),
     ("lambda.output_shape_fn_raises", "m = pg.Sequential([L.Lambda(lambda t: t, output_shape=lambda s: 1/0)], input_shape=(3,)).compile(loss='mse'); R = m.predict(X2)"),
     ("lambda.mask_garbage", "m = pg.Sequential([L.Lambda(lambda t: t, mask='x')], input_shape=(3,)).compile(loss='mse'); R = m.predict(X2)"),
     ("lambda.arguments_bad", "R = L.Lambda(lambda t, k: t * k, arguments={'k': 'abc'})(X2)"),
     ("lambda.arguments_notdict", "R = L.Lambda(lambda t: t, arguments=[1])(X2)"),
     ("lambda.save_load_closure", "k = 3.0; m = pg.Sequential([L.Lambda(lambda t: t * k)], input_shape=(3,)).compile(loss='mse'); roundtrip(m, X2)"),
     ("lambda.numpy_inside", "R = L.Lambda(lambda t: np.exp(t))(X2)"),
     ("lambda.recursion", "def f(t): return f(t)\nR = L.Lambda(f)(X2)"),
     ("lambda.huge_graph", "def f(t):\n    for _ in range(200000): t = t + 1.0\n    return t\nm = pg.Sequential([L.Lambda(f)], input_shape=(3,)).compile(loss='mse'); R = m.predict(X2)"),
     ("lambda.bool_compare", "R = L.Lambda(lambda t: t > 0.5)(X2)"),
     ("lambda.index", "R = L.Lambda(lambda t: t[:, 0])(X2)"),
     ("lambda.len", "R = L.Lambda(lambda t: len(t))(X2)"),
     ("lambda.iter", "R = L.Lambda(lambda t: list(t))(X2)"),
     ("lambda.float", "R = L.Lambda(lambda t: float(t))(X2)"),
     ("lambda.bool_if", "R = L.Lambda(lambda t: t if t else t)(X2)"),
     ("lambda.numpy_of_tensor", "R = L.Lambda(lambda t: np.asarray(t))(X2)"),
     ("lambda.tensor_matmul_numpy", "R = L.Lambda(lambda t: t @ np.ones((3, 2)))(X2)"),
     ("lambda.tensor_times_str", "R = L.Lambda(lambda t: t * 'a')(X2)"),
     ("lambda.tensor_pow_tensor", "R = L.Lambda(lambda t: t ** t)(X2)"),
     ("lambda.tensor_div_zero", "R = L.Lambda(lambda t: t / 0)(X2)"),
     ("lambda.tensor_mod", "R = L.Lambda(lambda t: t % 2)(X2)"),
     ("lambda.tensor_neg_abs", "R = L.Lambda(lambda t: abs(-t))(X2)"),
     ("lambda.tensor_eq", "R = L.Lambda(lambda t: t == t)(X2)"),
     ("lambda.tensor_hash", "R = L.Lambda(lambda t: {t: 1} and t)(X2)"),
     ("lambda.tensor_getattr", "R = L.Lambda(lambda t: t.shape)(X2)"),
     ("lambda.use_other_graph", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); R = L.Lambda(lambda t: t + keep[0])(X2)"),
     ("lambda.use_other_graph_model", "keep = []\ndef f(t):\n    keep.append(t); return t\nm = pg.Sequential([L.Lambda(f)], input_shape=(3,)).compile(loss='mse'); m.predict(X2); R = L.Lambda(lambda t: t + keep[0])(X2)"),
     ("lambda.stale_tensor_after_free", "keep = []\ndef f(t):\n    keep.append(t); return t\nm = pg.Sequential([L.Lambda(f)], input_shape=(3,)).compile(loss='mse'); m.predict(X2); m.free(); import gc; gc.collect(); R = (keep[0].shape, keep[0].numpy())"),
     ("lambda.stale_tensor_eager", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); import gc; gc.collect(); R = (keep[0].shape, keep[0].numpy())"),
     ("lambda.stale_tensor_ops", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); import gc; gc.collect(); R = ops.sum(keep[0])"),
     ("ops.tensor_outside_graph", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); import gc; gc.collect(); R = ops.mean(keep[0], axis=0)"),
     ("ops.tensor_outside_graph2", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); import gc; gc.collect(); R = ops.concatenate([keep[0], keep[0]])"),
     ("ops.tensor_outside_graph3", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); import gc; gc.collect(); R = keep[0] + keep[0]"),
     ("ops.tensor_outside_graph4", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); import gc; gc.collect(); R = ops.cumsum(keep[0])"),
     ("ops.tensor_outside_graph5", "keep = []\ndef f(t):\n    keep.append(t); return t\nL.Lambda(f)(X2); import gc; gc.collect(); R = ops.one_hot(keep[0], 3)"),
     ("ops.cumsum_long", "R = ops.cumsum(np.ones(30000, np.float32)).shape"),
     ("ops.one_hot_big", "R = ops.one_hot(np.array([1, 2]), 50000).shape"),
     ("ops.one_hot_float_tensor", "R = L.Lambda(lambda t: ops.one_hot(t, 3))(X2)"),
     ("ops.take_float_indices_tensor", "R = L.Lambda(lambda t: ops.take(t, t))(X2)"),
     ("ops.where_one_arg", "R = ops.where(X > 0.5)"),
     ("ops.split_uneven", "R = ops.split(X, 3, axis=2)"),
     ("ops.split_list", "R = ops.split(X, [1, 5], axis=2)"),
     ("ops.split_list_desc", "R = ops.split(X, [3, 1], axis=2)"),
     ("ops.reshape_two_neg", "R = ops.reshape(X, (-1, -1))"),
     ("ops.reshape_neg_bad", "R = ops.reshape(X, (-1, 5))"),
     ("ops.reshape_neg_zero", "R = ops.reshape(X, (0, -1))"),
     ("ops.transpose_dup", "R = ops.transpose(X, (0, 0, 1))"),
     ("ops.transpose_short", "R = ops.transpose(X, (0, 1))"),
     ("ops.power_neg_frac", "R = ops.power(-X, 0.5)"),
     ("ops.norm_ord_fro", "R = ops.norm(X2, ord='fro')"),
     ("ops.norm_ord_inf", "R = ops.norm(X2, ord=np.inf, axis=1)"),
     ("ops.norm_ord_zero", "R = ops.norm(X2, ord=0, axis=1)"),
     ("ops.norm_ord_neg", "R = ops.norm(X2, ord=-1, axis=1)"),
     ("ops.softmax_tuple_axis", "R = ops.softmax(X, axis=(1, 2))"),
     ("ops.max_initial_tensor", "R = ops.max(X, axis=1, initial=X)"),
     ("ops.variable_in", "v = pg.Variable(np.ones((2, 3), np.float32)); R = ops.sum(v)"),
    ]
    cases += rnn
    return cases


def cases_utils():
    V = {"neg": "-1", "zero": "0", "e9": "10**9", "float": "2.5", "str": "'x'", "none": "None", "nan": "float('nan')",
         "inf": "float('inf')", "list": "[1, 2]", "big": "2**63", "true": "True", "obj": "object()"}
    DS = "ds = pg.data.Dataset.from_tensor_slices((np.arange(10, dtype=np.float32).reshape(10, 1), np.arange(10)))\n"
    cases = []
    meth = {"take": "count", "skip": "count", "batch": "batch_size", "shuffle": "buffer_size", "repeat": "count",
            "prefetch": "buffer_size", "padded_batch": "batch_size", "enumerate": "start"}
    for m, p in meth.items():
        for vn, v in V.items():
            cases.append((f"ds.{m}.{p}={vn}", DS + f"d = ds.{m}({v}); R = [np.shape(e[0]) for e, _ in zip(d.as_numpy_iterator(), range(50))]; R = (R[:3], d.cardinality())"))
    for vn, v in V.items():
        cases.append((f"ds.shuffle_seed={vn}", DS + f"R = list(ds.shuffle(4, seed={v}).as_numpy_iterator())[:2]"))
        cases.append((f"ds.range={vn}", f"import itertools; R = list(itertools.islice(pg.data.Dataset.range({v}).as_numpy_iterator(), 5))"))
        cases.append((f"ds.range3={vn}", f"R = list(pg.data.Dataset.range(0, 10, {v}).as_numpy_iterator())[:5]"))
        cases.append((f"ds.from_slices={vn}", f"R = pg.data.Dataset.from_tensor_slices({v}).cardinality()"))
        cases.append((f"split_dataset.left={vn}", DS + f"R = [d.cardinality() for d in pg.utils.split_dataset(ds, left_size={v})]"))
        cases.append((f"split_dataset.right={vn}", DS + f"R = [d.cardinality() for d in pg.utils.split_dataset(ds, right_size={v})]"))
        cases.append((f"split_array.left={vn}", f"R = [len(list(d)) for d in pg.utils.split_dataset(np.arange(10), left_size={v})]"))
    extra = [
     ("ds.from_slices_mismatch", "R = pg.data.Dataset.from_tensor_slices((np.ones(3), np.ones(4)))"),
     ("ds.from_slices_0d", "R = pg.data.Dataset.from_tensor_slices(np.float32(1))"),
     ("ds.from_slices_empty", "R = list(pg.data.Dataset.from_tensor_slices(np.zeros((0, 3))).as_numpy_iterator())"),
     ("ds.from_slices_str", "R = list(pg.data.Dataset.from_tensor_slices(['a', 'bb']).as_numpy_iterator())"),
     ("ds.from_slices_dict", "R = list(pg.data.Dataset.from_tensor_slices({'a': np.ones(3), 'b': np.zeros(3)}).as_numpy_iterator())[:1]"),
     ("ds.from_slices_ragged", "R = pg.data.Dataset.from_tensor_slices([[1, 2], [3]])"),
     ("ds.from_slices_nested_empty", "R = pg.data.Dataset.from_tensor_slices(())"),
     ("ds.from_slices_generator", "R = pg.data.Dataset.from_tensor_slices((i for i in range(3)))"),
     ("ds.map_raises", DS + "R = list(ds.map(lambda x, y: 1 / 0).as_numpy_iterator())"),
     ("ds.map_not_callable", DS + "R = ds.map(3)"),
     ("ds.map_wrong_arity", DS + "R = list(ds.map(lambda x: x).as_numpy_iterator())"),
     ("ds.map_returns_none", DS + "R = list(ds.map(lambda x, y: None).batch(2).as_numpy_iterator())"),
     ("ds.map_ragged_then_batch", DS + "R = list(ds.map(lambda x, y: np.ones(int(y) + 1)).batch(3).as_numpy_iterator())"),
     ("ds.padded_batch_ragged", DS + "R = [a.shape for a in ds.map(lambda x, y: np.ones(int(y) + 1)).padded_batch(3).as_numpy_iterator()]"),
     ("ds.padded_batch_shape_small", DS + "R = list(ds.map(lambda x, y: np.ones(int(y) + 1)).padded_batch(3, padded_shapes=(2,)).as_numpy_iterator())"),
     ("ds.padded_batch_shape_bad", DS + "R = list(ds.map(lambda x, y: np.ones(int(y) + 1)).padded_batch(3, padded_shapes='x').as_numpy_iterator())"),
     ("ds.padded_batch_values_bad", DS + "R = list(ds.map(lambda x, y: np.ones(int(y) + 1)).padded_batch(3, padding_values='x').as_numpy_iterator())"),
     ("ds.filter_all_false", DS + "R = list(ds.filter(lambda x, y: False).as_numpy_iterator())"),
     ("ds.filter_nonbool", DS + "R = list(ds.filter(lambda x, y: 'x').as_numpy_iterator())"),
     ("ds.filter_array", DS + "R = list(ds.filter(lambda x, y: x).as_numpy_iterator())"),
     ("ds.filter_raises", DS + "R = list(ds.filter(lambda x, y: 1/0).as_numpy_iterator())"),
     ("ds.repeat_infinite_len", DS + "R = ds.repeat().cardinality()"),
     ("ds.repeat_infinite_list", DS + "R = len(ds.repeat())"),
     ("ds.repeat_infinite_fit", DS + "m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds.repeat().batch(2), epochs=1, verbose=0)"),
     ("ds.repeat_infinite_predict", DS + "m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.predict(ds.repeat().batch(2))"),
     ("ds.repeat_infinite_unbatch", DS + "R = ds.batch(2).repeat().unbatch().cardinality()"),
     ("ds.repeat_infinite_filter", DS + "R = ds.repeat().filter(lambda x, y: False).cardinality()"),
     ("ds.repeat_infinite_filter_iter", DS + "R = next(iter(ds.repeat().filter(lambda x, y: False).as_numpy_iterator()))"),
     ("ds.repeat_infinite_shuffle", DS + "R = next(iter(ds.repeat().shuffle(10).as_numpy_iterator()))"),
     ("ds.repeat_infinite_reduce", DS + "R = ds.repeat().reduce(0, lambda s, e: s + 1)"),
     ("ds.repeat_infinite_cache", DS + "R = next(iter(ds.repeat().cache().as_numpy_iterator()))"),
     ("ds.repeat_infinite_concat", DS + "R = ds.repeat().concatenate(ds).cardinality()"),
     ("ds.repeat_infinite_zip", DS + "R = pg.data.Dataset.zip(ds.repeat(), ds).cardinality()"),
     ("ds.repeat_infinite_split", DS + "R = pg.utils.split_dataset(ds.repeat(), left_size=0.5)"),
     ("ds.repeat_infinite_skip", DS + "R = ds.repeat().skip(5).cardinality()"),
     ("ds.repeat_infinite_batch_drop", DS + "R = ds.repeat().batch(3, drop_remainder=True).cardinality()"),
     ("ds.repeat_infinite_fit_steps", DS + "m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds.repeat().batch(2), epochs=1, steps_per_epoch=3, verbose=0)"),
     ("ds.empty_fit", DS + "m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds.take(0).batch(2), epochs=1, verbose=0)"),
     ("ds.empty_predict", DS + "m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.predict(ds.take(0).batch(2))"),
     ("ds.fit_unbatched", DS + "m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds, epochs=1, verbose=0)"),
     ("ds.fit_wrong_shape", DS + "m = pg.Sequential([L.Dense(1)], input_shape=(5,)).compile(loss='mse'); R = m.fit(ds.batch(2), epochs=1, verbose=0)"),
     ("ds.fit_str", "ds = pg.data.Dataset.from_tensor_slices((np.array(['a'] * 4), np.zeros(4))); m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds.batch(2), epochs=1, verbose=0)"),
     ("ds.fit_single_elem", "ds = pg.data.Dataset.from_tensor_slices(np.zeros((4, 1), np.float32)); m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds.batch(2), epochs=1, verbose=0)"),
     ("ds.fit_triple", "ds = pg.data.Dataset.from_tensor_slices((np.zeros((4, 1), np.float32), np.zeros((4, 1)), np.ones(4), np.ones(4))); m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds.batch(2), epochs=1, verbose=0)"),
     ("ds.fit_varying_batch_shapes", "ds = pg.data.Dataset.from_tensor_slices((np.zeros((5, 1), np.float32), np.zeros((5, 1)))).map(lambda x, y: (np.ones(int(np.random.randint(1, 4)), np.float32), y)); m = pg.Sequential([L.Dense(1)], input_shape=(1,)).compile(loss='mse'); R = m.fit(ds.padded_batch(2), epochs=1, verbose=0)"),
     ("ds.zip_mismatch", DS + "R = pg.data.Dataset.zip(ds, ds.take(3)).cardinality()"),
     ("ds.zip_nondataset", DS + "R = pg.data.Dataset.zip(ds, 3)"),
     ("ds.zip_empty", "R = pg.data.Dataset.zip()"),
     ("ds.concat_mismatch", DS + "R = list(ds.concatenate(pg.data.Dataset.from_tensor_slices(np.ones((2, 3)))).as_numpy_iterator())"),
     ("ds.concat_nondataset", DS + "R = ds.concatenate([1, 2])"),
     ("ds.unbatch_scalars", "R = list(pg.data.Dataset.range(3).unbatch().as_numpy_iterator())"),
     ("ds.reduce_bad", DS + "R = ds.reduce(0, 3)"),
     ("ds.apply_bad", DS + "R = ds.apply(lambda d: 3)"),
     ("ds.cache_file", DS + "R = list(ds.cache('/nonexistent/dir/x').as_numpy_iterator())[:1]"),
     ("ds.getitem_out", DS + "R = ds[100]"),
     ("ds.getitem_neg", DS + "R = ds.batch(3)[-1]"),
     ("ds.getitem_str", DS + "R = ds['a']"),
     ("ds.huge_batch", DS + "R = [a.shape for a, b in ds.batch(10**12).as_numpy_iterator()]"),
     ("ds.shuffle_huge", DS + "R = len(list(ds.shuffle(10**12).as_numpy_iterator()))"),
     ("ds.take_huge_cardinality", DS + "R = ds.take(2**62).cardinality()"),
     ("ds.batch_drop_all", DS + "R = list(ds.batch(20, drop_remainder=True).as_numpy_iterator())"),
     ("dir.missing", "R = pg.utils.text_dataset_from_directory('/nonexistent')"),
     ("dir.file", "open(TMP + '/f.txt', 'w').write('x'); R = pg.utils.text_dataset_from_directory(TMP + '/f.txt')"),
     ("dir.empty", "os.makedirs(TMP + '/e', exist_ok=True); R = pg.utils.text_dataset_from_directory(TMP + '/e')"),
     ("dir.img_empty", "os.makedirs(TMP + '/e', exist_ok=True); R = pg.utils.image_dataset_from_directory(TMP + '/e')"),
     ("dir.none", "R = pg.utils.text_dataset_from_directory(None)"),
     ("dir.int", "R = pg.utils.text_dataset_from_directory(3)"),
    ]
    TXT = ("d = TMP + '/t'\nfor c in ('a', 'b'):\n    os.makedirs(d + '/' + c, exist_ok=True)\n"
           "    for i in range(3): open(f'{d}/{c}/{i}.txt', 'w').write(c * (i + 1))\n")
    IMG = ("from PIL import Image\nd = TMP + '/i'\nfor c in ('a', 'b'):\n    os.makedirs(d + '/' + c, exist_ok=True)\n"
           "    for i in range(3): Image.fromarray((np.random.rand(5, 7, 3) * 255).astype(np.uint8)).save(f'{d}/{c}/{i}.png')\n")
    for vn, v in V.items():
        for p in ("batch_size", "validation_split", "seed", "labels", "label_mode", "class_names", "max_length", "subset", "shuffle", "follow_links"):
            extra.append((f"dir.text.{p}={vn}", TXT + f"R = pg.utils.text_dataset_from_directory(d, {p}={v}" + (", subset='training'" if p == "validation_split" else "") + (", validation_split=0.5" if p == "subset" else "") + ")\nR = [np.shape(b[0]) for b in R]"))
        for p in ("batch_size", "image_size", "color_mode", "interpolation", "crop_to_aspect_ratio", "pad_to_aspect_ratio", "validation_split", "labels", "label_mode"):
            extra.append((f"dir.img.{p}={vn}", IMG + f"R = pg.utils.image_dataset_from_directory(d, {p}={v})\nR = [np.shape(b[0]) for b in R]"))
    for vn, v in V.items():
        extra.append((f"img.load_target={vn}", IMG + f"R = pg.utils.img_to_array(pg.utils.load_img(d + '/a/0.png', target_size={v})).shape"))
        extra.append((f"img.load_color={vn}", IMG + f"R = pg.utils.img_to_array(pg.utils.load_img(d + '/a/0.png', color_mode={v})).shape"))
        extra.append((f"img.resize_size={vn}", f"R = pg.utils.resize_images(np.ones((2, 4, 4, 3), np.float32), {v}).shape" if "resize_images" else ""))
        extra.append((f"img.resize_size2={vn}", f"R = pg.utils.resize_images(np.ones((2, 4, 4, 3), np.float32), ({v}, 3)).shape"))
    for an, a in {"0d": "np.float32(1)", "1d": "np.ones(3)", "2d": "np.ones((4, 4))", "5d": "np.ones((1, 2, 4, 4, 3))",
                  "zero": "np.zeros((0, 4, 3))", "zero2": "np.zeros((4, 0, 3))", "ch5": "np.ones((4, 4, 5))", "ch2": "np.ones((4, 4, 2))",
                  "str": "np.full((4, 4, 3), 'a')", "obj": "np.full((4, 4, 3), None, dtype=object)", "nan": "np.full((4, 4, 3), np.nan)",
                  "inf": "np.full((4, 4, 3), np.inf)", "complex": "np.ones((4, 4, 3), complex)", "bool": "np.ones((4, 4, 3), bool)",
                  "none": "None", "huge": "np.ones((1, 10**6, 1))"}.items():
        extra.append((f"img.array_to_img={an}", f"R = pg.utils.array_to_img({a}).size"))
        extra.append((f"img.save_img={an}", f"pg.utils.save_img(TMP + '/x.png', {a}); R = 1"))
        extra.append((f"img.resize={an}", f"R = pg.utils.resize_images({a}, (3, 3)).shape"))
        extra.append((f"img.img_to_array={an}", f"R = pg.utils.img_to_array({a}).shape"))
    extra += [
     ("img.load_missing", "R = pg.utils.load_img('/nonexistent.png')"),
     ("img.load_notimage", "open(TMP + '/n.png', 'w').write('not an image'); R = pg.utils.load_img(TMP + '/n.png')"),
     ("img.load_dir", "R = pg.utils.load_img(TMP)"),
     ("img.save_bad_ext", "R = pg.utils.save_img(TMP + '/x.zzz', np.ones((4, 4, 3)))"),
     ("img.save_bad_dir", "R = pg.utils.save_img('/nonexistent/x.png', np.ones((4, 4, 3)))"),
     ("img.data_format_bad", "R = pg.utils.img_to_array(np.ones((4, 4, 3)), data_format='x')"),
     ("img.resize_interp_bad", "R = pg.utils.resize_images(np.ones((2, 4, 4, 3), np.float32), (3, 3), interpolation='x')"),
     ("img.resize_huge", "R = pg.utils.resize_images(np.ones((1, 4, 4, 1), np.float32), (10**5, 10**5))"),
     ("img.load_huge_target", "from PIL import Image; Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(TMP + '/s.png'); R = pg.utils.load_img(TMP + '/s.png', target_size=(10**5, 10**5))"),
     ("img.decompression_bomb", "from PIL import Image; Image.fromarray(np.zeros((1, 1), np.uint8)).resize((20000, 20000)).save(TMP + '/b.png'); R = pg.utils.load_img(TMP + '/b.png').size"),
    ]
    cases += extra
    return cases


def cases_preprocessing():
    cases = []
    IMGS = "IM = rng.random((2, 8, 8, 3)).astype(np.float32) * 255\n"
    HL = {
     "Resizing": ("L.Resizing(4, 5)", "(8, 8, 3)", "IM"),
     "CenterCrop": ("L.CenterCrop(4, 5)", "(8, 8, 3)", "IM"),
     "RandomCrop": ("L.RandomCrop(4, 5)", "(8, 8, 3)", "IM"),
     "RandomFlip": ("L.RandomFlip()", "(8, 8, 3)", "IM"),
     "RandomRotation": ("L.RandomRotation(0.2)", "(8, 8, 3)", "IM"),
     "RandomZoom": ("L.RandomZoom(0.2)", "(8, 8, 3)", "IM"),
     "RandomTranslation": ("L.RandomTranslation(0.2, 0.2)", "(8, 8, 3)", "IM"),
     "RandomContrast": ("L.RandomContrast(0.2)", "(8, 8, 3)", "IM"),
     "RandomBrightness": ("L.RandomBrightness(0.2)", "(8, 8, 3)", "IM"),
    }
    BAD = {"0d": "np.float32(1)", "1d": "np.ones(3, np.float32)", "2d": "np.ones((8, 8), np.float32)", "5d": "np.ones((1, 2, 8, 8, 3), np.float32)",
           "zero_batch": "np.zeros((0, 8, 8, 3), np.float32)", "zero_h": "np.zeros((2, 0, 8, 3), np.float32)", "zero_c": "np.zeros((2, 8, 8, 0), np.float32)",
           "nan": "np.full((2, 8, 8, 3), np.nan, np.float32)", "inf": "np.full((2, 8, 8, 3), np.inf, np.float32)",
           "str": "np.full((2, 8, 8, 3), 'a')", "obj": "np.full((2, 8, 8, 3), None, dtype=object)", "bool": "np.ones((2, 8, 8, 3), bool)",
           "complex": "np.ones((2, 8, 8, 3), complex)", "i64": "np.ones((2, 8, 8, 3), np.int64)", "u8": "np.ones((2, 8, 8, 3), np.uint8)",
           "none": "None", "tiny": "np.ones((2, 1, 1, 3), np.float32)", "wrong": "np.ones((2, 5, 5, 3), np.float32)",
           "list": "IM.tolist()", "dict": "{'a': IM}", "big": "np.ones((1, 3000, 3000, 3), np.float32)"}
    for name, (ctor, shp, feed) in HL.items():
        mk = f"m = pg.Sequential([{ctor}, L.Flatten(), L.Dense(1)], input_shape={shp}).compile(loss='mse')\n"
        cases.append((f"{name}.predict", IMGS + mk + f"R = m.predict({feed}).shape"))
        cases.append((f"{name}.fit", IMGS + mk + f"R = m.fit({feed}, np.ones((2, 1)), verbose=0)"))
        cases.append((f"{name}.roundtrip", IMGS + mk + f"roundtrip(m, {feed})"))
        cases.append((f"{name}.after_free", IMGS + mk + f"m.free(); R = m.predict({feed})"))
        for bn, b in BAD.items():
            cases.append((f"{name}.eager_{bn}", IMGS + f"R = np.shape({ctor}({b}))"))
            cases.append((f"{name}.eager_train_{bn}", IMGS + f"R = np.shape({ctor}({b}, training=True))"))
            cases.append((f"{name}.predict_{bn}", IMGS + mk + f"R = m.predict({b})"))
            cases.append((f"{name}.fit_{bn}", IMGS + mk + f"R = m.fit({b}, np.ones((2, 1)), verbose=0)"))
        for s in ("(0, 8, 3)", "(8, 8)", "(8, 8, 3, 1)", "(10**6, 10**6, 3)", "(8,)", "(None, None, 3)"):
            cases.append((f"{name}.inshape{s}", IMGS + f"m = pg.Sequential([{ctor}], input_shape={s}).compile(loss='mse'); R = m.predict(IM)"))
    V = {"neg": "-1", "zero": "0", "e9": "10**9", "e5": "10**5", "float": "2.5", "str": "'x'", "none": "None", "nan": "float('nan')",
         "inf": "float('inf')", "list": "[1, 2, 3]", "tuple": "(0.5, 0.1)", "big": "2**63", "true": "True", "obj": "object()", "negf": "-0.5", "1.5": "1.5"}
    CT = {"Resizing": (["height", "width", "interpolation", "fill_value", "crop_to_aspect_ratio"], {"height": "4", "width": "5"}),
          "CenterCrop": (["height", "width"], {"height": "4", "width": "5"}),
          "RandomCrop": (["height", "width", "seed"], {"height": "4", "width": "5"}),
          "RandomFlip": (["mode", "seed"], {}),
          "RandomRotation": (["factor", "fill_mode", "interpolation", "fill_value", "seed"], {"factor": "0.2"}),
          "RandomZoom": (["height_factor", "width_factor", "fill_mode"], {"height_factor": "0.2"}),
          "RandomTranslation": (["height_factor", "width_factor"], {"height_factor": "0.2", "width_factor": "0.2"}),
          "RandomContrast": (["factor", "value_range"], {"factor": "0.2"}),
          "RandomBrightness": (["factor", "value_range"], {"factor": "0.2"})}
    for name, (params, base) in CT.items():
        for p in params:
            for vn, v in V.items():
                kw = dict(base); kw[p] = v
                args = ", ".join(f"{k}={x}" for k, x in kw.items())
                cases.append((f"ctor.{name}.{p}={vn}", IMGS + f"lay = L.{name}({args}); R = np.shape(lay(IM, training=True)); m = pg.Sequential([lay, L.Flatten(), L.Dense(1)], input_shape=(8, 8, 3)).compile(loss='mse'); R = m.fit(IM, np.ones((2, 1)), verbose=0)"))
    # text / hashing
    TXT = "T = np.array(['the cat sat', 'a dog', ''])\n"
    for vn, v in V.items():
        for p in ("max_tokens", "output_sequence_length", "ngrams", "output_mode", "standardize", "split", "pad_to_max_tokens", "vocabulary"):
            cases.append((f"tv.{p}={vn}", TXT + f"tv = L.TextVectorization({p}={v}); tv.adapt(T); R = np.shape(tv(T))"))
        for p in ("num_bins", "mask_value", "salt", "output_mode"):
            cases.append((f"hash.{p}={vn}", TXT + f"h = L.Hashing(**{{'num_bins': 5, '{p}': {v}}}); R = np.shape(h(T))"))
        for p in ("num_bins", "output_mode"):
            cases.append((f"hcross.{p}={vn}", TXT + f"h = L.HashedCrossing(**{{'num_bins': 5, '{p}': {v}}}); R = np.shape(h((T, np.array([1, 2, 3]))))"))
    for bn, b in {"0d": "np.array('x')", "2d": "np.array([['a b', 'c'], ['d', 'e f']])", "3d": "np.full((2, 2, 2), 'a')", "int": "np.ones(3)",
                  "float": "np.ones(3) * 0.5", "obj": "np.array([None, 1, 'a'], dtype=object)", "bytes": "np.array([b'ab', b'\\xff\\xfe'])",
                  "empty": "np.array([], dtype=str)", "none": "None", "list": "['a b', 'c']", "long": "np.array(['a ' * 100000])",
                  "unicode": "np.array(['héllo wörld 😀', '\\x00\\x01'])", "nan": "np.array([np.nan])", "dict": "{'a': 'b'}"}.items():
        cases.append((f"tv.call_{bn}", TXT + f"tv = L.TextVectorization(max_tokens=10, output_sequence_length=4); tv.adapt(T); R = np.shape(tv({b}))"))
        cases.append((f"tv.adapt_{bn}", TXT + f"tv = L.TextVectorization(max_tokens=10); tv.adapt({b}); R = np.shape(tv(T))"))
        cases.append((f"tv.model_{bn}", TXT + f"tv = L.TextVectorization(max_tokens=10, output_sequence_length=4); tv.adapt(T); m = pg.Sequential([tv, L.Embedding(10, 2), L.Flatten(), L.Dense(1)], input_shape=(1,), input_dtype='string').compile(loss='mse'); R = m.predict({b})"))
        cases.append((f"hash.call_{bn}", TXT + f"R = np.shape(L.Hashing(5)({b}))"))
        cases.append((f"hcross.call_{bn}", TXT + f"R = np.shape(L.HashedCrossing(5)(({b}, {b})))"))
    cases += [
     ("tv.not_adapted", TXT + "R = L.TextVectorization()(T)"),
     ("tv.int_seq_len_huge", TXT + "tv = L.TextVectorization(output_sequence_length=10**9); tv.adapt(T); R = np.shape(tv(T))"),
     ("tv.multi_hot_huge_tokens", TXT + "tv = L.TextVectorization(max_tokens=10**9, output_mode='multi_hot', pad_to_max_tokens=True); tv.adapt(T); R = np.shape(tv(T))"),
     ("tv.tfidf_no_idf", TXT + "tv = L.TextVectorization(output_mode='tf_idf', vocabulary=['a', 'b']); R = np.shape(tv(T))"),
     ("tv.vocab_dupes", TXT + "tv = L.TextVectorization(vocabulary=['a', 'a']); R = np.shape(tv(T))"),
     ("tv.vocab_empty", TXT + "tv = L.TextVectorization(vocabulary=[]); R = np.shape(tv(T))"),
     ("tv.vocab_file_missing", TXT + "tv = L.TextVectorization(vocabulary='/nonexistent.txt'); R = np.shape(tv(T))"),
     ("tv.ngrams_huge", TXT + "tv = L.TextVectorization(ngrams=10**6); tv.adapt(T); R = np.shape(tv(T))"),
     ("tv.adapt_dataset", TXT + "tv = L.TextVectorization(); tv.adapt(pg.data.Dataset.from_tensor_slices(T).batch(2)); R = np.shape(tv(T))"),
     ("tv.adapt_infinite_dataset", TXT + "tv = L.TextVectorization(); tv.adapt(pg.data.Dataset.from_tensor_slices(T).repeat().batch(2)); R = np.shape(tv(T))"),
     ("tv.adapt_infinite_dataset_steps", TXT + "tv = L.TextVectorization(); tv.adapt(pg.data.Dataset.from_tensor_slices(T).repeat().batch(2), steps=3); R = np.shape(tv(T))"),
     ("norm.adapt_infinite_dataset", "n = L.Normalization(); n.adapt(pg.data.Dataset.from_tensor_slices(np.ones((4, 2), np.float32)).repeat().batch(2)); R = 1"),
     ("tv.set_vocab_after", TXT + "tv = L.TextVectorization(); tv.set_vocabulary(['x', 'y']); R = tv(T)"),
     ("tv.roundtrip", TXT + "tv = L.TextVectorization(max_tokens=10, output_sequence_length=4); tv.adapt(T); m = pg.Sequential([tv, L.Embedding(10, 2), L.Flatten(), L.Dense(1)], input_shape=(1,), input_dtype='string').compile(loss='mse'); roundtrip(m, T[:, None])"),
     ("resizing.huge", "IM = np.ones((1, 4, 4, 3), np.float32); R = np.shape(L.Resizing(10**5, 10**5)(IM))"),
     ("resizing.huge_model", "m = pg.Sequential([L.Resizing(10**5, 10**5)], input_shape=(4, 4, 3)).compile(loss='mse'); R = m.predict(np.ones((1, 4, 4, 3), np.float32)).shape"),
     ("resizing.e9", "R = np.shape(L.Resizing(10**9, 10**9)(np.ones((1, 4, 4, 3), np.float32)))"),
     ("centercrop.bigger", "R = np.shape(L.CenterCrop(20, 20)(np.ones((1, 4, 4, 3), np.float32)))"),
     ("randomcrop.bigger", "R = np.shape(L.RandomCrop(20, 20)(np.ones((1, 4, 4, 3), np.float32), training=True))"),
     ("centercrop.huge", "R = np.shape(L.CenterCrop(10**5, 10**5)(np.ones((1, 4, 4, 3), np.float32)))"),
     ("randomcrop.huge", "R = np.shape(L.RandomCrop(10**5, 10**5)(np.ones((1, 4, 4, 3), np.float32), training=True))"),
     ("dir.img_huge_size", "from PIL import Image\nd = TMP + '/i'\nfor c in ('a', 'b'):\n    os.makedirs(d + '/' + c, exist_ok=True)\n    Image.fromarray(np.zeros((5, 7, 3), np.uint8)).save(f'{d}/{c}/0.png')\nR = pg.utils.image_dataset_from_directory(d, image_size=(10**5, 10**5)); R = [np.shape(b[0]) for b in R]"),
     ("img.load_huge_target", "from PIL import Image; Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(TMP + '/s.png'); R = pg.utils.load_img(TMP + '/s.png', target_size=(10**5, 10**5)).size"),
     ("img.resize_images_huge", "from pyggml.utils.image_utils import resize_images; R = resize_images(np.ones((1, 4, 4, 1), np.float32), (10**5, 10**5)).shape"),
     ("deep.sequential_5000", "m = pg.Sequential([L.Activation('relu') for _ in range(5000)], input_shape=(3,)).compile(loss='mse'); R = m.predict(X2).shape"),
     ("deep.functional_3000", "i = pg.Input(shape=(3,)); t = i\nfor _ in range(3000): t = L.Dense(3)(t)\nm = pg.Model(i, t).compile(loss='mse'); R = m.fit(X2, X2, verbose=0)"),
     ("deep.sequential_fit_20000", "m = pg.Sequential([L.Lambda(lambda t: t * 1.0) for _ in range(20000)] + [L.Dense(1)], input_shape=(3,)).compile(loss='mse'); R = m.fit(X2, np.ones((2, 1)), verbose=0)"),
     ("deep.lstm_20000_steps", "m = pg.Sequential([L.RNN(L.LSTMCell(2))], input_shape=(20000, 1)).compile(loss='mse'); R = m.fit(np.ones((1, 20000, 1), np.float32), np.ones((1, 2)), verbose=0)"),
     ("deep.eager_lstm_20000", "R = L.RNN(L.GRUCell(2))(np.ones((1, 20000, 1), np.float32)).shape"),
     ("deep.save_deep", "m = pg.Sequential([L.Activation('relu') for _ in range(3000)], input_shape=(3,)).compile(loss='mse'); roundtrip(m, X2)"),
     ("deep.ops_chain", "def f(t):\n    for _ in range(20000): t = ops.relu6(t)\n    return t\nR = L.Lambda(f)(X2).shape"),
     ("threads.eager_concurrent", "import threading\nerrs = []\ndef w():\n    try:\n        for _ in range(30): L.GroupNormalization(2)(X); ops.cumsum(X, axis=1); L.Attention()([X, X5])\n    except Exception as e: errs.append(e)\nts = [threading.Thread(target=w) for _ in range(6)]\n[t.start() for t in ts]; [t.join() for t in ts]\nassert not errs, errs; R = 1"),
     ("threads.deep_concurrent", "import threading\nerrs = []\ndef f(t):\n    for _ in range(12000): t = t + 1.0\n    return t\ndef w():\n    try: L.Lambda(f)(X2)\n    except Exception as e: errs.append(e)\nts = [threading.Thread(target=w) for _ in range(4)]\n[t.start() for t in ts]; [t.join() for t in ts]\nassert not errs, errs; R = 1"),
     ("dot.normalize_zero", "R = L.Dot(axes=1, normalize=True)([np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)])"),
     ("groupnorm.groups_neg1", "R = np.shape(L.GroupNormalization(-1)(X))"),
     ("groupnorm.const_input", "R = L.GroupNormalization(2)(np.ones((2, 3, 4), np.float32))"),
     ("einsum.no_batch_out", "R = np.shape(L.EinsumDense('ab,b->a', ())(X2))"),
     ("einsum.kernel_ellipsis", "R = L.EinsumDense('ab,...->a', 5)(X2)"),
     ("einsum.big_out", "R = np.shape(L.EinsumDense('abc,cde->abde', (3, 40, 50))(X))"),
     ("einsum.4d_kernel", "R = np.shape(L.EinsumDense('abc,cdef->abdef', (3, 2, 2, 2))(X))"),
     ("einsum.caps", "R = np.shape(L.EinsumDense('aB,BC->aC', 5)(X2))"),
     ("einsum.spaces", "R = np.shape(L.EinsumDense(' ab , bc -> ac ', 5)(X2))"),
     ("dwconv.same_huge_kernel", "R = np.shape(L.DepthwiseConv2D(1000, padding='same')(X4))"),
     ("dwconv.same_e6_kernel", "R = np.shape(L.DepthwiseConv2D(10**6, padding='same')(X4))"),
     ("dwconv.strides_huge", "R = np.shape(L.DepthwiseConv2D(2, strides=10**6)(X4))"),
     ("dwconv.dilation_huge_same", "R = np.shape(L.DepthwiseConv1D(3, dilation_rate=10**6, padding='same')(X))"),
     ("sepconv.same_strides_dilation", "R = np.shape(L.SeparableConv1D(2, 3, strides=2, dilation_rate=2, padding='same')(X))"),
     ("sepconv.steps1", "R = np.shape(L.SeparableConv1D(2, 1)(np.ones((2, 1, 4), np.float32)))"),
     ("attn.score_concat_big", "R = np.shape(L.Attention(score_mode='concat')([np.ones((1, 300, 8), np.float32), np.ones((1, 300, 8), np.float32)]))"),
     ("attn.huge_steps", "R = np.shape(L.Attention()([np.ones((1, 30000, 2), np.float32), np.ones((1, 30000, 2), np.float32)]))"),
     ("attn.nan_inputs", "R = L.Attention()([np.full((1, 3, 2), np.nan, np.float32), np.ones((1, 3, 2), np.float32)])"),
     ("attn.dropout_training", "R = np.shape(L.Attention(dropout=0.99)([X, X5], training=True))"),
     ("masking.nan_value", "R = L.Masking(np.nan)(np.full((2, 3, 4), np.nan, np.float32))"),
     ("masking.then_attention", "i = pg.Input(shape=(3, 4)); t = L.Masking()(i); o = L.Attention()([t, t]); m = pg.Model(i, o).compile(loss='mse'); R = m.predict(np.zeros((2, 3, 4), np.float32))"),
     ("masking.then_gn", "m = pg.Sequential([L.Masking(), L.GroupNormalization(2), L.RNN(L.GRUCell(2))], input_shape=(3, 4)).compile(loss='mse'); R = m.fit(X, np.ones((2, 2)), verbose=0)"),
     ("rnn.bidirectional_cell", "R = np.shape(L.Bidirectional(L.RNN(L.LSTMCell(3)))(X))"),
     ("rnn.timedistributed_rnn", "R = np.shape(L.TimeDistributed(L.RNN(L.SimpleRNNCell(2)))(np.ones((2, 3, 4, 5), np.float32)))"),
     ("rnn.return_state_seq", "R = [np.shape(a) for a in L.RNN(L.LSTMCell(3), return_sequences=True, return_state=True)(X)]"),
     ("rnn.stateful", "R = L.RNN(L.SimpleRNNCell(3), stateful=True)"),
     ("rnn.custom_cell_bad_call", "class C(L.Layer):\n    state_size = 3\n    def call(self, x, states): return None\nR = L.RNN(C())(X)"),
     ("rnn.custom_cell_wrong_state", "class C(L.Layer):\n    state_size = 3\n    def call(self, x, states): return x, [x]\nR = L.RNN(C())(X)"),
     ("rnn.custom_cell_state_size_bad", "class C(L.Layer):\n    state_size = -3\n    def call(self, x, states): return x, states\nR = L.RNN(C())(X)"),
     ("rnn.custom_cell_state_size_huge", "class C(L.Layer):\n    state_size = 10**9\n    def call(self, x, states): return x, states\nR = L.RNN(C())(X)"),
     ("rnn.custom_cell_state_size_str", "class C(L.Layer):\n    state_size = 'x'\n    def call(self, x, states): return x, states\nR = L.RNN(C())(X)"),
     ("rnn.custom_cell_returns_tuple3", "class C(L.Layer):\n    state_size = 4\n    def call(self, x, states): return x, states, 1\nR = L.RNN(C())(X)"),
     ("rnn.cell_units_huge", "R = L.RNN(L.LSTMCell(10**6))(X)"),
     ("lambda.output_shape_5d", "m = pg.Sequential([L.Lambda(lambda t: t, output_shape=(1, 1, 1, 1, 3))], input_shape=(3,)).compile(loss='mse'); R = m.predict(X2)"),
     ("lambda.multi_out", "i = pg.Input(shape=(3,)); a, b = L.Lambda(lambda t: [t, t * 2])(i); R = pg.Model(i, [a, b]).compile(loss='mse').predict(X2)"),
     ("lambda.multi_out_bad_unpack", "i = pg.Input(shape=(3,)); a, b, c = L.Lambda(lambda t: [t, t * 2])(i); R = 1"),
     ("lambda.dict_in", "i = {'a': pg.Input(shape=(3,)), 'b': pg.Input(shape=(3,))}; o = L.Lambda(lambda d: d['a'] + d['b'])(i); m = pg.Model(i, o).compile(loss='mse'); R = m.predict({'a': X2, 'b': X2})"),
     ("lambda.dict_in_missing", "i = {'a': pg.Input(shape=(3,)), 'b': pg.Input(shape=(3,))}; o = L.Lambda(lambda d: d['a'] + d['b'])(i); m = pg.Model(i, o).compile(loss='mse'); R = m.predict({'a': X2})"),
     ("lambda.random_in_call", "R = L.Lambda(lambda t: t + np.random.rand())(X2)"),
     ("lambda.variable_in_closure", "v = pg.Variable(np.ones(3, np.float32)) if hasattr(pg, 'Variable') else None; R = L.Lambda(lambda t: t * v)(X2)"),
     ("noise.gaussian_big_input", "R = np.shape(L.GaussianNoise(0.5)(np.ones((2, 1000, 1000), np.float32), training=True))"),
     ("actreg.fit_nan", "m = pg.Sequential([L.Dense(3), L.ActivityRegularization(1e30, 1e30)], input_shape=(3,)).compile(loss='mse'); R = m.fit(X2, X2, verbose=0).history"),
    ]
    return cases


# ops applied to a (batch, 4, 6) tensor t inside a model that trains (the backward pass), on
# contiguous, transposed (non-contiguous), sliced-by-split and broadcast inputs
TRAIN_OPS = {
     "sum": "ops.sum({x}, axis=-1, keepdims=True)", "sum_all_keep": "ops.sum({x}, axis=(1, 2), keepdims=True)",
     "mean": "ops.mean({x}, axis=1, keepdims=True)", "max": "ops.max({x}, axis=-1, keepdims=True)",
     "min": "ops.min({x}, axis=1, keepdims=True)", "var": "ops.var({x}, axis=-1, keepdims=True)",
     "std": "ops.std({x}, axis=1, keepdims=True)", "logsumexp": "ops.logsumexp({x}, axis=-1, keepdims=True)",
     "argmax": "ops.expand_dims(ops.cast(ops.argmax({x}, axis=-1), 'float32'), -1) if hasattr(ops, 'cast') else ops.expand_dims(ops.argmax({x}, axis=-1), -1)",
     "transpose": "ops.transpose({x}, (0, 2, 1))", "reshape": "ops.reshape({x}, (-1, 2, 3))",
     "expand_squeeze": "ops.squeeze(ops.expand_dims({x}, 1), 1)", "stack": "ops.stack([{x}, {x}], axis=1)",
     "concat": "ops.concatenate([{x}, {x}], axis=1)", "concat_last": "ops.concatenate([{x}, {x} * 2.0], axis=-1)",
     "split": "ops.split({x}, 2, axis=-1)[1]", "split_mid": "ops.split({x}, [1, 3], axis=1)[1]",
     "tile": "ops.tile({x}, (1, 2, 1))", "repeat": "ops.repeat({x}, 2, axis=1)", "repeat_last": "ops.repeat({x}, 3, axis=-1)",
     "broadcast_to": "ops.broadcast_to(ops.sum({x}, axis=1, keepdims=True), (2, 5, 6))",
     "take": "ops.take({x}, np.array([0, 2, 1]), axis=1)", "take_last": "ops.take({x}, np.array([5, 0]), axis=-1)",
     "maximum": "ops.maximum({x}, 0.1)", "minimum": "ops.minimum({x}, {x} * 0.5)", "clip": "ops.clip({x}, -0.5, 0.5)",
     "where": "ops.where(ops.greater({x}, 0.0), {x}, {x} * 0.1)", "power": "ops.power(ops.abs({x}) if hasattr(ops, 'abs') else {x} * {x}, 1.5)",
     "power2": "ops.power({x}, 2)", "divide": "ops.divide({x}, {x} * {x} + 1.0)", "reciprocal": "ops.reciprocal({x} * {x} + 1.0)",
     "rsqrt": "ops.rsqrt({x} * {x} + 1.0)", "sign": "ops.sign({x}) * {x}", "log1p": "ops.log1p({x} * {x})",
     "sinh": "ops.sinh({x})", "cosh": "ops.cosh({x})", "leaky_relu": "ops.leaky_relu({x})", "relu6": "ops.relu6({x})",
     "hard_sigmoid": "ops.hard_sigmoid({x})", "hard_swish": "ops.hard_swish({x})", "softsign": "ops.softsign({x})",
     "selu": "ops.selu({x})", "mish": "ops.mish({x})", "swish": "ops.swish({x})", "log_sigmoid": "ops.log_sigmoid({x})",
     "softmax1": "ops.softmax({x}, axis=1)", "softmax_last": "ops.softmax({x}, axis=-1)", "log_softmax": "ops.log_softmax({x}, axis=1)",
     "cumsum": "ops.cumsum({x}, axis=1)", "cumsum_last": "ops.cumsum({x}, axis=-1)", "norm": "ops.norm({x}, axis=-1, keepdims=True)",
     "norm1": "ops.norm({x}, ord=1, axis=1, keepdims=True)", "norm3": "ops.norm({x}, ord=3, axis=-1, keepdims=True)",
     "dot": "ops.dot({x}, np.ones((6, 2), np.float32))", "moments": "ops.moments({x}, axes=[1], keepdims=True)[1]",
     "one_hot_mix": "{x} + ops.one_hot(np.array([0, 1, 2, 3]), 6)", "eye_mix": "{x} + ops.eye(4, 6)",
     "ones_like": "{x} * ops.ones_like({x})", "logical": "ops.logical_and(ops.greater({x}, 0.0), ops.less({x}, 0.5)) * {x}",
     "equal": "ops.equal({x}, {x}) * {x}", "not_equal": "ops.not_equal({x}, 0.0) * {x}", "logical_not": "ops.logical_not(ops.greater({x}, 0.0)) * {x}",
     "greater_equal": "ops.greater_equal({x}, 0.0) * {x}", "negative": "ops.negative({x})", "subtract": "ops.subtract({x}, 1.0)",
     "full_like": "{x} + ops.full_like({x}, 2.0)", "zeros_like": "{x} + ops.zeros_like({x})",
}
TRAIN_WRAPS = {"plain": "t", "transposed": "ops.transpose(ops.transpose(t, (0, 2, 1)), (0, 2, 1))",
               "tview": "ops.transpose(t, (0, 2, 1))", "split": "ops.split(t, 2, axis=-1)[0]", "neg_zero": "t * 0.0"}


def cases_training():
    cases = []
    for on, expr in TRAIN_OPS.items():
        for wn, w in TRAIN_WRAPS.items():
            body = expr.format(x=w)
            code = (f"def f(t):\n    return {body}\n"
                    "i = pg.Input(shape=(4, 6)); h = L.Dense(6)(i); o = L.Lambda(f)(h); o = L.Flatten()(o); o = L.Dense(1)(o)\n"
                    "m = pg.Model(i, o).compile(loss='mse', optimizer='adam')\n"
                    "x = np.random.default_rng(0).normal(size=(4, 4, 6)).astype(np.float32)\n"
                    "h = m.fit(x, np.ones((4, 1), np.float32), epochs=2, batch_size=2, verbose=0)\n"
                    "R = (np.isfinite(h.history['loss']).all(), m.predict(x).shape)")
            cases.append((f"train.{on}.{wn}", code))
            # eager + int input
            cases.append((f"eager_int.{on}.{wn}", f"def f(t):\n    return {body}\nR = np.shape(L.Lambda(f)(np.ones((4, 4, 6), np.int64)))"))
    return cases


def cases_second_order():
    # each op of TRAIN_OPS inside a critic whose input gradient is penalised (WGAN-GP): the gradient
    # taken in an inner tape is differentiated again by the outer one; finite gradients or a clear
    # refusal, never an abort; then batches of disjoint graphs given wrong
    cases = []
    for on, expr in TRAIN_OPS.items():
        for wn in ("plain", "transposed", "tview"):
            body = expr.format(x=TRAIN_WRAPS[wn])
            code = (f"def f(t):\n    return {body}\n"
                    "i = pg.Input(shape=(4, 6)); h = L.Dense(6, activation='tanh')(i); o = L.Lambda(f)(h)\n"
                    "m = pg.Model(i, L.Dense(1)(L.Flatten()(o)))\n"
                    "x = np.random.default_rng(0).normal(size=(3, 4, 6)).astype(np.float32)\n"
                    "with pg.GradientTape() as outer:\n"
                    "    xi = ops.multiply(x, 1.0)\n"
                    "    with pg.GradientTape() as inner:\n"
                    "        inner.watch(xi)\n"
                    "        p = m(xi, training=True)\n"
                    "    g = inner.gradient(p, xi)\n"
                    "    pen = ops.mean(ops.square(g))\n"
                    "gr = outer.gradient(pen, m.trainable_variables)\n"
                    "R = [None if a is None else bool(np.isfinite(np.asarray(a)).all()) for a in gr]")
            cases.append((f"second_order.{on}.{wn}", code))
    graphs = ("class Pool(L.Layer):\n"
              "    def call(self, inputs):\n"
              "        return ops.segment_sum(inputs[0], inputs[1], num_segments=2)\n"
              "a = pg.Input((3,), name='a'); e = pg.Input((2,), dtype='int32', name='e'); gi = pg.Input((), dtype='int32', name='g')\n"
              "m = pg.Model([a, e, gi], L.Dense(1)(Pool()([L.Dense(4)(a), gi]))).compile(loss='mse', optimizer='adam')\n"
              "x = {'a': np.ones((5, 3), np.float32), 'e': np.zeros((8, 2), np.int32), 'g': np.array([0, 0, 1, 1, 1], np.int32)}\n")
    bad = {
        "targets_rows": "m.train_on_batch(x, np.ones((3, 1), np.float32))",
        "targets_none": "m.train_on_batch(x, None)",
        "targets_scalar": "m.train_on_batch(x, np.float32(1))",
        "targets_3d": "m.train_on_batch(x, np.ones((2, 1, 1, 1, 1), np.float32))",
        "weights_rows": "m.train_on_batch(x, np.ones((2, 1), np.float32), sample_weight=np.ones(5, np.float32))",
        "weights_nan": "m.test_on_batch(x, np.ones((2, 1), np.float32), sample_weight=np.array([np.nan, 1], np.float32))",
        "class_weight": "m.train_on_batch(x, np.ones((2, 1), np.float32), class_weight={0: 1.0})",
        "graph_ids_out_of_range": "x['g'][:] = 7; m.predict(x, verbose=0)",
        "graph_ids_negative": "x['g'][:] = -1; m.predict(x, verbose=0)",
        "fit_arrays": "m.fit(x, np.ones((2, 1), np.float32), epochs=1, verbose=0)",
        "evaluate_arrays": "m.evaluate(x, np.ones((2, 1), np.float32), verbose=0)",
        "validation_split": "m.fit(iter([(x, np.ones((2, 1), np.float32))]), validation_split=0.5, verbose=0)",
        "generator_mixed": "m.fit(iter([(x, np.ones((2, 1), np.float32)), ({'a': np.ones((4, 3), np.float32), 'e': np.zeros((1, 2), np.int32), 'g': np.zeros(4, np.int32)}, np.ones((2, 1), np.float32))]), verbose=0)",
        "empty_input": "x['e'] = np.zeros((0, 2), np.int32); m.predict(x, verbose=0)",
        "predict_on_batch_list": "m.predict_on_batch([x['a'], x['e'], x['g']])",
        "call_list": "m([x['a'], x['e'], x['g']])",
    }
    for name, stmt in bad.items():
        cases.append((f"ragged.{name}", graphs + f"R = {stmt}" if not stmt.startswith("x[") else graphs + stmt.replace("; ", "\nR = ", 1)))
    return cases


def cases_lifetimes():
    LAYERS = {
     "EinsumDense": ("L.EinsumDense('abc,cd->abd', (3, 5))", "(3, 4)", "X"),
     "GroupNormalization": ("L.GroupNormalization(2)", "(3, 4)", "X"),
     "DepthwiseConv1D": ("L.DepthwiseConv1D(2)", "(3, 4)", "X"),
     "SeparableConv2D": ("L.SeparableConv2D(3, 2)", "(4, 4, 2)", "X4"),
     "RNN_lstm": ("L.RNN(L.LSTMCell(4))", "(3, 4)", "X"),
     "RNN_stacked": ("L.RNN(L.StackedRNNCells([L.SimpleRNNCell(4), L.GRUCell(3)]))", "(3, 4)", "X"),
     "AdditiveAttention_self": ("L.AdditiveAttention()", "(3, 4)", "X"),
     "UnitNormalization": ("L.UnitNormalization()", "(3, 4)", "X"),
     "AlphaDropout": ("L.AlphaDropout(0.3)", "(3, 4)", "X"),
    }
    cases = []
    for name, (ctor, shp, feed) in LAYERS.items():
        mk = f"lay = {ctor}\nm = pg.Sequential([lay, L.Flatten(), L.Dense(1)], input_shape={shp}).compile(loss='mse')\nm.predict({feed})\n"
        steps = {
            "free_then_eager": "m.free(); gc.collect(); R = np.shape(lay({feed}))",
            "free_then_get_weights": "m.free(); gc.collect(); R = [np.shape(w) for w in lay.get_weights()]",
            "free_then_weights_numpy": "m.free(); gc.collect(); R = [np.shape(w.numpy()) for w in lay.weights]",
            "free_then_set_weights": "w = lay.get_weights(); m.free(); gc.collect(); lay.set_weights(w); R = 1",
            "free_then_new_model": "m.free(); gc.collect(); m2 = pg.Sequential([lay, L.Flatten(), L.Dense(1)], input_shape={shp}).compile(loss='mse'); R = m2.predict({feed}).shape",
            "free_then_new_model_fit": "m.free(); gc.collect(); m2 = pg.Sequential([lay, L.Flatten(), L.Dense(1)], input_shape={shp}).compile(loss='mse'); R = m2.fit({feed}, np.ones((2, 1)), verbose=0)",
            "shared_free_first": "m2 = pg.Sequential([lay, L.Flatten(), L.Dense(1)], input_shape={shp}).compile(loss='mse'); m.free(); gc.collect(); R = m2.predict({feed}).shape",
            "shared_fit_both": "m2 = pg.Sequential([lay, L.Flatten(), L.Dense(2)], input_shape={shp}).compile(loss='mse'); m.fit({feed}, np.ones((2, 1)), verbose=0); m2.fit({feed}, np.ones((2, 2)), verbose=0); R = (m.predict({feed}).shape, m2.predict({feed}).shape)",
            "del_model_gc": "del m; gc.collect(); R = np.shape(lay({feed}))",
            "double_free": "m.free(); m.free(); R = 1",
            "free_then_summary": "m.free(); R = m.summary()",
            "free_then_get_config": "m.free(); R = len(str(m.get_config()))",
            "free_then_to_json": "m.free(); R = len(m.to_json())",
            "free_then_compile": "m.free(); R = m.compile(loss='mse')",
            "free_then_layer_call_symbolic": "m.free(); i = pg.Input(shape={shp}); R = lay(i)",
            "clone": "m2 = pg.models.clone_model(m) if hasattr(pg.models, 'clone_model') else m; R = m2.compile(loss='mse').predict({feed}).shape",
            "save_load_then_free_original": "p = os.path.join(TMP, 'a.keras'); m.save(p); m2 = pg.models.load_model(p); m.free(); gc.collect(); R = m2.predict({feed}).shape",
            "load_weights_mismatch": "p = os.path.join(TMP, 'w.weights.h5'); m.save_weights(p) if hasattr(m, 'save_weights') else None; m3 = pg.Sequential([L.Dense(3)], input_shape=(9,)).compile(loss='mse'); R = m3.load_weights(p)",
            "fork_predict": "pid = os.fork()\nif pid == 0:\n    try:\n        m.predict({feed}); os._exit(0)\n    except BaseException:\n        os._exit(3)\n_, st = os.waitpid(pid, 0); assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st; R = 1",
            "thread_free_during_predict": "import threading\nerrs = []\ndef w():\n    try:\n        for _ in range(50): m.predict({feed})\n    except Exception as e: errs.append(type(e).__name__)\nt = threading.Thread(target=w); t.start(); m.free(); t.join(); R = errs",
            "thread_free_during_fit": "import threading\nerrs = []\ndef w():\n    try:\n        for _ in range(20): m.fit({feed}, np.ones((2, 1)), verbose=0)\n    except Exception as e: errs.append(type(e).__name__)\nt = threading.Thread(target=w); t.start(); import time; time.sleep(0.01); m.free(); t.join(); R = errs",
            "thread_eager_during_free": "import threading\nerrs = []\ndef w():\n    try:\n        for _ in range(50): lay({feed})\n    except Exception as e: errs.append(type(e).__name__ + str(e)[:50])\nt = threading.Thread(target=w); t.start(); m.free(); t.join(); R = errs",
        }
        for sn, code in steps.items():
            cases.append((f"{name}.{sn}", "import gc\n" + mk + code.format(feed=feed, shp=shp)))
    return cases


def cases_shapes_and_files():
    cases = []
    AX = ["-5", "-4", "-1", "0", "1", "3", "4", "None", "(1, 2)", "(1, 3)", "(0, 1, 2, 3)"]
    OPS1 = {"sum": "ops.sum(t, axis={a}, keepdims={k})", "mean": "ops.mean(t, axis={a}, keepdims={k})", "max": "ops.max(t, axis={a}, keepdims={k})",
            "var": "ops.var(t, axis={a}, keepdims={k})", "logsumexp": "ops.logsumexp(t, axis={a}, keepdims={k})",
            "argmax": "ops.argmax(t, axis={a}, keepdims={k})", "norm": "ops.norm(t, axis={a}, keepdims={k})",
            "expand_dims": "ops.expand_dims(t, {a})", "squeeze": "ops.squeeze(t, {a})", "softmax": "ops.softmax(t, axis={a})",
            "cumsum": "ops.cumsum(t, axis={a})", "stack": "ops.stack([t, t], axis={a})", "concat": "ops.concatenate([t, t], axis={a})",
            "split": "ops.split(t, 2, axis={a})[0]", "repeat": "ops.repeat(t, 2, axis={a})", "take": "ops.take(t, np.array([[0, 1], [1, 0]]), axis={a})",
            "moments": "ops.moments(t, axes={a}, keepdims={k})[0]", "one_hot": "ops.one_hot(ops.argmax(t, axis={a}), 3)"}
    SHAPES = {"4d": ("(2, 2, 4)", "np.ones((2, 2, 2, 4), np.float32)"), "3d": ("(2, 4)", "np.ones((2, 2, 4), np.float32)"),
              "2d": ("(4,)", "np.ones((2, 4), np.float32)"), "4d_ones": ("(1, 1, 1)", "np.ones((2, 1, 1, 1), np.float32)")}
    for on, expr in OPS1.items():
        for a in AX:
            for k in ("False", "True"):
                if "{k}" not in expr and k == "True":
                    continue
                body = expr.format(a=a, k=k)
                for sn, (shp, feed) in SHAPES.items():
                    cases.append((f"g.{on}.ax={a}.k={k}.{sn}", f"m = pg.Sequential([L.Lambda(lambda t: {body})], input_shape={shp}).compile(loss='mse'); R = m.predict({feed}).shape"))
                    cases.append((f"e.{on}.ax={a}.k={k}.{sn}", f"R = np.shape(ops.{body[4:].replace('(t', '(' + feed, 1)})" if False else f"t = {feed}; R = np.shape({body})"))
    OTHER = {"transpose": ["(0, 3, 2, 1)", "(3, 2, 1, 0)", "(0, 1, 2)", "(0, 1, 2, 3, 4)", "None", "(0, 1, 2, 4)"],
             "reshape": ["(-1,)", "(2, -1)", "(2, 1, 1, 1, 8)", "(2, 16)", "(-1, 2, 2, 2, 2)", "(0,)"],
             "tile": ["(1, 1, 1, 2)", "(2,)", "(1, 1, 1, 1, 2)", "(2, 2)", "(0, 1, 1, 1)", "()"],
             "broadcast_to": ["(2, 2, 2, 4)", "(3, 2, 2, 2, 4)", "(2, 2, 4)", "(2, 2, 2, 8)", "(4,)"]}
    for on, args in OTHER.items():
        for a in args:
            for sn, (shp, feed) in SHAPES.items():
                body = f"ops.{on}(t, {a})"
                cases.append((f"g.{on}.{a}.{sn}", f"m = pg.Sequential([L.Lambda(lambda t: {body})], input_shape={shp}).compile(loss='mse'); R = m.predict({feed}).shape"))
                cases.append((f"e.{on}.{a}.{sn}", f"t = {feed}; R = np.shape({body})"))
    # directories
    SETUP = "d = TMP + '/t'\nfor c in ('a', 'b'):\n    os.makedirs(d + '/' + c, exist_ok=True)\n    open(f'{d}/{c}/0.txt', 'w').write(c)\n"
    cases += [
     ("dir.symlink_cycle", SETUP + "os.symlink(d, d + '/a/loop')\nR = [np.shape(b[0]) for b in pg.utils.text_dataset_from_directory(d, follow_links=True)]"),
     ("dir.symlink_cycle_nofollow", SETUP + "os.symlink(d, d + '/a/loop')\nR = [np.shape(b[0]) for b in pg.utils.text_dataset_from_directory(d)]"),
     ("dir.symlink_cycle_img", SETUP + "os.symlink(d, d + '/a/loop')\nR = pg.utils.image_dataset_from_directory(d, follow_links=True)"),
     ("dir.non_utf8", SETUP + "open(d + '/a/1.txt', 'wb').write(b'\\xff\\xfe\\x00abc')\nR = [b[0] for b in pg.utils.text_dataset_from_directory(d)]"),
     ("dir.corrupt_image", "from PIL import Image\nd = TMP + '/i'\nfor c in ('a', 'b'):\n    os.makedirs(d + '/' + c, exist_ok=True)\n    Image.fromarray(np.zeros((5, 7, 3), np.uint8)).save(f'{d}/{c}/0.png')\nopen(d + '/a/bad.png', 'wb').write(b'\\x89PNG garbage')\nR = [np.shape(b[0]) for b in pg.utils.image_dataset_from_directory(d)]"),
     ("dir.truncated_image", "from PIL import Image\nd = TMP + '/i'\nfor c in ('a', 'b'):\n    os.makedirs(d + '/' + c, exist_ok=True)\n    Image.fromarray(np.zeros((50, 70, 3), np.uint8)).save(f'{d}/{c}/0.png')\nraw = open(d + '/a/0.png', 'rb').read(); open(d + '/a/0.png', 'wb').write(raw[:len(raw) // 2])\nR = [np.shape(b[0]) for b in pg.utils.image_dataset_from_directory(d)]"),
     ("dir.labels_list_wrong_len", SETUP + "R = pg.utils.text_dataset_from_directory(d, labels=[0])"),
     ("dir.labels_list_float", SETUP + "R = [b[1] for b in pg.utils.text_dataset_from_directory(d, labels=[0.5, 1.5])]"),
     ("dir.labels_list_neg", SETUP + "R = [b[1] for b in pg.utils.text_dataset_from_directory(d, labels=[-1, 5], label_mode='categorical')]"),
     ("dir.class_names_missing", SETUP + "R = pg.utils.text_dataset_from_directory(d, class_names=['a', 'z'])"),
     ("dir.class_names_dupe", SETUP + "R = pg.utils.text_dataset_from_directory(d, class_names=['a', 'a'])"),
     ("dir.binary_3classes", SETUP + "os.makedirs(d + '/c'); open(d + '/c/0.txt', 'w').write('c')\nR = pg.utils.text_dataset_from_directory(d, label_mode='binary')"),
     ("dir.huge_file", SETUP + "open(d + '/a/big.txt', 'w').write('x' * 50_000_000)\nR = [np.shape(b[0]) for b in pg.utils.text_dataset_from_directory(d, max_length=10)]"),
     ("dir.fifo", SETUP + "os.mkfifo(d + '/a/pipe.txt')\nR = [np.shape(b[0]) for b in pg.utils.text_dataset_from_directory(d)]"),
     ("dir.dev_null_link", SETUP + "os.symlink('/dev/zero', d + '/a/zero.txt')\nR = [np.shape(b[0]) for b in pg.utils.text_dataset_from_directory(d, follow_links=True)]"),
     ("dir.dev_zero_img", "from PIL import Image\nd = TMP + '/i'\nfor c in ('a', 'b'):\n    os.makedirs(d + '/' + c, exist_ok=True)\n    Image.fromarray(np.zeros((5, 7, 3), np.uint8)).save(f'{d}/{c}/0.png')\nos.symlink('/dev/zero', d + '/a/z.png')\nR = [np.shape(b[0]) for b in pg.utils.image_dataset_from_directory(d, follow_links=True)]"),
     ("img.load_dev_zero", "R = pg.utils.load_img('/dev/zero')"),
     ("img.load_fifo", "os.mkfifo(TMP + '/p.png'); R = pg.utils.load_img(TMP + '/p.png')"),
     ("dir.split_both", SETUP + "R = pg.utils.text_dataset_from_directory(d, validation_split=0.5, subset='both', seed=1)"),
     ("dir.split_no_seed", SETUP + "R = pg.utils.text_dataset_from_directory(d, validation_split=0.5, subset='training')"),
     ("split_dataset.floats_over", "R = pg.utils.split_dataset(np.arange(10), left_size=0.7, right_size=0.7)"),
     ("split_dataset.ints_over", "R = pg.utils.split_dataset(np.arange(10), left_size=7, right_size=7)"),
     ("split_dataset.tuple_mismatch", "R = pg.utils.split_dataset((np.arange(10), np.arange(7)), left_size=0.5)"),
     ("split_dataset.dict", "R = [len(list(d)) for d in pg.utils.split_dataset({'a': np.arange(10)}, left_size=0.5)]"),
     ("split_dataset.list", "R = [len(list(d)) for d in pg.utils.split_dataset(list(range(10)), left_size=0.5)]"),
     ("split_dataset.generator", "R = pg.utils.split_dataset((i for i in range(10)), left_size=0.5)"),
     ("split_dataset.empty", "R = pg.utils.split_dataset(np.zeros((0, 3)), left_size=0.5)"),
     ("split_dataset.str", "R = pg.utils.split_dataset('abc', left_size=0.5)"),
    ]
    return cases


def cases_configs():
    random.seed(0)
    cases = []
    for _ in range(500):
        kind = random.choice(["DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D"])
        two = kind.endswith("2D")
        k = random.randint(1, 5); s = random.randint(1, 4); dil = random.choice([1, 1, 2, 3]); pad = random.choice(["valid", "same"])
        dm = random.randint(1, 3); fmt = random.choice(["channels_last", "channels_first"])
        n = random.randint(1, 7); c = random.randint(1, 3)
        if s > 1 and dil > 1 and random.random() < 0.5:
            pass
        args = f"{k}, strides={s}, dilation_rate={dil}, padding='{pad}', depth_multiplier={dm}, data_format='{fmt}'"
        if kind.startswith("Separable"):
            args = f"{random.randint(1, 3)}, " + args
        if two:
            m2 = random.randint(1, 7)
            shp = (n, m2, c) if fmt == "channels_last" else (c, n, m2)
        else:
            shp = (n, c) if fmt == "channels_last" else (c, n)
        code = (f"m = pg.Sequential([L.{kind}({args}), L.Flatten(), L.Dense(1)], input_shape={shp}).compile(loss='mse')\n"
                f"x = np.random.default_rng(0).random((3,) + {shp}).astype(np.float32)\n"
                f"h = m.fit(x, np.ones((3, 1), np.float32), verbose=0, batch_size=2); R = (m.predict(x).shape, np.isfinite(h.history['loss']).all())\n"
                f"e = L.{kind}({args})(x); assert np.isfinite(e).all()")
        cases.append((f"conv.{kind}.{args}.{shp}", code))
    for axis in (-1, 1, 2, 3, -2):
        for g in (1, 2, 4, -1):
            for shp in ("(4, 4)", "(4, 2, 4)", "(2, 4, 4)", "(4,)"):
                cases.append((f"gn.axis={axis}.g={g}.{shp}", f"m = pg.Sequential([L.GroupNormalization({g}, axis={axis}), L.Flatten(), L.Dense(1)], input_shape={shp}).compile(loss='mse')\nx = np.random.default_rng(0).random((3,) + {shp}).astype(np.float32)\nR = m.fit(x, np.ones((3, 1)), verbose=0).history['loss']"))
    for sm in ("dot", "concat"):
        for scale in (True, False):
            for causal in (True, False):
                for (tq, tv, d, dk) in ((3, 5, 4, 4), (5, 3, 4, 4), (1, 1, 1, 1), (3, 3, 2, 2), (4, 6, 3, 3)):
                    for cls in ("Attention", "AdditiveAttention"):
                        if cls == "AdditiveAttention" and sm == "concat":
                            continue
                        ctor = f"L.{cls}(use_scale={scale}" + (f", score_mode='{sm}'" if cls == "Attention" else "") + ")"
                        code = (f"q = pg.Input(shape=({tq}, {d})); v = pg.Input(shape=({tv}, {d})); k = pg.Input(shape=({tv}, {dk}))\n"
                                f"o, s = {ctor}([q, v, k], use_causal_mask={causal}, return_attention_scores=True)\n"
                                f"m = pg.Model([q, v, k], [L.Flatten()(o), L.Flatten()(s)]).compile(loss='mse')\n"
                                f"xs = [np.random.default_rng(i).random((2,) + sh).astype(np.float32) for i, sh in enumerate([({tq}, {d}), ({tv}, {d}), ({tv}, {dk})])]\n"
                                f"p = m.predict(xs); ys = [np.zeros_like(a) for a in p]\nR = m.fit(xs, ys, verbose=0).history['loss']")
                        cases.append((f"attn.{cls}.{sm}.{scale}.{causal}.{tq},{tv},{d}", code))
    for cell in ("L.SimpleRNNCell(3)", "L.LSTMCell(3)", "L.GRUCell(3, reset_after=False)", "L.GRUCell(3)", "L.StackedRNNCells([L.LSTMCell(2), L.SimpleRNNCell(3)])", "L.SimpleRNNCell(3, dropout=0.5, recurrent_dropout=0.5)"):
        for rs in (True, False):
            for st in (True, False):
                for gb in (True, False):
                    for un in (True, False):
                        for masked in (True, False):
                            layers = ("[L.Masking(0.0), " if masked else "[") + f"L.RNN({cell}, return_sequences={rs}, return_state={st}, go_backwards={gb}, unroll={un})]"
                            code = (f"i = pg.Input(shape=(4, 2)); o = i\nfor l in {layers}:\n    o = l(o)\no = o[0] if isinstance(o, (list, tuple)) else o\n"
                                    f"m = pg.Model(i, L.Flatten()(o) if {rs} else o).compile(loss='mse')\n"
                                    f"x = np.random.default_rng(0).random((3, 4, 2)).astype(np.float32); x[0, 2:] = 0\n"
                                    f"y = m.predict(x)\nR = m.fit(x, np.zeros_like(y), verbose=0).history['loss']")
                            cases.append((f"rnn.{cell}.{rs}{st}{gb}{un}{masked}", code))
    return cases


# --- every Keras function of pyggml.ops, from its signature ---------------------------------------
_TENSOR_PARAMS = {"x", "x1", "x2", "a", "b", "y", "tensor", "variable", "inputs", "query", "key", "value", "target",
                  "output", "y_true", "y_pred", "logits", "labels", "condition", "data", "images", "kernel", "lhs",
                  "rhs", "arr", "values", "updates", "ary", "elements", "xs", "tensors", "arrays", "x0", "operand",
                  "input", "inputs", "mask", "bias", "scale", "offset", "mean", "variance", "init", "initial",
                  "loop_vars", "real", "imag", "sequences", "z", "q", "k", "v", "m", "weights", "probabilities"}
_NAMED = {"axis": "1", "axes": "(0, 1)", "shape": "(2, 3)", "newshape": "(3, 2)", "indices": "np.array([0, 1])",
          "num_classes": "3", "k": "2", "N": "3", "M": "3", "num_segments": "2", "segment_ids": "np.array([0, 1])",
          "dtype": "'float32'", "fn": "lambda *a: a[0]", "f": "lambda *a: a[0]", "body": "lambda i, v: v",
          "cond": "lambda *a: False", "pred": "True", "branches": "[lambda v: v, lambda v: v * 2]",
          "true_fn": "lambda: X", "false_fn": "lambda: X * 2", "index": "0", "lower": "0", "upper": "2",
          "start": "0", "stop": "3", "num": "3", "subscripts": "'ij,jk->ik'", "operands": "(X2, X2.T)",
          "pad_width": "((0, 0), (1, 1))", "sequence_length": "2", "sequence_stride": "1", "fft_length": "4",
          "strides": "1", "pool_size": "2", "padding": "'valid'", "q": "0.5", "bins": "np.array([0.2, 0.5])",
          "start_indices": "(0, 0)", "repeats": "2", "shift": "1", "reps": "2", "sizes": "(1, 2)",
          "x_min": "0.0", "x_max": "1.0", "ord": "None", "threshold": "0.5", "default_value": "0.0",
          "frame_length": "2", "frame_step": "1", "max_val": "1.0", "fill_value": "1.0", "maximum_iterations": "3",
          "num_iter": "2", "alpha": "1.0", "beta": "1.0", "eps": "1e-5", "epsilon": "1e-5", "n": "2", "d": "1"}
_SPECIAL = ["nan", "inf", "0d", "1d", "5d", "zero_rows", "str", "obj", "none", "bool", "big_i64", "4d", "wide", "dict"]


def cases_auto_ops():
    """Each Keras function of pyggml.ops called from its signature: every argument in turn
    replaced by hostile values (arrays of odd ranks, sizes and dtypes; odd ints and shapes),
    and, through a Lambda, on graph tensors of odd shapes."""
    import inspect
    from pyggml import _ops_control, _ops_image, _ops_math, _ops_more, _ops_nn, _ops_numpy
    arr = {
     "0d": "np.float32(2.0)", "1d": "np.arange(3, dtype=np.float32)", "5d": "np.ones((1,2,1,2,3), np.float32)",
     "zero_rows": "np.zeros((0,3), np.float32)", "zero_1d": "np.zeros((0,), np.float32)",
     "nan": "np.full((2,3), np.nan, np.float32)", "inf": "np.full((2,3), -np.inf, np.float32)",
     "str": "np.array([['a','b','c']])", "obj": "np.array([[object(),1,2]], dtype=object)", "bool": "np.ones((2,3), bool)",
     "complex": "np.ones((2,3), complex)", "i64": "np.ones((2,3), np.int64)", "none": "None", "ragged": "[[1,2],[3]]",
     "pystr": "'abc'", "big_i64": "np.array([[2**40, -2**40, 3]])", "f16": "np.ones((2,3), np.float16)",
     "4d": "np.ones((2,3,4,5), np.float32)", "wide": "np.ones((1, 70000), np.float32)", "dict": "{'a': 1}",
     "u64max": "np.array([[2**64-1, 0, 1]], dtype=np.uint64)", "neg": "-X2", "huge": "np.full((2,3), 3e38, np.float32)",
    }
    ints = {"neg1": "-1", "neg100": "-100", "zero": "0", "e9": "10**9", "2p40": "2**40", "minint": "-2**63",
            "float": "2.5", "str": "'2'", "none": "None", "true": "True", "list00": "[0, 0]", "tuple05": "(0, 5)",
            "nan": "float('nan')", "inf": "float('inf')", "emptylist": "[]", "nested": "[[0]]",
            "shape_e9": "(10**9,)", "shape_huge": "(100000, 100000)", "shape_neg": "(-1, 3)", "lam": "lambda *a: 1/0"}
    cases = []
    for module, prefix in ((_ops_numpy, ""), (_ops_math, ""), (_ops_nn, ""), (_ops_control, ""), (_ops_more, ""),
                           (_ops_image, "image.")):
        for name in module.__all__:
            fn = getattr(module, name)
            try:
                params = [q for q in inspect.signature(fn).parameters.values()
                          if q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY)]
            except (TypeError, ValueError):
                continue
            base = {q.name: _NAMED.get(q.name, "X" if q.name in _TENSOR_PARAMS else "X2")
                    for q in params if q.default is inspect.Parameter.empty}

            def call(kw, name=prefix + name):
                return f"R = ops.{name}(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")"
            cases.append((f"auto.{name}.base", call(base)))
            for q in params:
                tensorish = q.name in _TENSOR_PARAMS
                values = arr if tensorish else dict(ints, **{k: arr[k] for k in _SPECIAL if k in arr})
                for vn, v in values.items():
                    kw = dict(base)
                    kw[q.name] = v
                    cases.append((f"auto.{name}.{q.name}={vn}", call(kw)))
            tensors = [q.name for q in params if q.name in _TENSOR_PARAMS and q.name in base]
            if tensors:
                for shp, feed in (("(3,)", "np.ones((2,3), np.float32)"), ("(3,4)", "rng.random((2,3,4)).astype(np.float32)"),
                                  ("(2,2,2)", "np.ones((2,2,2,2), np.float32)"), ("(0,)", "np.ones((2,0), np.float32)"),
                                  ("(2,2,2,2)", "np.ones((2,2,2,2,2), np.float32)")):
                    kw = dict(base)
                    for t in tensors:
                        kw[t] = "t"
                    body = call(kw)[4:]
                    cases.append((f"auto.graph.{name}.in{shp}",
                                  f"m = op_model(lambda t: {body}, {shp}); y = m.predict({feed}); "
                                  f"R = m.fit({feed}, y, verbose=0).history['loss']"))
    return cases


# --- every layer class, from its signature -------------------------------------------------------
_LAYER_ARGS = {"activation": "'relu'", "axes": "1", "cell": "L.SimpleRNNCell(2)", "cells": "[L.SimpleRNNCell(2)]",
               "dims": "(2, 1)", "equation": "'ab,bc->ac'", "factor": "0.2", "filters": "2", "function": "lambda t: t * 2",
               "height": "2", "width": "2", "height_factor": "0.2", "width_factor": "0.2", "input_dim": "5",
               "output_dim": "3", "kernel_size": "2", "key_dim": "2", "num_heads": "2", "layer": "L.Dense(2)", "n": "2",
               "num_bins": "4", "output_shape": "3", "rate": "0.5", "scale": "0.5", "stddev": "0.1",
               "target_shape": "(-1,)", "units": "2", "head_dim": "2", "num_query_heads": "2", "num_key_value_heads": "1",
               "layers": "[L.Dense(2)]", "num_mel_bins": "4", "sampling_rate": "8000", "fft_length": "8",
               "sequence_length": "8", "sequence_stride": "4", "frame_length": "8", "frame_step": "4",
               "value_range": "(0, 1)", "num_classes": "3"}
_LAYER_FEEDS = {"2d": ((4,), "rng.random((2, 4)).astype(np.float32)"),
                "3d": ((3, 4), "rng.random((2, 3, 4)).astype(np.float32)"),
                "4d": ((4, 4, 3), "rng.random((2, 4, 4, 3)).astype(np.float32)"),
                "int2d": ((4,), "rng.integers(0, 5, (2, 4)).astype(np.int32)")}


def cases_auto_layers():
    """Each layer class of pg.layers built from its signature: on arrays and in a model
    (predict, fit, save/load) at several input ranks, and with each constructor argument in
    turn given hostile values."""
    import inspect
    import pyggml as pg
    hostile = {"neg1": "-1", "zero": "0", "e9": "10**9", "float": "2.5", "str": "'x'", "none": "None", "nan": "float('nan')",
               "inf": "float('inf')", "list": "[1, 2]", "tuple": "(0, 0)", "dict": "{'a': 1}", "shape_huge": "(100000, 100000)",
               "array": "np.ones((2, 2))", "lam": "lambda *a: 1/0", "true": "True", "e5": "100000"}
    skip = {"Layer", "InputLayer", "Input", "HostLayer", "Wrapper"}
    cases = []
    for name in pg.layers.__all__:
        cls = getattr(pg.layers, name, None)
        if name in skip or not (isinstance(cls, type) and issubclass(cls, pg.layers.Layer)):
            continue
        try:
            params = [q for q in inspect.signature(cls.__init__).parameters.values()
                      if q.name != "self" and q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY)]
        except (TypeError, ValueError):
            continue
        base = {q.name: _LAYER_ARGS.get(q.name, "2") for q in params if q.default is inspect.Parameter.empty}

        def ctor(kw):
            return f"L.{name}(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")"
        for fname, (shape, feed) in _LAYER_FEEDS.items():
            cases.append((f"layers.{name}.eager.{fname}", f"R = np.shape({ctor(base)}({feed}))"))
            cases.append((f"layers.{name}.model.{fname}",
                          f"m = pg.Sequential([pg.Input({shape}, dtype={'int32' if fname.startswith('int') else 'float32'!r}), "
                          f"{ctor(base)}]); x = {feed}; y = m.predict(x, verbose=0)\n"
                          f"m.compile(loss='mse', optimizer='adam')\n"
                          f"try:\n    m.fit(x, y, verbose=0)\nexcept ValueError as e:\n"
                          f"    assert 'trainable' in str(e) or 'depend' in str(e), e\nR = roundtrip(m, x).count_params()"))
        for q in params:
            for hn, hv in hostile.items():
                kw = dict(base)
                kw[q.name] = hv
                cases.append((f"layers.{name}.{q.name}={hn}",
                              f"m = pg.Sequential([pg.Input((3, 4)), {ctor(kw)}]); x = rng.random((2, 3, 4)).astype(np.float32)\n"
                              f"R = m.predict(x, verbose=0).shape"))
    return cases


def cases_round9():
    """This round's surface: LoRA, Adafactor, the metric functions, adaptive pooling,
    ReversibleEmbedding's reverse call, keras.backend's dtype functions, the datasets'
    arguments (checked before any download) and the broadcast of targets."""
    hostile = ["-1", "0", "10**9", "2.5", "'x'", "None", "float('nan')", "float('inf')", "[1, 2]", "(0, 0)",
               "np.ones((2, 2))", "True", "{'a': 1}"]
    cases = []
    dense = "d = L.Dense(4); m = pg.Sequential([pg.Input((3,)), d]); x = rng.random((5, 3)).astype(np.float32)\n"
    for h in hostile:
        cases += [
            (f"round9.enable_lora.rank={h}", dense + f"d.enable_lora({h})\nm.compile('adam', 'mse'); m.fit(x, x[:, :1].repeat(4, 1), verbose=0)\nR = m.predict(x, verbose=0).shape"),
            (f"round9.enable_lora.alpha={h}", dense + f"d.enable_lora(2, lora_alpha={h})\nR = m.predict(x, verbose=0).shape"),
            (f"round9.Dense.lora_rank={h}", f"m = pg.Sequential([pg.Input((3,)), L.Dense(2, lora_rank={h})]); R = m.predict(np.ones((2, 3)), verbose=0).shape"),
            (f"round9.Embedding.lora_rank={h}", f"m = pg.Sequential([pg.Input((3,), dtype='int32'), L.Embedding(5, 2, lora_rank={h})]); R = m.predict(np.ones((2, 3), int), verbose=0).shape"),
            (f"round9.Adafactor.decay={h}", f"m = pg.Sequential([pg.Input((3,)), L.Dense(2)]); m.compile(pg.optimizers.Adafactor(beta_2_decay={h}), 'mse')\nR = m.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0).history"),
            (f"round9.Adafactor.clip={h}", f"m = pg.Sequential([pg.Input((3,)), L.Dense(2)]); m.compile(pg.optimizers.Adafactor(clip_threshold={h}, epsilon_2={h}), 'mse')\nR = m.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0).history"),
            (f"round9.top_k_metric.k={h}", f"R = pg.metrics.sparse_top_k_categorical_accuracy(np.array([0, 1]), np.ones((2, 3)), k={h})"),
            (f"round9.binary_accuracy.threshold={h}", f"R = pg.metrics.binary_accuracy(np.ones((2, 3)), np.ones((2, 3)), threshold={h})"),
            (f"round9.adaptive_avg.size={h}", f"R = ops.adaptive_average_pool(X4, {h})"),
            (f"round9.adaptive_max_layer.size={h}", f"m = pg.Sequential([pg.Input((4, 4, 2)), L.AdaptiveMaxPooling2D({h})]); R = m.predict(X4, verbose=0).shape"),
            (f"round9.adaptive3d.size={h}", f"R = np.shape(L.AdaptiveAveragePooling3D({h})(rng.random((2, 3, 4, 5, 2)).astype(np.float32)))"),
            (f"round9.reversible.reverse={h}", f"e = L.ReversibleEmbedding(5, 3); R = np.shape(e(np.ones((2, 3), np.float32), reverse={h}))"),
            (f"round9.reversible.cap={h}", f"e = L.ReversibleEmbedding(5, 3, logit_soft_cap={h}); R = np.shape(e(np.ones((2, 3), np.float32), reverse=True))"),
            (f"round9.standardize_dtype={h}", f"R = pg.backend.standardize_dtype({h})"),
            (f"round9.result_type={h}", f"R = pg.backend.result_type({h}, 'float32')"),
            (f"round9.boston.test_split={h}", f"R = pg.datasets.boston_housing.load_data(test_split={h})"),
            (f"round9.cifar100.label_mode={h}", f"R = pg.datasets.cifar100.load_data(label_mode={h})"),
            (f"round9.cholesky_inverse.upper={h}", f"R = ops.cholesky_inverse(np.eye(3), upper={h})"),
            (f"round9.device={h}", f"R = pg.device({h}).name"),
            (f"round9.mse_y={h}", f"m = pg.Sequential([pg.Input((3,)), L.Dense(4)]); m.compile('sgd', 'mse')\nR = m.fit(np.ones((4, 3)), np.asarray({h}), verbose=0).history"),
        ]
    cases += [
        ("round9.metric_fns.nan", "R = pg.metrics.categorical_accuracy(np.full((2, 3), np.nan), np.ones((2, 3)))"),
        ("round9.metric_fns.shapes", "R = pg.metrics.sparse_categorical_accuracy(np.ones((2, 5, 7)), np.ones((3, 3)))"),
        ("round9.metric_fns.strings", "R = pg.metrics.binary_accuracy(np.array(['a']), np.ones((1,)))"),
        ("round9.lora.twice_after_free", dense + "m.free(); d.enable_lora(2); R = d.lora_enabled"),
        ("round9.lora.einsum_huge", "e = L.EinsumDense('ab,bc->ac', 4); m = pg.Sequential([pg.Input((3,)), e]); e.enable_lora(10**6)\nR = m.predict(np.ones((2, 3)), verbose=0)"),
        ("round9.lora.save_load", dense + "d.enable_lora(2); R = roundtrip(m, x).count_params()"),
        ("round9.adafactor.tape", "v = pg.Variable(np.ones((3, 2), np.float32)); o = pg.optimizers.Adafactor()\nfor _ in range(3):\n    o.apply_gradients([(np.full((3, 2), np.nan), v)])\nR = v.numpy()"),
        ("round9.adafactor.zero_grads", "v = pg.Variable(np.zeros((3, 2), np.float32)); o = pg.optimizers.Adafactor()\no.apply_gradients([(np.zeros((3, 2), np.float32), v)]); R = v.numpy()"),
        ("round9.optimizer_override_raises", "class O(pg.optimizers.SGD):\n    def apply(self, g, v=None):\n        raise RuntimeError('mine')\nm = pg.Sequential([pg.Input((3,)), L.Dense(1)]); m.compile(O(), 'mse')\nR = m.fit(np.ones((4, 3)), np.ones((4, 1)), verbose=0)"),
        ("round9.adaptive.huge_out", "R = ops.adaptive_max_pool(X4, (10**5, 10**5))"),
        ("round9.quantize.twice", dense + "m.quantize('int8'); m.quantize('int8'); R = 1"),
        ("round9.quantize.unbuilt", "d = L.Dense(3); R = d.quantize('int8')"),
        ("round9.quantize.filters_bad", dense + "R = m.quantize('int8', filters=3)"),
        ("round9.quantize.filters_regex_bad", dense + "R = m.quantize('int8', filters='[')"),
        ("round9.quantize.zero_kernel", "d = L.Dense(3, kernel_initializer='zeros'); m = pg.Sequential([pg.Input((2,)), d])\nm.quantize('int4'); R = m.predict(np.ones((2, 2)), verbose=0)"),
        ("round9.quantize.nan_input", dense + "m.quantize('int8'); R = m.predict(np.full((2, 3), np.nan), verbose=0)"),
        ("round9.quantize.save_load", dense + "m.quantize('int8'); R = roundtrip(m, x).count_params()"),
        ("round9.quantize.after_free", dense + "m.free(); R = m.quantize('int8')"),
        ("round9.quantize.policy_ctor", "R = pg.Sequential([pg.Input((3,)), L.Dense(2, dtype='int8_from_float32')]).predict(np.ones((1, 3)), verbose=0)"),
        ("round9.quantize.policy_bad", "R = L.Dense(2, dtype='int3_from_float32')"),
        ("round9.gguf.int8_tensor", "f = pg.core.GGUFFile(); f.add_tensor('a', np.array([[1, -2]], np.int8)); p = os.path.join(TMP, 'i8.gguf'); f.write(p)\ng = pg.core.GGUFFile.read(p); R = g.read_tensor(g.tensor_names()[0]) if hasattr(g, 'tensor_names') else 1"),
        ("round9.rnn_matrix_cell_bad", "class C(L.Layer):\n    state_size = 3\n    def call(self, x, s):\n        return x, s\nR = pg.Sequential([pg.Input((4, 2, 3)), L.RNN(C())]).predict(np.ones((2, 4, 2, 3)), verbose=0)"),
    ]
    return cases


def cases_round10():
    """This round's surface: rearrange, fold, i0, jvp, the new image ops, view/einsum forms,
    CategoricalGeneralizedCrossEntropy, Precision/Recall top_k/class_id/thresholds,
    CosineSimilarity's axis, the STFT initializer, ScheduleFreeAdamW, MultiOptimizer, CLAHE,
    CategoryEncoding's count_weights, IntegerLookup's oov_method, scatter with computed
    indices, random.categorical in a graph, rejection_resample and strict broadcasting."""
    hostile = ["-1", "0", "10**9", "2.5", "'x'", "None", "float('nan')", "float('inf')", "[1, 2]", "(0, 0)",
               "np.ones((2, 2))", "True", "{'a': 1}"]
    img = "im = rng.random((2, 9, 7, 3)).astype(np.float32)\n"
    cases = []
    for h in hostile:
        cases += [
            (f"round10.rearrange.pattern={h}", f"R = ops.rearrange(np.ones((2, 3, 4)), {h})"),
            (f"round10.rearrange.length={h}", f"R = ops.rearrange(np.ones((2, 6)), 'b (h w) -> b h w', h={h})"),
            (f"round10.fold.output_size={h}", f"R = ops.fold(np.ones((1, 4, 4)), {h}, 2, stride=2)"),
            (f"round10.fold.kernel={h}", f"R = ops.fold(np.ones((1, 4, 4)), (4, 4), {h})"),
            (f"round10.fold.x={h}", f"R = ops.fold({h}, (4, 4), 2)"),
            (f"round10.i0={h}", f"R = ops.i0({h})"),
            (f"round10.jvp.primals={h}", f"R = ops.jvp(ops.sin, {h}, (np.ones(2),))"),
            (f"round10.jvp.fun={h}", f"R = ops.jvp({h}, (np.ones(2),), (np.ones(2),))"),
            (f"round10.sobel={h}", f"R = ops.image.sobel_edges({h})"),
            (f"round10.ssim.filter_size={h}", img + f"R = ops.image.ssim(im, im, filter_size={h})"),
            (f"round10.ssim.max_val={h}", img + f"R = ops.image.ssim(im, im, max_val={h}, filter_size=3)"),
            (f"round10.st.scale={h}", img + f"R = ops.image.scale_and_translate(im, (2, 4, 4, 3), {h}, [0, 0], (1, 2), 'linear')"),
            (f"round10.st.dims={h}", img + f"R = ops.image.scale_and_translate(im, (2, 4, 4, 3), [1, 1], [0, 0], {h}, 'linear')"),
            (f"round10.st.shape={h}", img + f"R = ops.image.scale_and_translate(im, {h}, [1, 1], [0, 0], (1, 2), 'cubic')"),
            (f"round10.patches3d.size={h}", f"R = ops.image.extract_patches_3d(np.ones((1, 4, 4, 4, 1)), {h})"),
            (f"round10.view.dtype={h}", f"R = ops.view(np.ones(4, np.int32), {h})"),
            (f"round10.einsum.sublist={h}", f"R = ops.einsum(np.ones((2, 2)), {h})"),
            (f"round10.gce.q={h}", f"R = pg.losses.CategoricalGeneralizedCrossEntropy(q={h})([0, 1], [[0.6, 0.4], [0.3, 0.7]])"),
            (f"round10.gce.labels={h}", f"R = pg.losses.CategoricalGeneralizedCrossEntropy()({h}, [[0.6, 0.4], [0.3, 0.7]])"),
            (f"round10.precision.top_k={h}", f"m = pg.metrics.Precision(top_k={h}); m.update_state([0, 1], [0.3, 0.7]); R = m.result()"),
            (f"round10.recall.class_id={h}", f"m = pg.metrics.Recall(class_id={h}); m.update_state([[0, 1]], [[0.3, 0.7]]); R = m.result()"),
            (f"round10.precision.thresholds={h}", f"m = pg.metrics.Precision(thresholds={h}); m.update_state([0, 1], [0.3, 0.7]); R = m.result()"),
            (f"round10.cosine.axis={h}", f"m = pg.metrics.CosineSimilarity(axis={h}); m.update_state([[1., 0.]], [[1., 1.]]); R = m.result()"),
            (f"round10.stft.shape={h}", f"R = pg.initializers.STFT()(shape={h})"),
            (f"round10.stft.window={h}", f"R = pg.initializers.STFT(window={h})(shape=(8, 1, 5))"),
            (f"round10.sfadamw.warmup={h}", f"R = pg.optimizers.ScheduleFreeAdamW(warmup_steps={h})"),
            (f"round10.sfadamw.beta_1={h}", f"R = pg.optimizers.ScheduleFreeAdamW(beta_1={h})"),
            (f"round10.multi.map={h}", f"R = pg.optimizers.MultiOptimizer({h})"),
            (f"round10.optmap.key={h}", f"o = pg.optimizers.OptimizerMap(pg.optimizers.SGD()); o[{h}] = pg.optimizers.Adam(); R = len(o)"),
            (f"round10.clahe.grid={h}", f"R = L.ContrastLimitedAdaptiveHistogramEqualization(tile_grid_size={h})(np.ones((1, 8, 8, 1)))"),
            (f"round10.clahe.clip={h}", f"R = L.ContrastLimitedAdaptiveHistogramEqualization(clip_limit={h})(np.ones((1, 8, 8, 1)))"),
            (f"round10.count_weights={h}", f"R = L.CategoryEncoding(4, output_mode='count')([[0, 1]], count_weights={h})"),
            (f"round10.oov_method={h}", f"R = L.IntegerLookup(vocabulary=[1, 2], num_oov_indices=2, oov_method={h})([5])"),
            (f"round10.salt={h}", f"R = L.IntegerLookup(vocabulary=[1, 2], num_oov_indices=2, oov_method='farmhash', salt={h})([5])"),
            (f"round10.categorical.n={h}", f"inp = pg.Input((3,)); R = pg.Model(inp, L.Lambda(lambda t: pg.random.categorical(t, {h}))(inp)).predict(np.ones((2, 3)), verbose=0)"),
            (f"round10.rejection.target={h}", f"d = pg.data.Dataset.from_tensor_slices(np.arange(10)); R = list(d.rejection_resample(lambda v: v % 2, {h}))"),
            (f"round10.rejection.class={h}", f"d = pg.data.Dataset.from_tensor_slices(np.arange(10)); R = list(d.rejection_resample(lambda v: {h}, [0.5, 0.5]))"),
            (f"round10.view_as_complex={h}", f"R = ops.view_as_complex({h})"),
            (f"round10.initializer_array={h}", f"R = pg.Sequential([pg.Input((3,)), L.Dense(2, kernel_initializer=np.full((3, 2), {h}))]).compile('adam', 'mse')"),
            (f"round10.mha.sliding_window={h}", f"R = L.MultiHeadAttention(2, 4, sliding_window={h})(np.ones((2, 5, 8)), np.ones((2, 5, 8)))"),
            (f"round10.mha.use_gate={h}", f"R = L.MultiHeadAttention(2, 4, use_gate={h})(np.ones((2, 5, 8)), np.ones((2, 5, 8)))"),
            (f"round10.mha.seed={h}", f"R = L.MultiHeadAttention(2, 4, dropout=0.5, seed={h})(np.ones((2, 5, 8)), np.ones((2, 5, 8)), training=True)"),
            (f"round10.mha.flash={h}", f"R = L.MultiHeadAttention(2, 4, flash_attention={h})(np.ones((2, 5, 8)), np.ones((2, 5, 8)))"),
            (f"round10.mha.query_mask={h}", f"R = L.MultiHeadAttention(2, 4)(np.ones((2, 5, 8)), np.ones((2, 5, 8)), query_mask={h})"),
            (f"round10.gqa.sliding_window={h}", f"R = L.GroupedQueryAttention(2, 4, 2, sliding_window={h})(np.ones((2, 5, 8)), np.ones((2, 5, 8)))"),
            (f"round10.conv3d.groups={h}", f"R = L.Conv3D(4, 2, groups={h})(np.ones((1, 3, 3, 3, 4)))"),
            (f"round10.conv3d_cf.x={h}", f"R = L.Conv3D(2, 2, data_format='channels_first')({h})"),
            (f"round10.pool3d_cf.size={h}", f"R = L.MaxPooling3D({h}, data_format='channels_first')(np.ones((1, 2, 4, 4, 4)))"),
            (f"round10.zeropad1d_cf={h}", f"R = L.ZeroPadding1D({h}, data_format='channels_first')(np.ones((1, 2, 4)))"),
            (f"round10.upsampling3d_cf={h}", f"R = L.UpSampling3D({h}, data_format='channels_first')(np.ones((1, 2, 2, 2, 2)))"),
            (f"round10.upsampling2d.bicubic={h}", f"R = L.UpSampling2D({h}, interpolation='bicubic')(np.ones((1, 3, 3, 2)))"),
            (f"round10.dropout.rate={h}", f"R = L.Dropout({h})(np.ones((2, 3)), training=True)"),
            (f"round10.bn.mask={h}", f"R = L.BatchNormalization()(np.ones((2, 4, 3)), mask={h}, training=True)"),
            (f"round10.loss_mask={h}", f"class A(np.ndarray):\n    pass\np = np.full((2, 3, 1), 0.5).view(A); p._keras_mask = {h}\nR = pg.losses.MeanSquaredError()(np.ones((2, 3, 1)), p)"),
            (f"round10.losses.get={h}", f"R = pg.losses.get({h})"),
            (f"round10.iou.axis={h}", f"m = pg.metrics.MeanIoU(3, sparse_y_pred=False, axis={h}); m.update_state([0, 1], [[0.1, 0.9, 0.0], [0.2, 0.3, 0.5]]); R = m.result()"),
            (f"round10.fbeta.threshold={h}", f"R = pg.metrics.FBetaScore(threshold={h})"),
            (f"round10.circle.weights={h}", f"R = pg.losses.Circle(reduction='mean_with_sample_weight')([0, 0, 1], np.eye(3)[:, :2], sample_weight={h})"),
        ]
    cases += [
        ("round10.scatter_computed.huge", "v = pg.Variable(np.ones((4, 3), np.float32))\nwith pg.GradientTape():\n    _, i = ops.top_k(v, k=2)\n    R = ops.scatter(ops.reshape(i, (-1, 1)), ops.ones((8,)), (10**8,))"),
        ("round10.scatter_computed.out_of_range", "v = pg.Variable(np.ones((4, 3), np.float32))\nwith pg.GradientTape():\n    _, i = ops.top_k(v, k=2)\n    R = np.asarray(ops.scatter(ops.reshape(i * 10, (-1, 1)), ops.ones((8,)), (3,)))"),
        ("round10.broadcast.tile", "class M(L.Layer):\n    def call(self, a, b):\n        return a * b\nR = M()(pg.Input((4, 8)), pg.Input((12, 8)))"),
        ("round10.fold.huge", "R = ops.fold(np.ones((1, 4, 4)), (2**20, 2**20), 2, stride=2**19)"),
        ("round10.rearrange.wide", "R = ops.rearrange(np.ones((2, 2, 2, 2, 2, 2, 2, 2)), 'a b c d e f g h -> (a b c d) (e f g h)').shape"),
        ("round10.jvp.nan", "R = ops.jvp(ops.log, (np.array([-1.0, 0.0]),), (np.ones(2),))"),
        ("round10.multi.after_free", "m = pg.Sequential([pg.Input((3,)), L.Dense(1)]); m.compile(pg.optimizers.MultiOptimizer(pg.optimizers.OptimizerMap(pg.optimizers.SGD())), 'mse'); m.free(); R = m.fit(np.ones((2, 3)), np.ones((2, 1)), verbose=0)"),
        ("round10.multi.function_returns_junk", "m = pg.Sequential([pg.Input((3,)), L.Dense(1)]); m.compile(pg.optimizers.MultiOptimizer(lambda v: 3), 'mse'); R = m.fit(np.ones((2, 3)), np.ones((2, 1)), verbose=0)"),
        ("round10.variable_bool", "R = bool(pg.Variable(1.0))"),
        ("round10.gan_no_call", "class G(pg.Model):\n    pass\nR = G()(np.ones((2, 3)))"),
        ("round10.mha.window_5d", "R = L.MultiHeadAttention(2, 4, sliding_window=2)(np.ones((1, 3, 3, 8)), np.ones((1, 3, 3, 8)))"),
        ("round10.conv3d_cf.fit_5d_bad", "m = pg.Sequential([pg.Input((2, 4, 4, 4)), L.Conv3D(2, 2, data_format='channels_first')]); m.compile('adam', 'mse'); R = m.fit(np.ones((2, 4, 4, 4, 2)), np.ones((2, 2, 3, 3, 3)), verbose=0)"),
        ("round10.bn.mask_all_zero", "R = L.BatchNormalization()(np.ones((2, 4, 3)), mask=np.zeros((2, 4)), training=True)"),
        ("round10.clahe.huge_batch", "R = L.ContrastLimitedAdaptiveHistogramEqualization(tile_grid_size=(4096, 4096))(np.ones((1, 8, 8, 1)))"),
    ]
    return cases


def cases_round11():
    """steps_per_epoch going on between epochs (arrays, PyDatasets, generators, custom steps),
    validation_steps with a split, Sequential models built from data meeting other shapes,
    model.layers without ops, nested dict inputs called in another model, joined weights."""
    hostile = ["-1", "0", "10**9", "2.5", "'x'", "None", "float('nan')", "[1, 2]", "(0, 0)", "np.ones((2, 2))",
               "True", "{'a': 1}"]
    seq = "m = pg.Sequential([L.Dense(2)]); m.compile('sgd', 'mse')\n"
    pyd = ("class P(pg.utils.PyDataset):\n    def __len__(self):\n        return 3\n"
           "    def __getitem__(self, i):\n        return np.ones((2, 3)), np.ones((2, 2))\n")
    nested = ("a, b = pg.Input((2,), name='a'), pg.Input((3,), name='b')\n"
              "inner = pg.Model({'x': {'a': a}, 'b': b}, L.Concatenate()([a, b]))\n")
    cases = []
    for h in hostile:
        cases += [
            (f"round11.steps_per_epoch={h}", seq + f"R = m.fit(np.ones((10, 3)), np.ones((10, 2)), batch_size=2, epochs=3, steps_per_epoch={h}, verbose=0)"),
            (f"round11.validation_steps={h}", seq + f"R = m.fit(np.ones((10, 3)), np.ones((10, 2)), batch_size=2, epochs=2, steps_per_epoch=2, validation_split=0.4, validation_steps={h}, verbose=0)"),
            (f"round11.validation_batch_size={h}", seq + f"R = m.fit(np.ones((10, 3)), np.ones((10, 2)), epochs=2, validation_split=0.4, validation_batch_size={h}, verbose=0)"),
            (f"round11.pydataset.steps={h}", seq + pyd + f"R = m.fit(P(), epochs=3, steps_per_epoch={h}, verbose=0)"),
            (f"round11.predict.steps={h}", seq + f"m.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0); R = m.predict(np.ones((10, 3)), batch_size=2, steps={h}, verbose=0)"),
            (f"round11.relax.x={h}", seq + f"m.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0); R = m.predict({h}, verbose=0)"),
            (f"round11.nested_call={h}", nested + f"R = inner({{'x': {{'a': {h}}}, 'b': pg.Input((3,))}})"),
            (f"round11.weights_add={h}", f"d = L.Dense(2); d.build((None, 3)); R = d.get_weights() + {h}"),
        ]
    lstm = "m = pg.Sequential([L.LSTM(2)]); m.compile('adam', 'mse'); m.fit(np.ones((4, 5, 3)), np.ones((4, 2)), verbose=0)\n"
    cases += [
        ("round11.relax.rank", lstm + "R = m.predict(np.ones((2, 5)), verbose=0)"),
        ("round11.relax.zero_length", lstm + "R = m.predict(np.ones((2, 0, 3)), verbose=0)"),
        ("round11.relax.features", lstm + "R = m.predict(np.ones((2, 5, 4)), verbose=0)"),
        ("round11.relax.huge_length", lstm + "R = m.predict(np.ones((1, 10**6, 3), np.float32), verbose=0)"),
        ("round11.relax.then_trainer", lstm + "t = pg.Trainer(m, 4); R = m.predict(np.ones((2, 7, 3)), verbose=0)"),
        ("round11.relax.after_free", lstm + "m.free(); R = m.predict(np.ones((2, 7, 3)), verbose=0)"),
        ("round11.relax.flatten", "m = pg.Sequential([L.Flatten(), L.Dense(1)]); m.compile('sgd', 'mse'); m.fit(np.ones((4, 8, 8)), np.ones((4, 1)), verbose=0); R = m.predict(np.ones((2, 9, 8)), verbose=0)"),
        ("round11.generator_runs_out", "m = pg.Sequential([pg.Input((3,)), L.Dense(2)]); m.compile('sgd', 'mse')\ndef g():\n    for _ in range(3):\n        yield np.ones((2, 3)), np.ones((2, 2))\nR = m.fit(g(), epochs=4, steps_per_epoch=2, verbose=0)"),
        ("round11.pydataset_raises", seq + "class P(pg.utils.PyDataset):\n    def __len__(self):\n        return 3\n    def __getitem__(self, i):\n        if i == 2:\n            raise RuntimeError('bad item')\n        return np.ones((2, 3)), np.ones((2, 2))\nR = m.fit(P(), epochs=3, steps_per_epoch=2, verbose=0)"),
        ("round11.pydataset_len_changes", seq + "class P(pg.utils.PyDataset):\n    n = 4\n    def __len__(self):\n        P.n -= 1\n        return max(P.n, 0)\n    def __getitem__(self, i):\n        return np.ones((2, 3)), np.ones((2, 2))\nR = m.fit(P(), epochs=4, steps_per_epoch=2, verbose=0)"),
        ("round11.nested_call.missing_key", "a, b = pg.Input((2,), name='a'), pg.Input((3,), name='b')\ninner = pg.Model({'x': {'a': a}, 'b': b}, L.Concatenate()([a, b]))\nR = inner({'x': {'z': pg.Input((2,))}, 'b': pg.Input((3,))})"),
        ("round11.nested_call.wrong_shape", "a, b = pg.Input((2,), name='a'), pg.Input((3,), name='b')\ninner = pg.Model({'x': {'a': a}, 'b': b}, L.Concatenate()([a, b]))\nR = inner({'x': {'a': pg.Input((5,))}, 'b': pg.Input((3,))})"),
        ("round11.layers_after_free", "i = pg.Input((3,)); m = pg.Model(i, L.Dense(2)(i + 1.0)); m.free(); R = m.layers"),
        ("round11.summary_ops", "i = pg.Input((3,)); m = pg.Model(i, L.Dense(2)(ops.mean(i * i, axis=-1, keepdims=True))); m.summary(); R = [l.name for l in m.layers]"),
    ]
    return cases


def cases_round12():
    """The tenth round of keras-io port fixes: ops.where alone, a tensor's Keras dtype, tapes'
    tensors as values (and 0-d tape scalars), Datasets whose passes differ in length, custom
    steps' epochs, get_build_config/build_from_config, deserialize_keras_object's strings,
    summary's line_length, a flag given as y_pred."""
    hostile = ["-1", "0", "10**9", "2.5", "'x'", "None", "float('nan')", "[1, 2]", "(0, 0)", "np.ones((2, 2))",
               "True", "{'a': 1}", "object()"]
    seq = "m = pg.Sequential([pg.Input((3,)), L.Dense(2)]); m.compile('sgd', 'mse')\n"
    tape2 = ("d = L.Dense(1)\nx = np.ones((4, 3), np.float32)\nwith pg.GradientTape() as t1:\n    a = ops.mean(d(x))\n"
             "with pg.GradientTape() as t2:\n    b = ops.mean(d(x))\n")
    flt = "ds = pg.data.Dataset.from_tensor_slices(np.arange(10.0)).filter(lambda v: v % 3 != 0)\n"
    cases = []
    for h in hostile:
        cases += [
            (f"round12.where={h}", f"R = ops.where({h})"),
            (f"round12.where_x1={h}", f"R = ops.where(np.array([1, 0]), {h})"),
            (f"round12.dtype_eq={h}", "inp = pg.Input((3,))\nclass C(L.Layer):\n    def call(self, x):\n"
                                      f"        R.append(x.dtype == {h}); return x\nR = []\nC()(inp)"),
            (f"round12.standardize_dtype={h}", f"R = pg.backend.standardize_dtype({h})"),
            (f"round12.tape_mix={h}", tape2 + f"R = float(a + b * {h})"),
            (f"round12.repeat_filter={h}", flt + f"R = list(ds.repeat({h}).take(25))"),
            # (take(-1) of an endless repeat is endless, as tf.data's: not listed)
            (f"round12.take_repeat_filter={h}", flt + f"R = list(ds.repeat().take({h}))" if h != "-1" else
             flt + "R = ds.repeat().take(-1).cardinality()"),
            (f"round12.build_from_config={h}", f"d = L.Dense(2); d.build_from_config({{'shapes_dict': {h}}}); R = d.built"),
            (f"round12.build_from_config_shape={h}", f"d = L.Dense(2); d.build_from_config({{'input_shape': {h}}}); R = d.built"),
            (f"round12.deserialize={h}", f"R = pg.utils.deserialize_keras_object({h})"),
            (f"round12.summary_line_length={h}", seq + f"R = m.summary(line_length={h}, print_fn=lambda s: None)"),
            (f"round12.summary_positions={h}", seq + f"R = m.summary(line_length=80, positions={h}, print_fn=lambda s: None)"),
            (f"round12.flag_loss={h}", "class FL(pg.losses.Loss):\n    def call(self, y, flag):\n"
                                       "        return ops.mean(y) if flag else -ops.mean(y)\n"
                                       f"R = float(FL()(np.ones((2, 1), np.float32), {h}))"),
        ]
    cases += [
        ("round12.tape_mix_after_free", tape2 + "del t1; import gc; gc.collect(); R = float(a + b)"),
        ("round12.tape_mix_inside", tape2 + "with pg.GradientTape() as t3:\n    c = ops.mean(d(x)) * a + b\n"
                                            "R = [float(c), t3.gradient(c, d.trainable_variables)[0].shape]"),
        ("round12.tape_scalar_reshaped", tape2 + "R = [np.asarray(a).shape, np.asarray(ops.reshape(a, (1, 1))).shape]"),
        ("round12.filter_empty_repeat", "ds = pg.data.Dataset.from_tensor_slices(np.arange(5.0)).filter(lambda v: v > 9)\n"
                                        "R = list(ds.repeat().take(3))"),
        ("round12.filter_fit_empty", seq + "ds = pg.data.Dataset.from_tensor_slices((np.ones((6, 3)), np.ones((6, 2))))"
                                           ".filter(lambda a, b: False).batch(2)\nR = m.fit(ds, epochs=2, verbose=0)"),
        ("round12.custom_step_pydataset_raises", "class M(pg.Model):\n    def __init__(self):\n        super().__init__(); "
         "self.d = L.Dense(1)\n    def call(self, x):\n        return self.d(x)\n    def train_step(self, b):\n"
         "        return {'loss': 0.0}\nclass P(pg.utils.PyDataset):\n    def __len__(self):\n        return 2\n"
         "    def __getitem__(self, i):\n        return np.ones((2, 3)), np.ones((2, 1))\n"
         "    def on_epoch_end(self):\n        raise RuntimeError('end')\nm = M(); m.compile('adam')\n"
         "R = m.fit(P(), epochs=2, verbose=0)"),
        ("round12.subclass_graph_load_bad_init", "class S(pg.Model):\n    def __init__(self, units, **kw):\n"
         "        i = pg.Input((3,)); super().__init__(i, L.Dense(units)(i), **kw)\n"
         "import tempfile, os; p = os.path.join(tempfile.mkdtemp(), 'm.keras'); S(2).save(p)\n"
         "R = pg.models.load_model(p, custom_objects={'S': S})"),
        ("round12.rnn_cell_fails_on_shapes", "class C(L.Layer):\n    state_size = 2\n    output_size = 2\n"
         "    def __init__(self):\n        super().__init__(); self.d = L.Dense(2)\n"
         "    def call(self, x, s):\n        raise ValueError('no')\n"
         "R = pg.Model(pg.Input((3, 4)), L.RNN(C())(pg.Input((3, 4))))"),
    ]
    return cases


def cases_round13():
    """The eleventh round of port fixes: Layer.stateless_call, FeatureSpace.from_config, a layer
    on nested dicts of inputs, quantized attention, an unbuilt Sequential saved, load_model of a
    folder, a kernel set from outside, callbacks editing the shared logs."""
    hostile = ["-1", "0", "10**9", "2.5", "'x'", "None", "float('nan')", "[1, 2]", "(0, 0)", "np.ones((2, 2))",
               "True", "{'a': 1}", "object()", "[np.ones((2, 2))] * 4", "[None] * 4", "[np.full((4, 3), np.inf)] * 4"]
    mha = ("i = pg.Input((4, 8)); att = L.MultiHeadAttention(num_heads=2, key_dim=4)\n"
           "m = pg.Model(i, att(i, i))\nx = np.ones((2, 4, 8), np.float32)\n")
    bn = ("i = pg.Input((3,)); m = pg.Model(i, L.Dense(2)(L.BatchNormalization()(L.Dense(4)(i))))\n"
          "tv = [v.numpy() for v in m.trainable_variables]; ntv = [v.numpy() for v in m.non_trainable_variables]\n"
          "x = np.ones((2, 3), np.float32)\n")
    pick = "class P(L.Layer):\n    def call(self, d):\n        return d['a'] * 2.0\n"
    cases = []
    for h in hostile:
        cases += [
            (f"round13.stateless_tv={h}", bn + f"R = m.stateless_call({h}, ntv, x)"),
            (f"round13.stateless_ntv={h}", bn + f"R = m.stateless_call(tv, {h}, x)"),
            (f"round13.stateless_x={h}", bn + f"R = m.stateless_call(tv, ntv, {h})"),
            (f"round13.fs_from_config={h}", f"R = pg.utils.FeatureSpace.from_config({h})"),
            (f"round13.fs_feature={h}", f"R = pg.utils.FeatureSpace.from_config({{'features': {{'a': {h}}}}})"),
            (f"round13.fs_cross={h}", "R = pg.utils.FeatureSpace.from_config({'features': {'a': 'float'}, "
             f"'crosses': [{h}]}})"),
            (f"round13.nested_dict={h}", pick + f"R = P()({{'a': np.ones((2, 2), np.float32), 'b': {{'c': {h}}}}})"),
            (f"round13.quantize_mha={h}", mha + f"R = m.quantize({h})"),
            (f"round13.quantize_mha_filters={h}", mha + f"R = m.quantize('int8', filters={h})"),
            (f"round13.kernel_set={h}", f"d = L.Dense(2); d.build((None, 3))\nd.kernel = {h}"),
            (f"round13.abs_max_axis={h}", f"R = pg.quantizers.abs_max_quantize(np.ones((2, 3)), {h})"),
            (f"round13.abs_max_range={h}", f"R = pg.quantizers.AbsMaxQuantizer(value_range={h})(np.ones((2, 3)))"),
            (f"round13.pack_int4={h}", f"R = pg.quantizers.pack_int4({h})"),
            (f"round13.unpack_int4_len={h}", f"R = pg.quantizers.unpack_int4(np.zeros((2, 2), np.int8), {h})"),
            (f"round13.quantize_config={h}", mha + f"R = m.quantize(config={h})"),
            (f"round13.int4_block={h}", f"R = pg.quantizers.Int4QuantizationConfig(block_size={h})"),
            (f"round13.weight_quantizer={h}", mha + "class Q(pg.quantizers.Quantizer):\n    def __call__(self, x):\n"
             f"        return {h}\nR = m.quantize(config=pg.quantizers.Int8QuantizationConfig(weight_quantizer=Q()))"),
        ]
    cases += [
        ("round13.quantize_mha_zero", mha + "m.set_weights({k: np.zeros_like(v) for k, v in m.get_weights().items()})\n"
         "m.quantize('int8'); R = m.predict(x, verbose=0)"),
        ("round13.quantize_mha_nan", mha + "m.set_weights({k: np.full_like(v, np.nan) for k, v in m.get_weights().items()})\n"
         "m.quantize('int4'); R = m.predict(x, verbose=0)"),
        ("round13.quantize_mha_then_set", mha + "m.quantize('int8'); w = m.get_weights(); m.set_weights(w)\n"
         "R = m.predict(x, verbose=0)"),
        ("round13.quantize_mha_fit_save", mha + "m.quantize('int8'); m.compile('adam', 'mse')\n"
         "m.fit(x, np.ones((2, 4, 8)), verbose=0)\nimport tempfile, os; p = os.path.join(tempfile.mkdtemp(), 'q.keras')\n"
         "m.save(p); R = pg.models.load_model(p).predict(x, verbose=0)"),
        ("round13.stateless_freed", bn + "m.free(); R = m.stateless_call(tv, ntv, x)"),
        ("round13.stateless_failing_call", bn + "R = m.stateless_call(tv, ntv, np.ones((2, 9), np.float32))"),
        ("round13.unbuilt_save_load", "import tempfile, os; p = os.path.join(tempfile.mkdtemp(), 'u.keras')\n"
         "m = pg.Sequential([L.Dense(2)]); m.compile(pg.optimizers.Adam(0.1), 'mse', metrics=['mae']); m.save(p)\n"
         "R = pg.models.load_model(p).fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0).history"),
        ("round13.unbuilt_save_overwrite_false", "import tempfile, os; p = os.path.join(tempfile.mkdtemp(), 'u.keras')\n"
         "open(p, 'w').write('keep'); m = pg.Sequential([L.Dense(2)])\ntry:\n    m.save(p, overwrite=False)\n"
         "finally:\n    assert open(p).read() == 'keep'"),
        ("round13.load_folder", "import tempfile; R = pg.models.load_model(tempfile.mkdtemp())"),
        ("round13.load_fifo", "import tempfile, os; p = os.path.join(tempfile.mkdtemp(), 'f'); os.mkfifo(p)\n"
         "R = pg.models.load_model(p)"),
        ("round13.logs_clear", "m = pg.Sequential([pg.Input((3,)), L.Dense(2)]); m.compile('sgd', 'mse', metrics=['mae'])\n"
         "c = pg.callbacks.LambdaCallback(on_epoch_end=lambda e, l: l.clear(), on_batch_end=lambda b, l: l.clear(),\n"
         "    on_test_end=lambda l: l.clear())\nR = m.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=2, verbose=1,\n"
         "    validation_split=0.5, callbacks=[c, pg.callbacks.EarlyStopping('val_loss')]).history"),
        ("round13.logs_odd_values", "m = pg.Sequential([pg.Input((3,)), L.Dense(2)]); m.compile('sgd', 'mse')\n"
         "c = pg.callbacks.LambdaCallback(on_epoch_end=lambda e, l: l.update(s='x', o=object(), n=None))\n"
         "R = m.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=2, verbose=1, callbacks=[c, "
         "pg.callbacks.CSVLogger(__import__('tempfile').mktemp())]).history"),
    ]
    return cases


SETS = {name[len("cases_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("cases_")}


def summarize(outfile, verbose):
    rows = [json.loads(line) for line in open(outfile)]
    crashes = [r for r in rows if "crash" in r]
    hangs = [r for r in rows if "hang" in r]
    errors = [r for r in rows if r.get("ok") is False]
    print(f"{len(rows)} cases: {len(crashes)} crashes, {len(hangs)} hangs, "
          f"{sum(1 for r in rows if r.get('ok'))} results, {len(errors)} errors")
    for r in crashes:
        print(f"CRASH {r['name']} (status {r['crash']}): {r['stderr'][-300:]!r}")
    for r in hangs:
        print(f"HANG {r['name']}")
    by_line = collections.defaultdict(list)
    for r in errors:
        by_line[(r["etype"], r["where"])].append(r)
    for (etype, where), rs in sorted(by_line.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(rs):5d} {etype} at {where}: e.g. {rs[0]['name']}: {rs[0]['msg'][:160]}")
        if verbose:
            for r in rs[1:]:
                print(f"        {r['name']}: {r['msg'][:160]}")
    return len(crashes) + len(hangs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", help=f"case sets (default all): {', '.join(SETS)}")
    ap.add_argument("--timeout", type=float, default=60, help="seconds one case may take before it counts as a hang")
    ap.add_argument("--out", default=None, help="the JSON-lines results file (default: a temporary one)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every error, not one per line of code")
    args = ap.parse_args()
    unknown = [s for s in args.sets if s not in SETS]
    if unknown:
        ap.error(f"unknown sets {unknown}; the sets are {list(SETS)}")
    cases = [c for s in (args.sets or SETS) for c in SETS[s]()]
    tmp = tempfile.mkdtemp(prefix="pyggml-probe-")
    setup_file = os.path.join(tmp, "setup.py")
    with open(setup_file, "w") as f:
        f.write(SETUP)
    out = args.out or os.path.join(tmp, "results.jsonl")
    t0 = time.time()
    run([tuple(c) for c in cases], out, setup_file, timeout=args.timeout)
    print(f"({time.time() - t0:.0f} s; results in {out})")
    sys.exit(1 if summarize(out, args.verbose) else 0)


if __name__ == "__main__":
    main()
