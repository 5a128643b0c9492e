// pyggml's guarded entry points into ggml's C++ code: see _guard.h.

#include "_guard.h"

#include "ggml-alloc.h"

extern "C" {
// ggml-threading.h (a header of ggml's sources, not of its installed API)
void ggml_critical_section_start(void);
void ggml_critical_section_end(void);
}

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <mutex>
#include <new>
#include <vector>

#include <pthread.h>
#include <unistd.h>

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

}  // extern "C"

namespace {

const size_t POOL_MIN = 1 << 20;        // smaller buffers: malloc's own reuse serves them
const size_t POOL_ALIGN = 4096;
// (a block is lent for a request of at least half its size: a large block is not tied up by a
// small buffer)

struct pool_block {
    void * p;
    size_t size;
};

std::mutex g_pool_mu;

// a fork while another thread holds the pool's lock would leave the child's copy locked for
// good: the lock is taken around fork() and the child gets a fresh one
void pool_fork_prepare() { g_pool_mu.lock(); }
void pool_fork_parent() { g_pool_mu.unlock(); }
void pool_fork_child() { new (&g_pool_mu) std::mutex(); }
[[maybe_unused]] const int g_pool_atfork = pthread_atfork(pool_fork_prepare, pool_fork_parent, pool_fork_child);

// ggml's critical section (ggml-threading.cpp: a std::mutex that every ggml_init takes) held by
// another thread at fork would block the child's first ggml_init for good (a child that builds a
// graph then hangs).  It is taken around fork() too, and let go on both sides (in the child by
// the copy of the thread that took it).
void ggml_fork_prepare() { ggml_critical_section_start(); }
void ggml_fork_release() { ggml_critical_section_end(); }
[[maybe_unused]] const int g_ggml_atfork = pthread_atfork(ggml_fork_prepare, ggml_fork_release, ggml_fork_release);
std::vector<pool_block> g_pool_free;    // kept for the next buffers
size_t g_pool_held = 0;                 // bytes of g_pool_free
size_t g_pool_in_use = 0;               // bytes lent out now
size_t g_pool_peak = 0;                 // most lent out at once since the last release

// a kept block of at least size bytes (the smallest that fits, at most twice the size), or a
// new one; NULL when the system has no memory left even after the pool gave its blocks back
void * pool_take(size_t size, size_t * got) {
    {
        std::lock_guard<std::mutex> lock(g_pool_mu);
        size_t best = g_pool_free.size();
        for (size_t i = 0; i < g_pool_free.size(); ++i) {
            const size_t s = g_pool_free[i].size;
            if (s >= size && s / 2 <= size && (best == g_pool_free.size() || s < g_pool_free[best].size)) {
                best = i;
            }
        }
        if (best < g_pool_free.size()) {
            const pool_block b = g_pool_free[best];
            g_pool_free.erase(g_pool_free.begin() + (std::ptrdiff_t) best);
            g_pool_held -= b.size;
            g_pool_in_use += b.size;
            g_pool_peak = g_pool_in_use > g_pool_peak ? g_pool_in_use : g_pool_peak;
            *got = b.size;
            return b.p;
        }
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
        void * p = nullptr;
        if (posix_memalign(&p, POOL_ALIGN, size) == 0) {
            std::lock_guard<std::mutex> lock(g_pool_mu);
            g_pool_in_use += size;
            g_pool_peak = g_pool_in_use > g_pool_peak ? g_pool_in_use : g_pool_peak;
            *got = size;
            return p;
        }
        pyggml_pool_release();          // what the pool keeps may be what the system lacks
    }
    return nullptr;
}

}  // namespace

extern "C" {

void pyggml_pool_give(void * block, size_t block_size) {
    if (block == nullptr) {
        return;
    }
    std::lock_guard<std::mutex> lock(g_pool_mu);
    g_pool_in_use -= block_size;
    // keep it while the pool stays within what was lent out at once (a tape's step lends the
    // same again); else give it back
    if (g_pool_held + block_size <= g_pool_peak) {
        try {
            g_pool_free.push_back({block, block_size});
            g_pool_held += block_size;
            return;
        } catch (...) {
        }
    }
    free(block);
}

void pyggml_pool_release(void) {
    std::vector<pool_block> blocks;
    {
        std::lock_guard<std::mutex> lock(g_pool_mu);
        blocks.swap(g_pool_free);
        g_pool_held = 0;
        g_pool_peak = g_pool_in_use;
    }
    for (const pool_block & b : blocks) {
        free(b.p);
    }
}

void pyggml_pool_stats(size_t * held, size_t * in_use, size_t * peak) {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    *held = g_pool_held;
    *in_use = g_pool_in_use;
    *peak = g_pool_peak;
}

ggml_backend_buffer_t pyggml_pool_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend, void ** block,
                                                    size_t * block_size) {
    *block = nullptr;
    *block_size = 0;
    if (ggml_backend_get_default_buffer_type(backend) != ggml_backend_cpu_buffer_type()) {
        return pyggml_alloc_ctx_tensors(ctx, backend);
    }
    // the tensors' bytes as the block's buffer places them (each padded to its alignment,
    // 32 bytes: 64 here, to be sure)
    size_t size = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) {
            size += GGML_PAD(ggml_nbytes(t), 64);
        }
    }
    if (size < POOL_MIN) {
        return pyggml_alloc_ctx_tensors(ctx, backend);
    }
    size = GGML_PAD(size, POOL_ALIGN);
    size_t got = 0;
    void * p = pool_take(size, &got);
    if (p == nullptr) {
        return pyggml_alloc_ctx_tensors(ctx, backend);      // reports the failure its way
    }
    ggml_backend_buffer_t buf = guarded<ggml_backend_buffer_t>(nullptr, [&] {
        return ggml_backend_cpu_buffer_from_ptr(p, got);
    });
    if (buf == nullptr) {
        pyggml_pool_give(p, got);
        return nullptr;
    }
    ggml_tallocr talloc = ggml_tallocr_new(buf);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        enum ggml_status st = GGML_STATUS_SUCCESS;
        if (t->data == nullptr) {
            if (t->view_src == nullptr) {
                st = ggml_tallocr_alloc(&talloc, t);
            } else if (t->buffer == nullptr) {
                st = ggml_backend_view_init(t);
            }
        } else if (t->view_src != nullptr && t->buffer == nullptr) {
            st = ggml_backend_view_init(t);
        }
        if (st != GGML_STATUS_SUCCESS) {
            // (not reached: the block holds every tensor, and views follow their sources)
            for (ggml_tensor * u = ggml_get_first_tensor(ctx); u != nullptr; u = ggml_get_next_tensor(ctx, u)) {
                if (u->buffer == buf) {
                    u->data = nullptr;
                    u->buffer = nullptr;
                }
            }
            ggml_backend_buffer_free(buf);
            pyggml_pool_give(p, got);
            return nullptr;
        }
    }
    *block = p;
    *block_size = got;
    return buf;
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

extern "C" void pyggml_hold_ggml_critical_section(double seconds) {
    // (tests) hold ggml's critical section for that long, as a thread inside ggml_init holds it
    ggml_critical_section_start();
    const int64_t end = ggml_time_us() + (int64_t) (seconds * 1e6);
    while (ggml_time_us() < end) {
        usleep(1000);
    }
    ggml_critical_section_end();
}
