"""Keras's ``Progbar``: a text progress bar with running averages of named values.

``verbose=1`` redraws one line (``\\r``) on a terminal, and writes a line per
update elsewhere (a log file, a pipe), no more often than ``interval`` seconds;
``verbose=2`` writes one line when the bar finishes; ``verbose=0`` nothing.
Values given to ``update`` are averaged over the steps they cover, except the
``stateful_metrics``, shown as given.  Output follows
``pg.config.is_interactive_logging_enabled()``: stdout, or the "pyggml" logger.
"""

import sys
import time

import numpy as np

from pyggml import config

__all__ = ["Progbar"]


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"Progbar: {name} must be a number, got {value!r}")
    return value


def _format_value(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        try:
            v = float(np.mean(np.asarray(v, dtype=np.float64)))    # an array: its mean, as Keras shows it
        except (TypeError, ValueError):
            return f" {v}"
    return f" {v:.4f}" if abs(v) > 1e-3 or v == 0 else f" {v:.4e}"


def _format_time(seconds):
    if seconds >= 3600:
        return f"{int(seconds // 3600)}:{int(seconds % 3600 // 60):02d}:{int(seconds % 60):02d}"
    if seconds >= 60:
        return f"{int(seconds // 60)}:{int(seconds % 60):02d}"
    return f"{int(round(seconds))}s"


def _format_per_unit(seconds, unit_name):
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.0f}s/{unit_name}"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f}ms/{unit_name}"
    return f"{seconds * 1e6:.0f}us/{unit_name}"


class Progbar:
    """Keras's progress bar.

    Args:
        target: the total number of steps, or None when unknown (no bar, a counter).
        width: the bar's width in characters.
        verbose: 0 (silent), 1 (the bar) or 2 (one line at the end).
        interval: the least number of seconds between two redraws.
        stateful_metrics: names of values shown as given, not averaged.
        unit_name: what a step is called in the time per step ("step", "sample", ...).
    """

    def __init__(self, target, width=20, verbose=1, interval=0.05, stateful_metrics=None, unit_name="step"):
        if target is not None:
            _number("target", target)
            if target < 0:
                raise ValueError(f"Progbar: target must be >= 0 or None, got {target!r}")
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"Progbar: width must be a positive int, got {width!r}")
        if verbose not in (0, 1, 2):
            raise ValueError(f"Progbar: verbose must be 0, 1 or 2, got {verbose!r}")
        _number("interval", interval)
        if not isinstance(unit_name, str):
            raise TypeError(f"Progbar: unit_name must be a string, got {unit_name!r}")
        self.target = target
        self.width = width
        self.verbose = verbose
        self.interval = interval
        self.unit_name = unit_name
        self.stateful_metrics = set(stateful_metrics) if stateful_metrics else set()
        stream = sys.stdout
        self._dynamic_display = (hasattr(stream, "isatty") and stream.isatty()) or "ipykernel" in sys.modules
        self._seen_so_far = 0
        self._values = {}            # name -> [weighted sum, steps] or [value, 1] for stateful ones
        self._values_order = []
        self._start = time.time()
        self._last_update = 0.0
        self._prev_total_width = 0
        self._time_at_epoch_start = self._start

    def update(self, current, values=None, finalize=None):
        """Move the bar to step ``current``; ``values`` is a list of ``(name, value)``
        pairs; ``finalize`` (default: ``current >= target``) writes the last line."""
        _number("current", current)
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        values = list(values or [])
        for pair in values:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"Progbar.update: values must be (name, value) pairs, got {pair!r}")
        for k, v in values:
            if k not in self._values_order:
                self._values_order.append(k)
            if k in self.stateful_metrics:
                self._values[k] = [v, 1]
            else:
                steps = max(current - self._seen_so_far, 1)
                total = self._values.get(k, [0.0, 0])
                self._values[k] = [total[0] + float(v) * steps, total[1] + steps]
        self._seen_so_far = current
        now = time.time()
        if self.verbose == 1:
            if now - self._last_update < self.interval and not finalize:
                return
            line = self._bar(current) + self._info(current, now, finalize)
            if self._dynamic_display and config.is_interactive_logging_enabled():
                pad = max(self._prev_total_width - len(line), 0)
                self._prev_total_width = len(line)
                config.print_msg("\r" + line + " " * pad, line_break=bool(finalize))
            else:
                config.print_msg(line)
        elif self.verbose == 2 and finalize:
            # Keras's one-line form: "4/4 - 0s - 5ms/step - loss: ..."
            elapsed = now - self._start
            per_unit = elapsed / current if current else 0.0
            config.print_msg(f"{self._counter(current)} - {_format_time(elapsed)} - "
                             f"{_format_per_unit(per_unit, self.unit_name)}" + self._values_text())
        self._last_update = now

    def add(self, n, values=None):
        """``update(current + n, values)``."""
        _number("n", n)
        self.update(self._seen_so_far + n, values)

    def _counter(self, current):
        if self.target is None:
            return f"{int(current)}"
        digits = len(str(int(self.target)))
        return f"{int(current):>{digits}}/{int(self.target)}"

    def _bar(self, current):
        text = self._counter(current)
        if self.target is None:
            return text
        done = min(current / self.target, 1.0) if self.target else 1.0
        filled = int(self.width * done)
        bar = "=" * filled
        if current < self.target and filled < self.width:
            bar = (bar[:-1] + ">") if filled else ">"
        return f"{text} [{bar}{'.' * (self.width - len(bar))}]"

    def _info(self, current, now, finalize):
        elapsed = now - self._start
        per_unit = elapsed / current if current else 0.0
        if finalize or self.target is None:
            info = f" {_format_time(elapsed)} {_format_per_unit(per_unit, self.unit_name)}"
        else:
            info = f" ETA: {_format_time(per_unit * (self.target - current))}"
        return info + self._values_text()

    def _values_text(self):
        text = ""
        for k in self._values_order:
            total, steps = self._values[k]
            value = total if k in self.stateful_metrics else total / max(steps, 1)
            text += f" - {k}:{_format_value(value)}"
        return text
