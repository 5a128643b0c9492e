"""ggml's compute threads under memory pressure: a worker thread must not need the
heap for itself.

A thread's first use of a thread-local variable of a library loaded with dlopen
(pyggml's extension, and the libstdc++ it brings) makes glibc allocate that
library's thread-local block with malloc; when malloc fails there glibc aborts
the process ("cannot allocate memory for thread-local data"), with no way to
catch it.  ggml's tiled product wrote libstdc++'s thread-local slot of
std::call_once in every product in every worker thread, so a fresh worker under
a memory limit could kill the interpreter (ggml/patches/0038).

The fault is injected with an LD_PRELOAD shim whose malloc family fails in every
thread but the main one while a flag is set: the main thread (pyggml's own
work) allocates as usual, the compute threads cannot allocate at all."""

import os
import shutil
import subprocess
import sys

import pytest

from _subproc import run_py

SHIM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static volatile int fail_others = 0;
void failmalloc_set(int on) { fail_others = on; }
static int failing(void) { return fail_others && syscall(SYS_gettid) != getpid(); }
void *malloc(size_t n) { return failing() ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return failing() ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return failing() ? NULL : __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { return failing() ? NULL : __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return failing() ? NULL : __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    if (failing()) return ENOMEM;
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    if not sys.platform.startswith("linux"):
        pytest.skip("the malloc shim is for glibc's Linux")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the malloc shim")
    d = tmp_path_factory.mktemp("shim")
    (d / "failmalloc.c").write_text(SHIM)
    out = d / "failmalloc.so"
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(out), str(d / "failmalloc.c")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the malloc shim does not build here: {r.stderr[-500:]}")
    return out


def test_compute_threads_that_cannot_allocate_still_train_and_predict(shim):
    """Dense fit, Trainer.step, evaluate and predict, a Conv2D and an LSTM model, all on
    two threads whose workers start (fresh per model) while only the main thread can
    allocate: each completes with the numbers it gives without the fault."""
    env = dict(os.environ, LD_PRELOAD=str(shim))
    r = run_py(f"""
        import ctypes
        shim = ctypes.CDLL({str(shim)!r})
        pg.set_n_threads(2)
        rng = np.random.default_rng(0)
        x = rng.random((256, 256)).astype(np.float32)
        y = rng.random((256, 4)).astype(np.float32)
        xi = rng.random((64, 16, 16, 3)).astype(np.float32)
        yi = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 64)]
        xs = rng.random((32, 20, 8)).astype(np.float32)

        def run_all():
            out = []
            pg.set_seed(1)
            m = pg.Sequential([pg.layers.Dense(512, activation="relu"), pg.layers.Dense(512),
                               pg.layers.Dense(4)], input_shape=256)
            m.compile(loss="mse", optimizer="adam")
            m.fit(x, y, epochs=2, batch_size=128, verbose=0, shuffle=False)
            tr = pg.Trainer(m, batch_size=256)
            tr.step(x, y)
            tr.free()
            out += [m.evaluate(x, y, verbose=0), m.predict(x)]
            m.free()
            c = pg.Sequential([pg.layers.Conv2D(16, 3, activation="relu"), pg.layers.MaxPooling2D(2),
                               pg.layers.Flatten(), pg.layers.Dense(4, activation="softmax")],
                              input_shape=(16, 16, 3))
            c.compile(loss="categorical_crossentropy", optimizer="adam")
            c.fit(xi, yi, epochs=1, batch_size=32, verbose=0, shuffle=False)
            out.append(c.predict(xi))
            c.free()
            r = pg.Sequential([pg.layers.LSTM(32), pg.layers.Dense(4)], input_shape=(20, 8))
            r.compile(loss="mse")
            r.fit(xs, y[:32], epochs=1, batch_size=16, verbose=0, shuffle=False)
            out.append(r.predict(xs))
            r.free()
            return out

        shim.failmalloc_set(1)
        faulted = run_all()
        shim.failmalloc_set(0)
        clean = run_all()
        for a, b in zip(faulted, clean):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        print("DONE")
    """, env=env, timeout=300)
    assert "DONE" in r.stdout, r.stdout + r.stderr
