"""``Dataset``: the part of ``tf.data`` that Keras scripts use, on numpy.

Keras's data utilities (``text_dataset_from_directory``,
``image_dataset_from_directory``, ``split_dataset``) return a ``tf.data.Dataset``
and the scripts go on with ``map``, ``batch``, ``shuffle``, ``take``,
``prefetch`` and friends.  pyggml's ``Dataset`` answers those calls: it is a
pipeline of lazy steps over elements (an element is an array, or a tuple or
dict of arrays; a list is an array, as in tf.data), read by position, so
``fit``, ``evaluate`` and ``predict`` take it as they take any ``PyDataset``
(``len`` batches, ``ds[i]``).

What differs from tf.data:
- Elements are numpy arrays (``EagerArray``: they also answer ``.numpy()``);
  text is numpy's ``str`` (tf.data gives ``bytes``).
- ``map`` runs the function on numpy elements, eagerly, when an element is
  read: any Python works in it (it is not traced).
- ``shuffle`` shuffles the whole dataset (a uniform permutation), whatever
  ``buffer_size`` says, and again for every pass unless
  ``reshuffle_each_iteration=False``; a dataset that repeats forever, or a
  generator's whose length is not known yet, is shuffled through a buffer of
  ``buffer_size``, as tf.data does.
- ``prefetch`` and ``with_options`` change nothing (elements are made in this
  process, when read); ``num_parallel_calls`` and ``deterministic`` are
  accepted and ignored.  ``cache`` keeps elements in memory, a file name or not.
- ``fit`` takes the batches in the dataset's own order: its ``shuffle``
  argument does not reorder a ``Dataset`` (as with tf.data in Keras).
- ``from_generator`` reads its generator as elements are asked for, so a
  generator that never ends works with ``fit(..., steps_per_epoch=n)``, ``take``
  and the other steps; its length is known once it has ended.
"""

import collections

import os

import numpy as np

from pyggml._validation import is_int
from pyggml.utils.py_dataset import EagerArray, PyDataset, tf_numpy

