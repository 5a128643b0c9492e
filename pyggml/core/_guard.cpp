// pyggml's guarded entry points into ggml's C++ code: see _guard.h.

#include "_guard.h"

#include <cstdio>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <new>

namespace {

thread_local char g_error[256] = "";
thread_local int g_oom = 0;

void remember(const char * what, int oom) {
    std::snprintf(g_error, sizeof(g_error), "%s", what ? what : "unknown C++ exception");
    g_oom = oom;
}

// Run f; on an exception remember it and return fail.  The thread-local data a failure needs is
// touched first: our error slots, and libstdc++'s exception globals (which every throw reads).
// A thread_local of a dlopen'd library gets its memory on a thread's first use of it, and that
// must not be the moment after an allocation failed (under a memory limit glibc then aborts
// with "cannot allocate memory for thread-local data").
template <typename R, typename F>
R guarded(R fail, F && f) {
    *static_cast<volatile int *>(&g_oom);
    (void) abi::__cxa_get_globals();
    try {
        return f();
    } catch (const std::bad_alloc & e) {
        remember(e.what(), 1);
    } catch (const std::exception & e) {
        remember(e.what(), 0);
    } catch (...) {
        remember("unknown C++ exception", 0);
    }
    return fail;
}

}  // namespace

extern "C" {

const char * pyggml_guard_error(void) { return g_error; }
int pyggml_guard_was_oom(void) { return g_oom; }
void pyggml_guard_clear(void) {
    g_error[0] = '\0';
    g_oom = 0;
    (void) abi::__cxa_get_globals();   // see guarded()
}

ggml_backend_t pyggml_dev_init(ggml_backend_dev_t dev) {
    return guarded<ggml_backend_t>(nullptr, [&] { return ggml_backend_dev_init(dev, nullptr); });
}

ggml_backend_sched_t pyggml_sched_new(ggml_backend_t * backends, int n_backends, size_t graph_size, bool parallel) {
    return guarded<ggml_backend_sched_t>(nullptr, [&] {
        return ggml_backend_sched_new(backends, nullptr, n_backends, graph_size, parallel, false);
    });
}

bool pyggml_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    const bool ok = guarded<bool>(false, [&] { return ggml_backend_sched_alloc_graph(sched, graph); });
    if (!ok) {
        // a half-done split or allocation must not be computed
        guarded<int>(0, [&] { ggml_backend_sched_reset(sched); return 0; });
    }
    return ok;
}

enum ggml_status pyggml_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    return guarded<enum ggml_status>(GGML_STATUS_ALLOC_FAILED, [&] {
        return ggml_backend_sched_graph_compute(sched, graph);
    });
}

void pyggml_sched_reset(ggml_backend_sched_t sched) {
    guarded<int>(0, [&] { ggml_backend_sched_reset(sched); return 0; });
}

ggml_backend_buffer_t pyggml_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend) {
    return guarded<ggml_backend_buffer_t>(nullptr, [&] { return ggml_backend_alloc_ctx_tensors(ctx, backend); });
}

ggml_opt_context_t pyggml_opt_init(struct ggml_opt_params params) {
    return guarded<ggml_opt_context_t>(nullptr, [&] { return ggml_opt_init(params); });
}

enum ggml_status pyggml_opt_alloc(ggml_opt_context_t opt_ctx, bool backward) {
    const enum ggml_status st = guarded<enum ggml_status>(GGML_STATUS_ALLOC_FAILED, [&] {
        return ggml_opt_alloc_status(opt_ctx, backward);
    });
    if (st != GGML_STATUS_SUCCESS) {
        ggml_opt_forget_allocation(opt_ctx);
    }
    return st;
}

enum ggml_status pyggml_opt_eval(ggml_opt_context_t opt_ctx) {
    const enum ggml_status st = guarded<enum ggml_status>(GGML_STATUS_ALLOC_FAILED, [&] {
        return ggml_opt_eval_status(opt_ctx, nullptr);
    });
    if (st != GGML_STATUS_SUCCESS) {
        ggml_opt_forget_allocation(opt_ctx);
    }
    return st;
}

struct gguf_context * pyggml_gguf_init_empty(void) {
    return guarded<struct gguf_context *>(nullptr, [&] { return gguf_init_empty(); });
}

struct gguf_context * pyggml_gguf_init_from_file(const char * fname, struct gguf_init_params params) {
    return guarded<struct gguf_context *>(nullptr, [&] { return gguf_init_from_file(fname, params); });
}

#define PYGGML_GUARD_SET(name, T)                                                  \
    int pyggml_gguf_set_##name(struct gguf_context * ctx, const char * key, T val) { \
        return guarded<int>(-1, [&] { gguf_set_##name(ctx, key, val); return 0; });  \
    }
PYGGML_GUARD_SET(val_u32, uint32_t)
PYGGML_GUARD_SET(val_i32, int32_t)
PYGGML_GUARD_SET(val_i64, int64_t)
PYGGML_GUARD_SET(val_f32, float)
PYGGML_GUARD_SET(val_f64, double)
PYGGML_GUARD_SET(val_bool, bool)
PYGGML_GUARD_SET(val_str, const char *)
#undef PYGGML_GUARD_SET

int pyggml_gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n) {
    return guarded<int>(-1, [&] { gguf_set_arr_data(ctx, key, type, data, n); return 0; });
}

int pyggml_gguf_set_arr_str(struct gguf_context * ctx, const char * key, const char ** data, size_t n) {
    return guarded<int>(-1, [&] { gguf_set_arr_str(ctx, key, data, n); return 0; });
}

int pyggml_gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src) {
    return guarded<int>(-1, [&] { gguf_set_kv(ctx, src); return 0; });
}

int pyggml_gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor) {
    return guarded<int>(-1, [&] { gguf_add_tensor(ctx, tensor); return 0; });
}

size_t pyggml_gguf_get_meta_size(const struct gguf_context * ctx) {
    return guarded<size_t>(0, [&] { return gguf_get_meta_size(ctx); });
}

int pyggml_gguf_get_meta_data(const struct gguf_context * ctx, void * data) {
    return guarded<int>(-1, [&] { gguf_get_meta_data(ctx, data); return 0; });
}

}  // extern "C"
