/* Small C helpers for pyggml's core that Cython cannot express directly. */
#ifndef PYGGML_HELPERS_H
#define PYGGML_HELPERS_H

#include <signal.h>
#include <string.h>
#include "ggml-opt.h"

/* --- optimizer hyper-parameters, read by ggml-opt before each optimizer step --- */
typedef struct {
    float alpha, beta1, beta2, eps, wd;
} pyggml_opt_hparams;

static struct ggml_opt_optimizer_params pyggml_get_opt_pars(void * userdata) {
    const pyggml_opt_hparams * h = (const pyggml_opt_hparams *) userdata;
    struct ggml_opt_optimizer_params p;
    memset(&p, 0, sizeof(p));
    p.adamw.alpha = h->alpha;
    p.adamw.beta1 = h->beta1;
    p.adamw.beta2 = h->beta2;
    p.adamw.eps   = h->eps;
    p.adamw.wd    = h->wd;
    p.sgd.alpha   = h->alpha;
    p.sgd.wd      = h->wd;
    return p;
}

/* --- Ctrl-C during a compute ---
 * Python's own SIGINT handler only sets a flag that the interpreter reads when
 * it holds the GIL. Computes run without it, so a handler of ours sets a flag
 * that ggml's abort callback reads, and then chains to the previous handler so
 * that Python raises KeyboardInterrupt afterwards as usual. */
static volatile sig_atomic_t pyggml_sigint_pending = 0;
static struct sigaction pyggml_prev_sigint;
static int pyggml_sigint_installed = 0;

static void pyggml_on_sigint(int sig) {
    pyggml_sigint_pending = 1;
    if (pyggml_prev_sigint.sa_flags & SA_SIGINFO) {
        /* cannot forward siginfo faithfully without it; fall back to the plain form */
        if (pyggml_prev_sigint.sa_handler != SIG_IGN && pyggml_prev_sigint.sa_handler != SIG_DFL)
            pyggml_prev_sigint.sa_handler(sig);
    } else if (pyggml_prev_sigint.sa_handler != SIG_IGN && pyggml_prev_sigint.sa_handler != SIG_DFL) {
        pyggml_prev_sigint.sa_handler(sig);
    }
}

/* Make sure our handler is in front of whatever is installed now. Cheap: one
 * sigaction call when nothing changed. Called with the GIL held, main thread. */
static void pyggml_sigint_arm(void) {
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0) return;
    if (cur.sa_handler == pyggml_on_sigint) return;
    if (cur.sa_handler == SIG_IGN || cur.sa_handler == SIG_DFL) return; /* not Python's: leave it */
    struct sigaction ours;
    memset(&ours, 0, sizeof(ours));
    ours.sa_handler = pyggml_on_sigint;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = 0;
    pyggml_prev_sigint = cur;
    if (sigaction(SIGINT, &ours, NULL) == 0) pyggml_sigint_installed = 1;
}

static bool pyggml_abort_cb(void * data) {
    (void) data;
    return pyggml_sigint_pending != 0;
}

static void pyggml_sigint_clear(void) { pyggml_sigint_pending = 0; }

/* --- writing files ---
 * A write past RLIMIT_FSIZE raises SIGXFSZ, whose default action ends the
 * process (with a core).  CPython ignores it at startup, so the write fails
 * with EFBIG instead; an embedding application may not.  Called before pyggml
 * writes a file: a default disposition becomes "ignore" (what CPython does),
 * a handler someone installed is left alone. */
static void pyggml_ignore_sigxfsz(void) {
#ifdef SIGXFSZ
    struct sigaction cur;
    if (sigaction(SIGXFSZ, NULL, &cur) != 0) return;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL) {
        struct sigaction ign;
        memset(&ign, 0, sizeof(ign));
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        sigaction(SIGXFSZ, &ign, NULL);
    }
#endif
}
static int pyggml_sigint_get(void) { return pyggml_sigint_pending; }

#endif
