"""How the installed pyggml picks its CPU kernels and its GPU backends.

A dispatch build (the wheel) holds ggml's CPU backend once per instruction-set
level and loads the best one for this CPU at import; PYGGML_CPU_VARIANT forces
one (refused when the CPU cannot run it).  GPU backends are modules too: one
whose libraries or driver are missing is skipped, with the reason in
show_config(), and the import goes on.  Each case runs in a subprocess (the
choice is made once per process)."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyggml
from pyggml import _config
from pyggml.core import load_info

DISPATCH = _config.cpu_target == "dispatch"
needs_dispatch = pytest.mark.skipif(not DISPATCH, reason="a dispatch build (cpu_target=dispatch, the wheel)")


def _run(code, env_extra=None, cwd=None, pythonpath=None):
    env = dict(os.environ)
    env.pop("PYGGML_CPU_VARIANT", None)
    env.update(env_extra or {})
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=cwd)


def test_show_config_names_the_cpu_variant():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        pyggml.show_config()
    text = out.getvalue()
    info = load_info()
    assert f"cpu variant: {info['cpu_variant']} (" in text
    if DISPATCH:
        assert info["cpu_variant"] in _config.cpu_variants
        assert info["cpu_scores"][info["cpu_variant"]] == max(info["cpu_scores"].values()) or info["forced"]
    else:
        assert info["cpu_variant"] == _config.cpu_target


# one small training run: its losses and predictions, for comparing variants
TRAIN = """
import json, numpy as np, pyggml as pg
from pyggml.core import load_info
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 20)).astype(np.float32)
y = np.eye(3, dtype=np.float32)[(x[:, :3].argmax(1))]
m = pg.Sequential([pg.layers.Dense(32, activation="relu"), pg.layers.Dense(3, activation="softmax")],
                  input_shape=20).compile(optimizer="adam", loss="categorical_crossentropy", seed=0)
h = m.fit(x, y, epochs=3, batch_size=32, verbose=0, shuffle=False)
p = m.predict(x[:8])
print("RESULT " + json.dumps({"variant": load_info()["cpu_variant"], "loss": h.history["loss"],
                              "pred": p.tolist()}))
