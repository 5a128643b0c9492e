/* ggml-cpu's functions that pyggml calls, reached through the CPU backend's
 * registry entry (ggml_backend_reg_get_proc_address), and the loading of
 * ggml's backend modules.
 *
 * In a dispatch build (PYGGML_BACKEND_DL=1, what wheels ship) the CPU backend
 * is one of several modules, one per instruction-set level, loaded at import
 * (loader.pxi): nothing of ggml-cpu is linked into the extension, so its
 * functions are looked up in the loaded module.  Static builds take the same
 * path (the CPU backend registers itself and answers the same lookups), so
 * the core has one code path. */
#ifndef PYGGML_CPU_API_H
#define PYGGML_CPU_API_H

#include <stdio.h>
#include <string.h>
#include "ggml.h"
#include "ggml-backend.h"

#ifndef PYGGML_BACKEND_DL
#define PYGGML_BACKEND_DL 0
#endif

#if defined(_WIN32)
/* dispatch builds are Linux/macOS only (meson refuses them elsewhere) */
static int pyggml_module_score(const char * path, char * err, size_t n) {
    (void) path; snprintf(err, n, "modules are not supported on Windows"); return -1;
}
static int pyggml_module_check(const char * path, char * err, size_t n) {
    (void) path; snprintf(err, n, "modules are not supported on Windows"); return -1;
}
#else
#include <dlfcn.h>

/* ggml's score of a CPU variant module for this CPU (0: it cannot run here;
 * ggml's check is compiled without the variant's instruction flags), or -1
 * with the reason in err when the module does not load. */
static int pyggml_module_score(const char * path, char * err, size_t n) {
    void * h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char * e = dlerror();
        snprintf(err, n, "%s", e ? e : "dlopen failed");
        return -1;
    }
    int (*score)(void) = (int (*)(void)) dlsym(h, "ggml_backend_score");
    int s = score ? score() : -2;
    if (s == -2) snprintf(err, n, "no ggml_backend_score in %s", path);
    dlclose(h);
    return s;
}

/* 0 when the module and every library it needs load, else -1 with the
 * dynamic linker's reason (e.g. the Vulkan loader or the CUDA driver is
 * missing).  The module stays loaded: ggml's loader opens it again. */
static int pyggml_module_check(const char * path, char * err, size_t n) {
    void * h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char * e = dlerror();
        snprintf(err, n, "%s", e ? e : "dlopen failed");
        return -1;
    }
    return 0;
}
#endif

/* --- ggml-cpu's functions, through the CPU backend's registry entry --- */

typedef struct ggml_threadpool * (*pyggml_tp_new_t)(struct ggml_threadpool_params * params);
typedef void (*pyggml_tp_free_t)(struct ggml_threadpool * tp);
typedef void (*pyggml_set_tp_t)(ggml_backend_t backend, struct ggml_threadpool * tp);
typedef void (*pyggml_set_n_threads_t)(ggml_backend_t backend, int n_threads);
typedef void (*pyggml_set_abort_t)(ggml_backend_t backend, ggml_abort_callback cb, void * data);
typedef void (*pyggml_forget_tp_t)(ggml_backend_t backend);

static struct {
    ggml_backend_reg_t reg;
    pyggml_tp_new_t tp_new;
    pyggml_tp_free_t tp_free;
    pyggml_set_tp_t set_tp;
    pyggml_set_n_threads_t set_n_threads;
    pyggml_set_abort_t set_abort;
    pyggml_forget_tp_t forget_tp;
} pyggml_cpu_api;

/* Look the functions up once the CPU backend is registered: NULL on success,
 * else the name of what is missing. */
static const char * pyggml_cpu_api_bind(void) {
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
    if (reg == NULL) return "the CPU backend (not registered)";
#define PYGGML_BIND(field, type, name) \
    pyggml_cpu_api.field = (type) ggml_backend_reg_get_proc_address(reg, name); \
    if (pyggml_cpu_api.field == NULL) return name;
    PYGGML_BIND(tp_new, pyggml_tp_new_t, "ggml_threadpool_new")
    PYGGML_BIND(tp_free, pyggml_tp_free_t, "ggml_threadpool_free")
    PYGGML_BIND(set_tp, pyggml_set_tp_t, "ggml_backend_cpu_set_threadpool")
    PYGGML_BIND(set_n_threads, pyggml_set_n_threads_t, "ggml_backend_set_n_threads")
    PYGGML_BIND(set_abort, pyggml_set_abort_t, "ggml_backend_set_abort_callback")
    PYGGML_BIND(forget_tp, pyggml_forget_tp_t, "ggml_backend_cpu_forget_threadpool")   /* patch 0014 */
#undef PYGGML_BIND
    pyggml_cpu_api.reg = reg;
    return NULL;
}

static struct ggml_threadpool * pyggml_threadpool_new(struct ggml_threadpool_params * params) {
    return pyggml_cpu_api.tp_new(params);
}

static void pyggml_threadpool_free(struct ggml_threadpool * tp) {
    pyggml_cpu_api.tp_free(tp);
}

static bool pyggml_backend_is_cpu(ggml_backend_t backend) {
    ggml_backend_dev_t dev;
    if (backend == NULL || pyggml_cpu_api.reg == NULL) return false;
    dev = ggml_backend_get_device(backend);
    return dev != NULL && ggml_backend_dev_backend_reg(dev) == pyggml_cpu_api.reg;
}

static void pyggml_cpu_set_n_threads(ggml_backend_t backend, int n_threads) {
    pyggml_cpu_api.set_n_threads(backend, n_threads);
}

static void pyggml_cpu_set_threadpool(ggml_backend_t backend, struct ggml_threadpool * tp) {
    pyggml_cpu_api.set_tp(backend, tp);
}

static void pyggml_cpu_forget_threadpool(ggml_backend_t backend) {
    pyggml_cpu_api.forget_tp(backend);
}

static void pyggml_cpu_set_abort_callback(ggml_backend_t backend, ggml_abort_callback cb, void * data) {
    pyggml_cpu_api.set_abort(backend, cb, data);
}

#endif
