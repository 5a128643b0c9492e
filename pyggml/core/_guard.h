/* pyggml's guarded entry points into ggml's C++ code (_guard.cpp).
 *
 * ggml's C++ files (the scheduler, ggml-opt, gguf, the CPU backend) allocate
 * with new and std containers, which throw std::bad_alloc when memory runs
 * out.  An exception that reaches pyggml's C code has no handler and ends the
 * process in std::terminate.  Every such function pyggml calls goes through
 * one of these wrappers instead: they catch any exception, remember its text
 * (pyggml_guard_error, per thread) and report the failure the way the wrapped
 * function reports its own (NULL, false, a ggml_status).
 */
#ifndef PYGGML_GUARD_H
#define PYGGML_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-opt.h"
#include "gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* what the last caught exception said ("" when none), and whether it was bad_alloc */
const char * pyggml_guard_error(void);
int pyggml_guard_was_oom(void);
void pyggml_guard_clear(void);

/* backends and the scheduler */
ggml_backend_t pyggml_dev_init(ggml_backend_dev_t dev);
ggml_backend_sched_t pyggml_sched_new(ggml_backend_t * backends, int n_backends, size_t graph_size, bool parallel);
bool pyggml_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
enum ggml_status pyggml_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
void pyggml_sched_reset(ggml_backend_sched_t sched);
ggml_backend_buffer_t pyggml_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend);

/* The CPU buffers that are made and freed step after step (a GradientTape's) take their memory
 * from a pool: memory fresh from the system costs a page fault and a page of zeros per 4 KiB
 * (a fifth of a large tape's step).  pyggml_pool_alloc_ctx_tensors is pyggml_alloc_ctx_tensors
 * for such a buffer: on the CPU, for 1 MiB or more, the tensors are placed in a block of the
 * pool (*block, *block_size; NULL where the buffer owns its memory as usual); the block goes
 * back with pyggml_pool_give once the buffer is freed.  The pool keeps at most what was lent
 * out at once since its last release; pyggml_pool_release gives it all back to the system. */
ggml_backend_buffer_t pyggml_pool_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend, void ** block,
                                                    size_t * block_size);
void pyggml_pool_give(void * block, size_t block_size);
void pyggml_pool_release(void);

/* (tests) hold ggml's critical section (which every ggml_init takes) for that many seconds */
void pyggml_hold_ggml_critical_section(double seconds);
/* bytes kept for reuse, lent out now, and the most lent out at once since the last release */
void pyggml_pool_stats(size_t * held, size_t * in_use, size_t * peak);

/* ggml-opt */
ggml_opt_context_t pyggml_opt_init(struct ggml_opt_params params);
enum ggml_status pyggml_opt_alloc(ggml_opt_context_t opt_ctx, bool backward);
enum ggml_status pyggml_opt_eval(ggml_opt_context_t opt_ctx);

/* gguf: 0 on success, -1 when an exception was caught */
struct gguf_context * pyggml_gguf_init_empty(void);
struct gguf_context * pyggml_gguf_init_from_file(const char * fname, struct gguf_init_params params);
int pyggml_gguf_set_val_u32(struct gguf_context * ctx, const char * key, uint32_t val);
int pyggml_gguf_set_val_i32(struct gguf_context * ctx, const char * key, int32_t val);
int pyggml_gguf_set_val_i64(struct gguf_context * ctx, const char * key, int64_t val);
int pyggml_gguf_set_val_f32(struct gguf_context * ctx, const char * key, float val);
int pyggml_gguf_set_val_f64(struct gguf_context * ctx, const char * key, double val);
int pyggml_gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool val);
int pyggml_gguf_set_val_str(struct gguf_context * ctx, const char * key, const char * val);
int pyggml_gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n);
int pyggml_gguf_set_arr_str(struct gguf_context * ctx, const char * key, const char ** data, size_t n);
int pyggml_gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src);
int pyggml_gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor);
/* the file's metadata (header, key/values, tensor infos, padding): size 0 on failure */
size_t pyggml_gguf_get_meta_size(const struct gguf_context * ctx);
int pyggml_gguf_get_meta_data(const struct gguf_context * ctx, void * data);

#ifdef __cplusplus
}
#endif

#endif