"""


def _result(r):
    assert r.returncode == 0, r.stderr[-2000:]
    line = [s for s in r.stdout.splitlines() if s.startswith("RESULT ")]
    assert line, r.stdout
    return json.loads(line[-1][7:])


@needs_dispatch
def test_every_usable_variant_can_be_forced_and_trains_alike():
    """Each variant this CPU can run, forced: it is the one loaded, and it trains
    to the same losses and predictions as the others (our kernel patches are
    compiled into every variant; only rounding may differ)."""
    scores = load_info()["cpu_scores"]
    usable = [v for v in _config.cpu_variants if scores.get(v, 0) > 0]
    assert usable, scores
    results = {}
    for v in usable:
        res = _result(_run(TRAIN, {"PYGGML_CPU_VARIANT": v}))
        assert res["variant"] == v
        results[v] = res
    ref = results[usable[0]]
    assert ref["loss"][-1] < ref["loss"][0]          # it learned something
    for v, res in results.items():
        assert res["loss"] == pytest.approx(ref["loss"], rel=1e-4), v
        np.testing.assert_allclose(res["pred"], ref["pred"], atol=1e-4, err_msg=v)


@needs_dispatch
def test_forcing_an_unknown_or_unrunnable_variant_is_refused():
    r = _run("import pyggml", {"PYGGML_CPU_VARIANT": "no_such_variant"})
    assert r.returncode != 0
    assert "PYGGML_CPU_VARIANT='no_such_variant'" in r.stderr and "has the CPU variants" in r.stderr
    scores = load_info()["cpu_scores"]
    unrunnable = [v for v in _config.cpu_variants if scores.get(v, 0) == 0]
    if unrunnable:       # e.g. the AVX-512 variant on a CPU without it
        r = _run("import pyggml", {"PYGGML_CPU_VARIANT": unrunnable[0]})
        assert r.returncode != 0
        assert "this CPU cannot run that variant" in r.stderr and "this CPU lacks" in r.stderr


def _copy_package(tmp_path):
    """A copy of the installed package, to add modules to."""
    src = os.path.dirname(pyggml.__file__)
    dst = tmp_path / "site" / "pyggml"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _set_gpu_modules(pkg, names):
    cfg = pkg / "_config.py"
    cfg.write_text(cfg.read_text() + f"\ngpu_modules = {names!r}\n")


@needs_dispatch
def test_a_gpu_module_whose_library_is_missing_is_skipped(tmp_path):
    """A GPU backend module that needs a library this machine lacks (as the
    Vulkan module without the Vulkan loader, or the CUDA one without the
    driver): the import works, the backend is skipped and show_config() says why."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler to make a module with a missing dependency")
    pkg = _copy_package(tmp_path)
    work = tmp_path / "mod"
    work.mkdir()
    (work / "dep.c").write_text("int pyggml_test_dep(void) { return 1; }\n")
    (work / "mod.c").write_text("int pyggml_test_dep(void);\nint ggml_backend_init(void) { return pyggml_test_dep(); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(work / "libpyggml-test-missing.so"), str(work / "dep.c")],
                   check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(pkg / "core" / "libggml-vulkan.so"), str(work / "mod.c"),
                    "-L" + str(work), "-lpyggml-test-missing", "-Wl,--no-as-needed"], check=True)
    (work / "libpyggml-test-missing.so").unlink()      # the library the module needs is gone
    _set_gpu_modules(pkg, ["vulkan"])
    r = _run("""
        import pyggml
        pyggml.show_config()
        print("BACKENDS", pyggml.backends())
        """, cwd=str(tmp_path), pythonpath=str(pkg.parent))
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{pkg}" in r.stdout or "cpu variant" in r.stdout
    line = [s for s in r.stdout.splitlines() if s.startswith("gpu backend vulkan:")]
    assert line and "skipped" in line[0] and "libpyggml-test-missing.so" in line[0], r.stdout
    assert "BACKENDS ['cpu']" in r.stdout


@needs_dispatch
def test_a_gpu_module_can_be_skipped_by_name(tmp_path):
    pkg = _copy_package(tmp_path)
    (pkg / "core" / "libggml-vulkan.so").write_bytes(b"not a shared library")
    _set_gpu_modules(pkg, ["vulkan"])
    code = "import pyggml; print(pyggml.core.load_info()['gpu'])"
    r = _run(code, cwd=str(tmp_path), pythonpath=str(pkg.parent))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "'vulkan': 'skipped: " + str(pkg) in r.stdout   # the dynamic linker names the file
    r = _run(code, {"PYGGML_SKIP_BACKENDS": "vulkan"}, cwd=str(tmp_path), pythonpath=str(pkg.parent))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "named in PYGGML_SKIP_BACKENDS" in r.stdout


@needs_dispatch
def test_the_extension_links_no_cpu_backend():
    """In a dispatch build ggml-cpu is only in the variant modules: the extension
    and ggml's shared libraries do not carry it (else the variant chosen would
    not be the code that runs)."""
    core = os.path.dirname(pyggml.core._core.__file__)
    names = sorted(os.listdir(core))
    assert [n for n in names if n.startswith("libggml-cpu-")] == \
        sorted(f"libggml-cpu-{v}.so" for v in _config.cpu_variants)
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("needs nm")
    for n in names:
        if n.endswith(".so") and not n.startswith("libggml-"):
            r = subprocess.run([nm, "-D", "--defined-only", os.path.join(core, n)], capture_output=True, text=True)
            assert "ggml_graph_compute" not in r.stdout, n
            assert "ggml_backend_cpu_reg" not in r.stdout, n
