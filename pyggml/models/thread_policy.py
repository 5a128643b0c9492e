"""How many CPU threads an executor's graph runs on: measured, not guessed.

ggml's threads meet at a barrier after every operation.  On an idle machine
more threads are faster for all but tiny graphs; on a busy one (another
process on the cores) a thread that waits for one the kernel has taken off
the CPU can wait a whole time slice, and a step of many small operations
(a transformer, an unrolled LSTM) at 2 threads was measured 3-25x slower
than at 1.  No static rule gets both cases, so each executor times its own
runs: it tries the candidate counts in turn, keeps the fastest, and tries
again now and then (sooner when the answer changed, later while it holds).
Results do not depend on the count (ggml splits the outputs of an operation
among threads, never a sum), so the choice changes speed only.

Timing alone misjudges a machine where another process holds a core: runs on
all threads are sometimes fast (while the other process waits) and sometimes
a time slice slow, and the trials themselves cost.  So before each trial the
chooser also looks at the load (Linux: the runnable threads of other
processes, from /proc) and leaves out the counts that would not find a free
CPU each; with one count left it takes it without a trial.
"""

import os
import time

from pyggml.core import get_n_threads, n_threads_adaptive, n_threads_is_set
from pyggml.core._core import _default_threads

# below this much work (batch x parameters) one thread always wins: the
# threads' wake-up and barriers cost more than the arithmetic they share
SMALL_WORK = 200_000

_WARMUP = 2          # first runs (allocation, caches) are not measured
_ROUNDS = 2          # a trial's rounds over the candidates, interleaved: a change of load reaches each
_SAMPLES = 2         # timed runs per candidate and round, after one untimed run: the first run on
                     # another count pays for switching thread pools (waking or parking threads),
                     # which took 5-25x a small step's time and hid which count is faster
_FIRST_GAP = 32      # runs before the next trial, doubled while the choice holds
_MAX_GAP = 4096
_MAX_GAP_S = 10.0    # ... but never longer than this many seconds apart
_SWITCH = 0.95       # a candidate replaces the choice when its median is 5% lower


def candidates(ceiling):
    """The thread counts worth trying up to ceiling: 1, half, all."""
    return sorted({1, max(1, ceiling // 2), ceiling})


def cpus():
    """The CPUs this process may run on (the core's default thread count)."""
    return _default_threads()


def others_running():
    """Threads of other processes runnable now (Linux), 0 where that is unknown: the
    system's runnable count (/proc/loadavg) less this process's runnable threads."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
        if running <= 1:
            return 0                      # this thread alone (the common case, one read)
        ours = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                    st = f.read()
            except OSError:
                continue                  # the thread ended meanwhile
            end = st.rindex(b")")
            ours += st[end + 2:end + 3] == b"R"
        return max(0, running - ours)
    except (OSError, ValueError, IndexError):
        return 0


def fitting(cands):
    """The candidates that find a free CPU for each of their threads now (1 always)."""
    free = cpus() - others_running()
    return [c for c in cands if c == 1 or c <= free]


class ThreadChooser:
    """The thread count for the next run of one executor, from its past runs."""

    __slots__ = ("work", "ceiling", "cands", "choice", "runs", "trial", "times", "gap", "next_trial",
                 "last_trial_t", "_t0", "_n")

    def __init__(self, work):
        self.work = work
        self.ceiling = 0
        self.runs = 0
        self._t0 = 0.0
        self._n = 1
        self._reset(get_n_threads())

    def _reset(self, ceiling):
        self.ceiling = ceiling
        self.cands = candidates(ceiling)
        self.choice = ceiling
        self.trial = None            # the order of runs of the trial under way
        self.times = {}
        self.gap = _FIRST_GAP
        self.next_trial = self.runs + _WARMUP
        self.last_trial_t = time.perf_counter()

    def pick(self):
        """The thread count for this run (call done() after it)."""
        if self.work < SMALL_WORK and (not n_threads_is_set() or n_threads_adaptive()):
            # a ceiling the user set (set_n_threads(n), adaptive) is a ceiling: a tiny graph
            # still runs on one (trials at more cost more than the graph: a 1-row predict
            # took 5 us on one thread, 9 on two)
            self._n = 1
            self._t0 = 0.0
            return 1
        if not n_threads_adaptive():
            self._n = get_n_threads()
            self._t0 = 0.0
            return self._n
        ceiling = get_n_threads()
        if ceiling != self.ceiling:
            self._reset(ceiling)
        self.runs += 1
        if len(self.cands) == 1:
            self._n = self.choice
            self._t0 = 0.0
            return self._n
        if self.trial is None and (self.runs >= self.next_trial or
                                   time.perf_counter() - self.last_trial_t > _MAX_GAP_S):
            cands = fitting(self.cands)
            if len(cands) == 1:
                self._settle(cands[0])           # another process holds the other CPUs: no trial
            else:
                order = []
                for _ in range(_ROUNDS):
                    for c in cands:
                        order += [(c, False)] + [(c, True)] * _SAMPLES
                self.trial = order[::-1]             # taken from the end
                self.times = {c: [] for c in cands}
        if self.trial:
            self._n, timed = self.trial.pop()
            self._t0 = time.perf_counter() if timed else -1.0
        else:
            self._n = self.choice
            self._t0 = 0.0
        return self._n

    def done(self):
        """Record the run that pick() began."""
        if self._t0 == 0.0:
            return
        if self._t0 > 0.0:
            self.times[self._n].append(time.perf_counter() - self._t0)
        self._t0 = 0.0
        if not self.trial:
            self._conclude()

    def abandon(self):
        """The run that pick() began failed: forget its timing."""
        self._t0 = 0.0
        if self.trial is not None and not self.trial:
            self._conclude()

    def _conclude(self):
        med = {c: sorted(ts)[len(ts) // 2] for c, ts in self.times.items() if ts}
        best = min(med, key=med.get) if med else self.choice
        if self.choice in med and med[best] >= _SWITCH * med[self.choice]:
            best = self.choice                   # a noise-level difference: keep the count
        self._settle(best)

    def _settle(self, count):
        """Run on count until the next trial: soon after a change, later while it holds."""
        if count != self.choice:
            self.choice = count
            self.gap = _FIRST_GAP
        else:
            self.gap = min(self.gap * 2, _MAX_GAP)
        self.trial = None
        self.next_trial = self.runs + self.gap
        self.last_trial_t = time.perf_counter()
