"""The logits behind a sigmoid's or a softmax's output, as Keras's TensorFlow backend keeps them
(``output._keras_logits``): a cross-entropy given such probabilities computes from the logits,
exactly and with a gradient where the probabilities saturate (a sigmoid at -30 gives a loss of
30, where the clipped probability gives 16.1 and no gradient).  pyggml's functional models do
this for their output layers (``pre_activation``); this registry does it for the sigmoids and
softmaxes inside custom layers, subclassed models and GradientTape code.

``note(out, logits, kind)`` records, in the graph being built, that ``out`` is ``kind``
("sigmoid", or "softmax" over the last axis) of ``logits`` (a tensor, or a function making
it: a Dense's pre-activation, made only when a loss asks); ``of(t, kind)`` gives them back."""

from pyggml import _scope

__all__ = ["note", "of", "known"]


def _registry(create):
    cache = getattr(_scope.current(), "cache", None)
    if not isinstance(cache, dict):
        return None
    reg = cache.get("keras_logits")
    if reg is None and create:
        reg = cache["keras_logits"] = {}
    return reg


def note(out, logits, kind):
    reg = _registry(True)
    if reg is not None and out is not None and not isinstance(out, (list, tuple, dict)):
        reg[id(out)] = (out, logits, kind)


def known(t):
    """Whether logits are recorded for ``t`` (without making them)."""
    reg = _registry(False)
    e = None if reg is None else reg.get(id(t))
    return e is not None and e[0] is t


def of(t, kind):
    """The logits ``t`` is the ``kind`` of, or None."""
    reg = _registry(False)
    e = None if reg is None else reg.get(id(t))
    if e is None or e[0] is not t or e[2] != kind:
        return None
    logits = e[1]
    if callable(logits):
        logits = logits()
        reg[id(t)] = (t, logits, kind)
    return logits
