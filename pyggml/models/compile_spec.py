"""What ``compile`` fixes, per output: the loss (or none), its weight, whether
it trains on the output layer's logits, and the metrics.

``loss`` is one loss for every output, a list in output order (``None`` for
an output without a loss) or a dict by output name (outputs it does not name
get no loss).  ``metrics`` is a list for every output, a list of lists (one
per output) or a dict by output name.  Unknown names raise ValueError.
``weighted_metrics`` takes the same forms: those metrics are weighted by the
batch's sample weights (``sample_weight``, ``class_weight``), the others not
(Keras 3).  Log names are Keras's: ``<output>_<metric>`` when there are several
outputs, a repeated name gets ``_1``, ``_2``, ..., and a weighted metric whose
name is taken by an unweighted one is ``weighted_<metric>``.
"""

from pyggml import losses as losses_mod
from pyggml import metrics as metrics_mod

__all__ = ["CompileSpec", "is_crossentropy", "metric_log_keys", "metrics_per_output"]


def _per_output(value, names, what, allow_missing):
    n = len(names)
    if isinstance(value, dict):
        unknown = set(value) - set(names)
        if unknown:
            raise ValueError(f"{what} names unknown outputs {sorted(unknown)}; outputs: {names}")
        if not allow_missing:
            missing = [nm for nm in names if nm not in value]
            if missing:
                raise ValueError(f"{what} dict must name every output: {names}")
        return [value.get(nm) for nm in names]
    if isinstance(value, (list, tuple)) and n > 1:
        if len(value) != n:
            raise ValueError(f"{len(value)} {what} entries for {n} outputs ({names})")
        return list(value)
    if isinstance(value, (list, tuple)) and n == 1 and len(value) == 1:
        return list(value)
    return [value] * n


def metrics_per_output(metrics, output_names, what="metrics"):
    """The metric identifiers of each output, as lists: a list with one entry per output (a
    metric or a list of them: Keras 3's pairing), a dict by output name, or else one list for
    every output."""
    n = len(output_names)
    if metrics is None:
        return [[] for _ in range(n)]
    if isinstance(metrics, dict):
        per = _per_output(metrics, output_names, what, allow_missing=True)
    elif isinstance(metrics, (list, tuple)) and n > 1 and len(metrics) == n:
        per = list(metrics)
    elif isinstance(metrics, (list, tuple)):
        per = [list(metrics)] * n
    else:
        per = [[metrics]] * n
    return [[] if ms is None else (list(ms) if isinstance(ms, (list, tuple)) else [ms]) for ms in per]


def metric_log_keys(output_names, metrics, weighted_metrics):
    """(output index, metric, log key, weighted) for per-output lists of metric objects,
    the metrics and then the weighted ones, named as Keras names them (see the module's
    docstring); output_names None: no prefix."""
    several = output_names is not None and len(output_names) > 1
    used, keys = {}, []

    def prefixed(i, name):
        return f"{output_names[i]}_{name}" if several else name

    for i, ms in enumerate(metrics):
        for m in ms:
            key = prefixed(i, m.name)
            if key in used:
                used[key] += 1
                key = f"{key}_{used[key] - 1}"
            else:
                used[key] = 1
            keys.append((i, m, key, False))
    for i, ms in enumerate(weighted_metrics):
        for m in ms:
            key = prefixed(i, m.name)
            if key in used:
                key = prefixed(i, f"weighted_{m.name}")
                if key in used:
                    used[key] += 1
                    key = f"{key}_{used[key] - 1}"
                else:
                    used[key] = 1
            else:
                used[key] = 1
            keys.append((i, m, key, True))
    return keys