__all__ = ["Dataset", "TextLineDataset", "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]

_MAX_GENERATED = 1 << 24       # elements from_generator counts at most when asked for its length
_KEEP_BYTES = 256 << 20        # the last elements of a generator kept for reading again (all, when they fit)
_MAX_DRY = 1 << 20             # elements in a row a filter of an endless dataset may reject

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


# --- element structures --------------------------------------------------------------------------

def _map_structure(fn, *elements):
    """fn over the arrays of one or several elements of the same structure."""
    first = elements[0]
    if isinstance(first, dict):
        return {k: _map_structure(fn, *(e[k] for e in elements)) for k in first}
    if isinstance(first, tuple):                 # a list is an array, as in tf.data
        parts = [_map_structure(fn, *p) for p in zip(*elements)]
        return type(first)(*parts) if hasattr(first, "_fields") else tuple(parts)
    return fn(*elements)


def _leaves(element):
    if isinstance(element, dict):
        return [a for v in element.values() for a in _leaves(v)]
    if isinstance(element, tuple):
        return [a for v in element for a in _leaves(v)]
    return [element]


def _eager(a):
    return a if isinstance(a, EagerArray) else np.asarray(a).view(EagerArray)


def _as_element(value):
    """A function's result as an element: tuples and dicts kept, arrays as EagerArrays."""
    if value is None:
        raise ValueError("a Dataset element cannot be None")
    return _map_structure(_eager, value)


def _positive(name, value):
    if not is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _stack(parts):
    try:
        return np.stack([np.asarray(p) for p in parts])
    except ValueError as e:
        raise ValueError(f"batch: the elements of a batch must have equal shapes ({e}); use padded_batch "
                         f"for elements of different lengths") from None


class _End(IndexError):
    """A read past the end of a dataset whose length is not known yet (one made from a
    generator that has not ended): iteration stops there."""


class _GeneratorSource:
    """``from_generator``'s elements, read from the generator as they are asked for.

    The elements read are kept while they fit in ``_KEEP_BYTES`` (all of a small dataset, so
    later passes read them again); beyond that the oldest are let go, and reading one of
    them, or a new pass, calls the generator again from its start, as tf.data calls it
    for every pass.  The length is known once the generator has ended."""

    def __init__(self, generator, args):
        self.generator, self.args = generator, tuple(args or ())
        self.it = None
        self.base = 0                    # the position of kept[0]
        self.kept = collections.deque()  # (element, nbytes)
        self.nbytes = 0
        self.total = None                # the number of elements, once the generator has ended

    def open(self):
        return self.total is None

    def _whole(self):
        return self.total is not None and self.base == 0 and len(self.kept) == self.total

    def _restart(self):
        self.it = iter(self.generator(*self.args))
        self.base, self.nbytes = 0, 0
        self.kept.clear()

    def new_pass(self):
        if not self._whole():
            self.it = None               # the next read calls the generator again

    def get(self, i):
        if self.total is not None and i >= self.total:
            raise _End(f"element {i} of a dataset of {self.total}")
        if i < self.base or (self.it is None and not self._whole()):
            self._restart()
        while i >= self.base + len(self.kept):
            try:
                element = next(self.it)
            except StopIteration:
                self.total, self.it = self.base + len(self.kept), None
                raise _End(f"element {i} of a dataset of {self.total}") from None
            element = _as_element(_map_structure(np.asarray, element))
            size = sum(a.nbytes for a in _leaves(element))
            self.kept.append((element, size))
            self.nbytes += size
            while self.nbytes > _KEEP_BYTES and len(self.kept) > 1:
                self.nbytes -= self.kept.popleft()[1]
                self.base += 1
        return self.kept[i - self.base][0]

    def count(self):
        """The number of elements: the generator read to its end."""
        while self.total is None:
            i = self.base + len(self.kept) if self.it is not None else 0
            if i >= _MAX_GENERATED:
                raise ValueError(f"from_generator: the generator gave more than {_MAX_GENERATED} elements (an "
                                 f"endless one?), and its length was asked for: give fit steps_per_epoch "
                                 f"(validation_steps, steps), or take(n) from it")
            try:
                self.get(i)
            except _End:
                pass
        return self.total


class Dataset(PyDataset):
    """A pipeline of elements read by position; see the module's docstring.

    Make one with ``Dataset.from_tensor_slices``, ``Dataset.from_tensors``,
    ``Dataset.range`` or the ``*_dataset_from_directory`` utilities."""

    def __init__(self, length, get, parents=(), on_pass=None, source_open=None):
        super().__init__()
        self._length = length               # an int, a function giving it (worked out when read), None: infinite
        self._get = get                     # position -> element (raises _End past the end of an open one)
        self._parents = tuple(parents)
        self._on_pass = on_pass             # called at the start of every pass (a new shuffle)
        self._source_open = source_open     # a generator's: whether its length is still unknown

    def _open(self):
        """The length is not known yet without reading a generator to its end: read by
        position until _End instead of asking for it."""
        return (self._source_open is not None and self._source_open()) or any(p._open() for p in self._parents)

    # --- sources ---------------------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors):
        """One element per row of the arrays (their first axis), keeping the structure:
        ``from_tensor_slices((x, y))`` gives ``(x[i], y[i])``."""
        data = _map_structure(np.asarray, tensors)
        lengths = {a.shape[0] if a.ndim else None for a in _leaves(data)}
        if None in lengths:
            raise ValueError("from_tensor_slices: every array needs a first axis to slice along (a scalar has none)")
        if len(lengths) != 1:
            raise ValueError(f"from_tensor_slices: the arrays' first axes differ in length: {sorted(lengths)}")
        return Dataset(lengths.pop(), lambda i: _map_structure(lambda a: _eager(a[i]), data))

    @staticmethod
    def from_tensors(tensors):
        """A dataset of one element: the arrays as they are."""
        element = _as_element(_map_structure(np.asarray, tensors))
        return Dataset(1, lambda i: element)

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None, output_signature=None,
                       name=None):
        """The elements a generator yields: ``generator`` is called (with ``args``) when the
        dataset is first read, and read as elements are asked for, so it may never end (give
        ``fit`` ``steps_per_epoch`` then, or ``take(n)``).  The elements of a small dataset are
        kept for later passes; otherwise each pass calls the generator again, as tf.data does.
        The length is known when the generator has ended (``len`` reads it to its end;
        ``cardinality`` is UNKNOWN_CARDINALITY until then).  The types and signature are
        accepted for tf.data's scripts; the elements are what the generator gives, as arrays."""
        if not callable(generator):
            raise TypeError(f"from_generator takes a callable that returns an iterator, got {type(generator).__name__}")
        if args is not None and not isinstance(args, (tuple, list)):
            raise TypeError(f"from_generator: args must be a tuple of the generator's arguments, got "
                            f"{type(args).__name__}")
        source = _GeneratorSource(generator, args)
        return Dataset(source.count, source.get, on_pass=source.new_pass, source_open=source.open)

    @staticmethod
    def range(*args, dtype="int64"):
        """``range(stop)``, ``range(start, stop[, step])``: the integers, one per element."""
        if not 1 <= len(args) <= 3 or not all(is_int(a) for a in args):
            raise TypeError(f"Dataset.range takes (stop) or (start, stop[, step]) as ints, got {args!r}")
        if not all(-2**63 <= a < 2**63 for a in args):
            raise ValueError(f"Dataset.range: {args!r} leave the int64 range")
        try:
            r = range(*(int(a) for a in args))
            n = len(r)
        except (ValueError, OverflowError) as e:          # step 0; more than 2**63 - 1 elements
            raise ValueError(f"Dataset.range{args!r}: {e}") from None
        return Dataset(n, lambda i: _eager(np.asarray(r[i], dtype=dtype)))

    @staticmethod
    def zip(*datasets):
        """Elements made of the datasets' elements side by side (as long as the shortest)."""
        if len(datasets) == 1 and isinstance(datasets[0], (tuple, list, dict)):
            datasets = datasets[0]
        parts = list(datasets.values()) if isinstance(datasets, dict) else list(datasets)
        if not parts or not all(isinstance(d, Dataset) for d in parts):
            raise TypeError("Dataset.zip takes Datasets (several, or a tuple or dict of them)")
        finite = [d for d in parts if d._length is not None]
        n = (lambda: min(d._n() for d in finite)) if finite else None
        if isinstance(datasets, dict):
            return Dataset(n, lambda i: {k: d._get(i) for k, d in datasets.items()}, parts)
        return Dataset(n, lambda i: tuple(d._get(i) for d in parts), parts)

    # --- reading ---------------------------------------------------------------------------------

    def __len__(self):
        n = self._n()
        if n is None:
            raise TypeError("this Dataset repeats without end, so it has no length: give fit steps_per_epoch")
        return n

    def _n(self):
        return self._length() if callable(self._length) else self._length

    def cardinality(self):
        """The number of elements (INFINITE_CARDINALITY, -1, for a dataset that repeats forever;
        UNKNOWN_CARDINALITY, -2, for one made from a generator that has not ended yet)."""
        if self._length is not None and self._open():
            return _eager(np.int64(UNKNOWN_CARDINALITY))
        n = self._n()
        # a 0-d array, as tf.data's scalar tensor (``.cardinality().numpy()``); it compares as an int
        return _eager(np.int64(INFINITE_CARDINALITY if n is None else n))

    def __getitem__(self, index):
        if not is_int(index):
            raise TypeError(f"a Dataset is read by int position, got {type(index).__name__}")
        if self._length is not None and (index < 0 or not self._open()):
            n = self._n()
            if not -n <= index < n:
                raise IndexError(f"element {index} of a dataset of {n}")
            index %= n
        elif index < 0:
            raise IndexError("a dataset that repeats forever has no last element")
        try:
            return self._get(int(index))
        except _End as e:
            raise IndexError(str(e)) from None

    def _new_pass(self):
        for p in self._parents:
            p._new_pass()
        if self._on_pass is not None:
            self._on_pass()

    def on_epoch_begin(self):
        self._new_pass()

    def __iter__(self):
        self._new_pass()
        n = self._n() if self._length is not None and not self._open() else None
        i = 0
        while n is None or i < n:
            try:
                element = self._get(i)
            except _End:
                return
            yield element
            i += 1

    def as_numpy_iterator(self):
        """The elements as plain numpy arrays, a scalar as a numpy scalar, text as bytes (tf.data's)."""
        for element in self:
            yield _map_structure(lambda a: tf_numpy(np.asarray(a)), element)

    def take(self, count):
        """The first ``count`` elements (all for -1)."""
        if not is_int(count) or count < -1:
            raise ValueError(f"take: count must be an int, -1 or more, got {count!r}")
        if count == -1:
            return Dataset(self._length, self._get, [self])
        count = int(count)

        def get(i):
            if i >= count:
                raise _End(f"element {i} of a dataset of {count}")
            return self._get(i)
        if self._length is None:
            return Dataset(count, get, [self])

        def length():
            if self._open():
                try:
                    self._get(count - 1)        # a generator read this far only
                    return count
                except _End:
                    pass
            return min(count, self._n())
        return Dataset(length, get, [self])

    def skip(self, count):
        """The elements after the first ``count`` (none for -1)."""
        if not is_int(count) or count < -1:
            raise ValueError(f"skip: count must be an int, -1 or more, got {count!r}")
        if self._length is None:
            if count == -1:
                return Dataset(0, self._get, [self])
            return Dataset(None, lambda i: self._get(i + count), [self])

        def skipped():
            return self._n() if count == -1 else min(int(count), self._n())
        if count != -1 and self._open():
            return Dataset(lambda: max(self._n() - int(count), 0), lambda i: self._get(i + int(count)), [self])
        return Dataset(lambda: self._n() - skipped(), lambda i: self._get(i + skipped()), [self])

    # --- transformations -------------------------------------------------------------------------

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """``map_func`` on every element (a tuple element's parts as its arguments)."""
        if not callable(map_func):
            raise TypeError(f"map takes a function, got {type(map_func).__name__}")

        def get(i):
            e = self._get(i)
            out = map_func(*e) if isinstance(e, tuple) else map_func(e)
            # tf.data takes a returned list as a tuple of components (the next map's arguments)
            return _as_element(tuple(out) if isinstance(out, list) else out)
        return Dataset(self._length, get, [self])

    def filter(self, predicate, name=None):
        """The elements for which ``predicate`` is true (worked out again on every pass)."""
        if not callable(predicate):
            raise TypeError(f"filter takes a function, got {type(predicate).__name__}")
        state = {}

        def keep(element, j):
            if _truth(predicate, element):
                kept.append(j)
                state["dry"] = 0
            elif self._length is None or self._open():
                # a dataset with no end: a predicate that keeps nothing would read it forever
                state["dry"] = state.get("dry", 0) + 1
                if state["dry"] >= _MAX_DRY:
                    raise ValueError(f"filter: {_MAX_DRY} elements in a row kept none, of a dataset without "
                                     f"an end (a predicate that keeps nothing of repeat()'s elements?)")

        def scan(i):
            """The kept positions, found until the i-th (or the end)."""
            nonlocal kept
            kept = state.setdefault("kept", [])
            self._read_on(state, lambda: len(kept) <= i, keep)
            return kept
        kept = []

        def get(i):
            kept = scan(i)
            if i >= len(kept):
                raise _End(f"element {i} of a dataset of {len(kept)}")
            return self._get(kept[i])
        out = Dataset(None if self._length is None else (lambda: len(scan(float("inf")))), get, [self],
                      lambda: state.clear())
        out._pass_varies = True          # a predicate of random draws keeps another count each pass
        return out

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        """Consecutive elements stacked into batches of ``batch_size`` (a shorter last one
        unless ``drop_remainder``)."""
        b = _positive("batch_size", batch_size)
        return Dataset(self._batches(b, drop_remainder),
                       lambda i: _map_structure(lambda *a: _eager(_stack(a)), *self._run(i, b, drop_remainder)),
                       [self])

    def _batches(self, b, drop_remainder):
        if self._length is None:
            return None
        return lambda: self._n() // b if drop_remainder else -(-self._n() // b)

    def _run(self, i, b, drop_remainder=False):
        """The elements of batch i (of b each)."""
        if self._length is not None and not self._open():
            parts = [self._get(j) for j in range(i * b, min((i + 1) * b, self._n()))]
        else:
            parts = []
            for j in range(i * b, (i + 1) * b):
                try:
                    parts.append(self._get(j))
                except _End:
                    break
        if not parts or (drop_remainder and len(parts) < b):
            raise _End(f"batch {i}: the data ended")
        return parts

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):
        """Batches of elements padded at the end of each axis to the longest in the batch
        (or to ``padded_shapes``, where None is the longest), with ``padding_values`` (0)."""
        b = _positive("batch_size", batch_size)

        def get(i):
            parts = self._run(i, b, drop_remainder)
            shapes = _per_part(padded_shapes, parts[0], "padded_shapes", shape=True)
            values = _per_part(padding_values, parts[0], "padding_values", shape=False)
            return _map_structure(lambda s, v, *a: _eager(_pad(s, v, a)), shapes, values, *parts)
        return Dataset(self._batches(b, drop_remainder), get, [self])

    def unbatch(self, name=None):
        """The rows of every batch as elements of their own."""
        state = {}

        def offsets(i):
            """The end offsets of the batches read, until one ends past row i (or the data ends)."""
            ends = state.setdefault("ends", [])
            self._read_on(state, lambda: not ends or ends[-1] <= i,
                          lambda batch, k: ends.append((ends[-1] if ends else 0) + len(np.asarray(_leaves(batch)[0]))))
            return ends

        def get(i):
            e = offsets(i)
            if not e or i >= e[-1]:
                raise _End(f"row {i}: the data ended")
            k = int(np.searchsorted(e, i, side="right"))
            start = 0 if k == 0 else int(e[k - 1])
            return _map_structure(lambda a: _eager(np.asarray(a)[i - start]), self._get(k))

        def length():
            e = offsets(float("inf"))
            return int(e[-1]) if e else 0
        return Dataset(None if self._length is None else length, get, [self], lambda: state.clear())

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):
        """The elements in a random order (a new one every pass, unless
        ``reshuffle_each_iteration=False``)."""
        _positive("buffer_size", buffer_size) if buffer_size != AUTOTUNE else None
        if seed is not None and (not is_int(seed) or seed < 0):
            raise ValueError(f"shuffle: seed must be a non-negative int or None, got {seed!r}")
        from pyggml._random import rng as library_rng
        gen = np.random.default_rng(int(seed)) if seed is not None else library_rng()
        if self._length is None or self._open():
            return self._stream_shuffle(4096 if buffer_size == AUTOTUNE else int(buffer_size), gen,
                                        reshuffle_each_iteration)
        n = self._finite("shuffle")
        order = {"perm": gen.permutation(n), "passes": 0}

        def on_pass():
            order["passes"] += 1
            if order["passes"] > 1 and reshuffle_each_iteration is not False:
                order["perm"] = gen.permutation(n)
        return Dataset(n, lambda i: self._get(int(order["perm"][i])), [self], on_pass)

    def repeat(self, count=None, name=None):
        """The dataset ``count`` times over (forever for None or -1)."""
        if count is not None and count != -1 and (not is_int(count) or count < 0):
            raise ValueError(f"repeat: count must be a non-negative int, -1 or None, got {count!r}")
        if self._length is not None and self._open():
            return self._repeat_open(None if count is None or count == -1 else int(count))
        if self._length is not None and self._varies() and (count is None or count == -1):
            return self._repeat_passes()
        n = self._finite("repeat")
        if count is None or count == -1:
            if n == 0:
                return Dataset(0, self._get, [self])
            return Dataset(None, lambda i: self._get(i % n), [self])
        if not is_int(count) or count < 0:
            raise ValueError(f"repeat: count must be a non-negative int, -1 or None, got {count!r}")
        return Dataset(n * int(count), lambda i: self._get(i % n), [self])

    def concatenate(self, dataset, name=None):
        """This dataset's elements, then ``dataset``'s."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"concatenate takes a Dataset, got {type(dataset).__name__}")
        if self._length is None:
            raise ValueError("concatenate needs a dataset that ends; this one repeats forever")

        def get(i):
            found, element = self._while_open(i)
            if found:
                return element
            n = self._n()
            return self._get(i) if i < n else dataset._get(i - n)
        return Dataset(None if dataset._length is None else (lambda: self._n() + dataset._n()), get, [self, dataset])

    def enumerate(self, start=0, name=None):
        """``(position + start, element)`` pairs."""
        if not is_int(start):
            raise TypeError(f"enumerate: start must be an int, got {start!r}")
        start = int(start)
        if not -2**63 <= start < 2**63:
            raise ValueError(f"enumerate: start={start} leaves the int64 range")
        return Dataset(self._length, lambda i: (_eager(np.int64(i + start)), self._get(i)), [self])

    def reduce(self, initial_state, reduce_func, name=None):
        """``reduce_func(state, element)`` folded over the elements."""
        self._finite("reduce")
        state = initial_state
        for element in self:
            state = reduce_func(state, element)
        return state

    def get_single_element(self, name=None):
        """The one element of a dataset of one element (tf.data's); any other count is refused."""
        n = self._finite("get_single_element")
        if n != 1:
            raise ValueError(f"get_single_element: the dataset has {n} elements, not one")
        self._new_pass()
        return self._get(0)

    def apply(self, transformation_func):
        """``transformation_func(self)``."""
        return transformation_func(self)

    def rejection_resample(self, class_func, target_dist, initial_dist=None, seed=None, name=None):
        """tf.data's: ``(class, element)`` pairs, elements kept at random so that the classes
        (``class_func(*element)``, an int in [0, len(target_dist))) come in ``target_dist``'s
        proportions: an element of class c is kept with probability ``r_c / max r``, ``r =
        target / initial`` (``initial_dist`` estimated from the classes seen so far when not
        given).  Drawn afresh on every pass."""
        if not callable(class_func):
            raise TypeError(f"rejection_resample: class_func must be a function, got {class_func!r}")
        target = _distribution(target_dist, "target_dist")
        initial = None if initial_dist is None else _distribution(initial_dist, "initial_dist")
        if initial is not None and len(initial) != len(target):
            raise ValueError(f"rejection_resample: initial_dist has {len(initial)} classes, target_dist {len(target)}")
        k = len(target)
        rng = np.random.default_rng(seed)
        seen = np.zeros(k)

        def class_of(element):
            c = np.asarray(class_func(*element) if isinstance(element, tuple) else class_func(element))
            if c.size != 1 or c.dtype.kind not in "biu" and not (c.dtype.kind == "f" and float(c) == int(c)):
                raise ValueError(f"rejection_resample: class_func must give one class index, got {c!r}")
            c = int(c.reshape(()))
            if not 0 <= c < k:
                raise ValueError(f"rejection_resample: class {c} is outside target_dist's {k} classes")
            return c

        def keep(*element):
            element = element if len(element) != 1 else element[0]
            c = class_of(element)
            if initial is None:
                seen[c] += 1
                dist = seen / seen.sum()
            else:
                dist = initial
            present = dist > 0
            ratio = np.where(present, target / np.where(present, dist, 1.0), 0.0)
            top = ratio.max()
            return top > 0 and rng.random() < ratio[c] / top

        def pair(*element):
            element = element if len(element) != 1 else element[0]
            return np.int32(class_of(element)), element
        return self.filter(keep).map(pair)

    # accepted for tf.data scripts; elements are made when read
    def prefetch(self, buffer_size=AUTOTUNE, name=None):
        if buffer_size != AUTOTUNE and (not is_int(buffer_size) or buffer_size < 0):
            raise ValueError(f"prefetch: buffer_size must be a non-negative int or AUTOTUNE, got {buffer_size!r}")
        return self

    def cache(self, filename="", name=None):
        """Each element kept in memory once made (also with a ``filename``): later passes
        read the kept elements, in the first pass's order."""
        kept = {}

        def get(i):
            if i not in kept:
                kept[i] = self._get(i)
            return kept[i]
        out = Dataset(self._length, get, [self])
        out._pass_varies = False         # every pass is the first one's
        return out

    def with_options(self, options, name=None):
        return self

    def _stream_shuffle(self, size, gen, reshuffle):
        """tf.data's shuffle of a dataset that repeats forever: a buffer of ``size`` elements,
        each output drawn from it at random and its place taken by the next element.  Read in
        order (as fit reads), positions are made as they are asked for; the last few thousand
        are kept, and an earlier one makes the stream again from its start."""
        keep = max(4 * size, 1024)
        seed = int(gen.integers(2 ** 63))
        state = {}

        def restart():
            state.update(rng=np.random.default_rng(seed if reshuffle is False else int(gen.integers(2 ** 63))),
                         buf=[], read=0, made={}, count=0, ended=False)

        def get(i):
            if not state or (i < state["count"] and i not in state["made"]):
                restart()
            made, buf = state["made"], state["buf"]
            while state["count"] <= i:
                while len(buf) < size and not state.get("ended"):
                    try:
                        buf.append(self._get(state["read"]))
                    except _End:
                        state["ended"] = True
                        break
                    state["read"] += 1
                if not buf:
                    raise _End(f"element {i}: the data ended")
                k = int(state["rng"].integers(len(buf)))
                made[state["count"]] = buf[k]
                buf[k] = buf[-1]
                buf.pop()
                state["count"] += 1
                if len(made) > keep:
                    del made[state["count"] - keep - 1]
            return made[i]
        return Dataset(None if self._length is None else self._n, get, [self], lambda: state.clear())

    def _read_on(self, state, wanted, use):
        """This dataset's elements read in order from where ``state`` last stopped, each given
        to ``use(element, position)``, while ``wanted()`` and the data lasts (filter's and
        unbatch's scans, which read only as far as they are asked)."""
        while wanted() and not state.get("done"):
            k = state.get("read", 0)
            if self._length is not None and not self._open() and k >= self._n():
                state["done"] = True
                break
            try:
                element = self._get(k)
            except _End:
                state["done"] = True
                break
            state["read"] = k + 1
            use(element, k)

    def _while_open(self, i):
        """(True, element i) while a generator's length is not known yet and it has that element;
        (False, None) once it is known (the caller places i by the length then)."""
        if self._open():
            try:
                return True, self._get(i)
            except _End:
                pass
        return False, None

    def _repeat_open(self, count):
        """repeat() of a generator's dataset whose length is not known yet: its first pass is
        read as it comes; the length, known at its end, places the later passes."""
        def get(i):
            found, element = self._while_open(i)
            if found:
                return element
            n = self._n()
            if n == 0 or (count is not None and i >= n * count):
                raise _End(f"element {i}: the data ended")
            return self._get(i % n)
        return Dataset(None if count is None else (lambda: self._n() * count), get, [self])

    def _varies(self):
        """Whether one pass may hold another number of elements than the last (a filter's, or
        rejection_resample's, whose random draws keep others each pass; a cache keeps its first)."""
        own = self.__dict__.get("_pass_varies")
        return own if own is not None else any(p._varies() for p in self._parents)

    def _repeat_passes(self):
        """An endless repeat() of a dataset whose passes differ in length: every repetition is a
        new pass of it, read in order to its end, as tf.data's repeat reads its input again (a
        fixed length would read past a shorter pass's end, or repeat one pass's draws).  (A
        repeat(count) keeps its first pass's length, so that zip and concatenate place it.)"""
        st = {"start": 0}                     # the position where the current pass began

        def restart():
            st["start"] = 0

        def get(i):
            if i < st["start"]:                 # read again from the start: a new pass of it
                restart()
                self._new_pass()
            while True:
                try:
                    return self._get(i - st["start"])
                except _End:
                    pass
                n = self._n()                   # this pass's length, now read to its end
                if n == 0:
                    raise _End(f"element {i}: a pass of the repeated data is empty")
                st["start"] += n
                self._new_pass()
        return Dataset(None, get, [self], restart)

    def _finite(self, what):
        if self._length is None:
            raise ValueError(f"{what} needs a dataset that ends; this one repeats forever")
        return self._n()


def _distribution(values, what):
    d = np.asarray(values, dtype=np.float64).reshape(-1)
    if d.size == 0 or not np.all(np.isfinite(d)) or np.any(d < 0) or d.sum() <= 0:
        raise ValueError(f"rejection_resample: {what} must be non-negative numbers summing to more than 0, "
                         f"got {values!r}")
    return d / d.sum()


def _truth(predicate, element):
    value = np.asarray(predicate(*element) if isinstance(element, tuple) else predicate(element))
    if value.size != 1:
        raise ValueError(f"filter: the predicate must give one truth value per element, got shape {value.shape}")
    return bool(value)


def _per_part(spec, element, what, shape):
    """padded_batch's padded_shapes / padding_values for each array of an element: one per
    part of a tuple or dict element (padding_values: or one for all)."""
    if isinstance(element, dict):
        if spec is None or (not shape and np.isscalar(spec)):
            return {k: _per_part(spec, v, what, shape) for k, v in element.items()}
        if not isinstance(spec, dict) or set(spec) != set(element):
            raise ValueError(f"padded_batch: {what} must be a dict with the element's keys {sorted(element)}")
        return {k: _per_part(spec[k], v, what, shape) for k, v in element.items()}
    if isinstance(element, tuple):
        if spec is None or (not shape and np.isscalar(spec)):
            return tuple(_per_part(spec, v, what, shape) for v in element)
        if not isinstance(spec, (tuple, list)) or len(spec) != len(element):
            raise ValueError(f"padded_batch: {what} must have one entry per part of the element ({len(element)})")
        return tuple(_per_part(s, v, what, shape) for s, v in zip(spec, element))
    return _Leaf(spec)


class _Leaf:
    """One array's padded shape or padding value (kept whole by _map_structure)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _pad(shape, value, arrays):
    arrays = [np.asarray(a) for a in arrays]
    rank = arrays[0].ndim
    if any(a.ndim != rank for a in arrays):
        raise ValueError("padded_batch: the elements of a batch must have the same number of axes")
    target = [max(a.shape[d] for a in arrays) for d in range(rank)]
    if shape.value is not None:
        hint = [shape.value] if is_int(shape.value) else list(shape.value)
        if len(hint) != rank:
            raise ValueError(f"padded_batch: the padded shape {tuple(hint)} has {len(hint)} axes, the elements "
                             f"have {rank}")
        for d, h in enumerate(hint):
            if h is None or h == -1:
                continue
            if not is_int(h) or h < target[d]:
                raise ValueError(f"padded_batch: an element is {target[d]} long on axis {d}, more than the "
                                 f"padded shape's {h!r}")
            target[d] = int(h)
    fill = 0 if value.value is None else value.value
    out = np.full([len(arrays)] + target, fill, dtype=arrays[0].dtype)
    for k, a in enumerate(arrays):
        out[(k,) + tuple(slice(0, s) for s in a.shape)] = a
    return out


def TextLineDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):
    """tf.data's ``TextLineDataset``: one element per line of the text files (UTF-8), in order,
    without the line ends, as string arrays."""
    if compression_type not in (None, ""):
        raise ValueError(f"TextLineDataset: compressed files are not read here, got compression_type="
                         f"{compression_type!r}")
    names = [filenames] if isinstance(filenames, (str, bytes, os.PathLike)) else list(np.asarray(filenames).ravel())
    lines = []
    for f in names:
        path = os.fsdecode(f)
        try:
            with open(path, encoding="utf-8") as fh:
                lines += fh.read().splitlines()
        except OSError as e:
            raise FileNotFoundError(f"TextLineDataset: cannot read {path!r}: {e.strerror or e}") from None
    data = np.array(lines, dtype=str) if lines else np.zeros((0,), dtype=str)
    return Dataset(len(data), lambda i: _eager(data[i]))