class CompileSpec:
    def __init__(self, outputs, output_names, loss, loss_weights, metrics, weighted_metrics=None):
        n = len(outputs)
        self.output_names = list(output_names)
        given = [_one_loss(l) for l in _per_output(loss, self.output_names, "loss", allow_missing=True)]
        self.loss_given = given
        self._args = (outputs, loss_weights, metrics, weighted_metrics)
        # Keras's "crossentropy" ("ce"): binary for an output of one unit, else categorical or
        # sparse as the targets' shape says (crossentropy_pending: the outputs that wait for them)
        self.crossentropy_pending = [i for i, (o, l) in enumerate(zip(outputs, given))
                                     if is_crossentropy(l) and o.feature_shape[-1:] != (1,)]
        self.losses = [None if l is None else losses_mod._as_loss(
            _crossentropy(o, False) if is_crossentropy(l) else l) for o, l in zip(outputs, given)]
        # no loss at all (Keras's compile(loss=None)): the model trains on what its layers add
        # (add_loss); the training graph refuses a model that adds nothing
        self.loss_defaulted = False      # compile was given no loss (Model.compile's default)
        if loss_weights is None:
            self.loss_weights = [1.0] * n
        else:
            lw = _per_output(loss_weights, self.output_names, "loss_weights", allow_missing=True)
            self.loss_weights = [1.0 if w is None else _weight(w) for w in lw]
        # cross-entropy after a softmax (sigmoid) output trains on the logits: stabler
        self.logits = []
        for o, l in zip(outputs, self.losses):
            act = getattr(o.layer, "activation_name", None)
            self.logits.append(l is not None and l.logits_from is not None and act == l.logits_from
                               and hasattr(o.layer, "pre_activation") and not getattr(l, "from_logits", False))
        self.metrics_given = metrics
        self.metrics = self._metrics(metrics, outputs, "metrics")
        self.weighted_metrics = self._metrics(weighted_metrics, outputs, "weighted_metrics")
        self._keys = None
        self.target_specs = None         # the targets each output takes (Model.target_specs)

    def _metrics(self, metrics, outputs, what="metrics"):
        out = []
        for o, l, ms in zip(outputs, self.losses, metrics_per_output(metrics, self.output_names, what)):
            sparse = l is not None and getattr(l, "sparse", False)
            # "accuracy" as Keras 3 reads it: binary for an output of one unit (several sigmoid units
            # with binary_crossentropy: categorical, as Keras's); a scalar output by its loss
            binary = (o.feature_shape[-1:] == (1,)) or (not o.feature_shape and l is not None and l.name in (
                "binary_crossentropy", "binary_focal_crossentropy"))
            got = [(metrics_mod.get(m, sparse=sparse, binary=binary), m) for m in ms]
            for mo, _ in got:
                if getattr(mo, "vector_result", False):
                    raise ValueError(f"metric {mo.name!r} gives one value per class or output, and fit/evaluate "
                                     "log numbers: give it an average (e.g. F1Score(average='macro'), "
                                     "R2Score(class_aggregation='uniform_average')) or call it on predictions")
            out.append(got)
        return out

    def metric_objects(self, i):
        return [m for m, _ in self.metrics[i]] + [m for m, _ in self.weighted_metrics[i]]

    def wants_outputs(self, i):
        """Output i's values are read back for metrics."""
        return bool(self.metrics[i] or self.weighted_metrics[i])

    def metric_keys(self):
        """(output index, metric, log key) in order: the metrics, then the weighted ones,
        named as Keras names them (see the module's docstring)."""
        return [(i, m, key) for i, m, key, _ in self.all_metric_keys()]

    def all_metric_keys(self):
        """(output index, metric, log key, weighted) in order."""
        if self._keys is None:
            self._keys = metric_log_keys(self.output_names, [[m for m, _ in ms] for ms in self.metrics],
                                         [[m for m, _ in ms] for ms in self.weighted_metrics])
        return self._keys

    def with_crossentropy_resolved(self, sparse_by_output):
        """A spec whose pending "crossentropy" losses are resolved: {output index: sparse}
        (Keras resolves them once, by the first targets it sees)."""
        outputs, loss_weights, metrics, weighted = self._args
        given = [_crossentropy(o, sparse_by_output[i]) if i in sparse_by_output else l
                 for i, (o, l) in enumerate(zip(outputs, self.loss_given))]
        spec = CompileSpec(outputs, self.output_names, given, loss_weights, metrics, weighted)
        spec.loss_defaulted = self.loss_defaulted
        spec.loss_given = self.loss_given           # (the config keeps "crossentropy", as Keras's)
        return spec

    def config(self):
        from pyggml import losses, metrics
        cfg = {"loss": [None if l is None else g if is_crossentropy(g) else losses.serialize(l)
                        for l, g in zip(self.losses, self.loss_given)],
               "loss_weights": self.loss_weights,
               "metrics": [[metrics.serialize(m, g) for m, g in ms] for ms in self.metrics]}
        if any(self.weighted_metrics):
            cfg["weighted_metrics"] = [[metrics.serialize(m, g) for m, g in ms] for ms in self.weighted_metrics]
        return cfg


def _one_loss(loss):
    """An output's loss; a list of one (Keras's ``loss={"out": ["mse"]}``) is that loss."""
    if isinstance(loss, (list, tuple)):
        if len(loss) != 1:
            raise ValueError(f"an output's loss must be one loss (a list of one at most), got {loss!r}")
        return _one_loss(loss[0])
    return loss


def is_crossentropy(loss):
    return isinstance(loss, str) and loss.lower() in ("crossentropy", "ce")


def _crossentropy(output, sparse):
    """The loss Keras's "crossentropy" stands for on this output."""
    if output.feature_shape[-1:] == (1,):
        return "binary_crossentropy"
    return "sparse_categorical_crossentropy" if sparse else "categorical_crossentropy"


def _weight(w):
    from pyggml._validation import check_number
    return check_number("loss_weights", w)
