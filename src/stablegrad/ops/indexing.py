"""Indexing: `x[...]` with ints, slices, None, Ellipsis, integer arrays and boolean masks,
and its adjoint `x.at[...].set(v)` / `.add(v)`.

An index is stored as a static *spec* (a tuple whose entries are ints, slices as
(start, stop, step) triples — `slice` is unhashable before Python 3.12 — None, or
`ARRAY` for "the next array operand"), so the op is hashable and its
output shape can be inferred without running it.  Basic and advanced indexing
share one op: the pullback of a gather is a scatter-add with the same spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import numpy as np

from ..errors import ShapeError
from ..graph.basic import READS_NOTHING, Constant, Op, Reads, Variable
from ..graph.types import Shape, TensorType, broadcast_shapes, normalize_axis
from . import dims
from .base import Linear, as_operands, as_tensor, zero_grad
from .creation import arange, full, zeros_like
from .elementwise import astype, equal, maximum, minimum, where
from .shape import broadcast_to, expand_dims, reduce_to, reshape, shape_tuple, size

ARRAY = "array"


def _index_tuple(spec: tuple, arrays) -> tuple:
    it = iter(arrays)
    return tuple(next(it) if entry == ARRAY else slice(*entry) if isinstance(entry, tuple) else entry for entry in spec)


def _slice_length(s: slice, n: int | None) -> int | None:
    if n is None:
        return None
    return len(range(*s.indices(n)))


def indexed_shape(op: str, x_shape: Shape, spec: tuple, arrays: list[Variable]) -> Shape:
    """Static shape of x[spec] under NumPy's rules (advanced-index placement included)."""
    arrays_it = iter(arrays)
    pieces: list[tuple[str, Shape]] = []  # ("basic", dims) or ("adv", broadcast shape)
    axis = 0
    has_array = ARRAY in spec
    for entry in spec:
        if entry is None:
            pieces.append(("basic", (1,)))
        elif isinstance(entry, tuple):
            pieces.append(("basic", (_slice_length(slice(*entry), x_shape[axis]),)))
            axis += 1
        elif isinstance(entry, int):
            n = x_shape[axis]
            if n is not None and not -n <= entry < n:
                raise ShapeError(f"{op}: index {entry} is out of bounds for axis {axis} with size {n}")
            pieces.append(("adv", ()) if has_array else ("basic", ()))
            axis += 1
        else:
            arr = next(arrays_it)
            if arr.dtype == np.bool_:
                covered = x_shape[axis : axis + arr.ndim]
                for have, want in zip(arr.type.shape, covered):
                    if have is not None and want is not None and have != want:
                        raise ShapeError(
                            f"{op}: boolean index of shape {arr.type.shape} does not match the indexed "
                            f"dimensions {covered} of the array"
                        )
                pieces.append(("adv", (None,)))
                axis += arr.ndim
            else:
                n = x_shape[axis]
                if isinstance(arr, Constant) and arr.data.size and n is not None:
                    low, high = int(arr.data.min()), int(arr.data.max())
                    if low < -n or high >= n:
                        bad = high if high >= n else low
                        raise ShapeError(f"{op}: index {bad} is out of bounds for axis {axis} with size {n}")
                pieces.append(("adv", arr.type.shape))
                axis += 1
    pieces.append(("basic", tuple(x_shape[axis:])))
    adv_positions = [i for i, (kind, _) in enumerate(pieces) if kind == "adv"]
    if not adv_positions:
        return tuple(d for _, dims in pieces for d in dims)
    adv_shape = broadcast_shapes(*(pieces[i][1] for i in adv_positions), op=op)
    contiguous = adv_positions == list(range(adv_positions[0], adv_positions[-1] + 1))
    basic = [(i, dims) for i, (kind, dims) in enumerate(pieces) if kind == "basic"]
    if contiguous:
        before = [d for i, dims in basic if i < adv_positions[0] for d in dims]
        after = [d for i, dims in basic if i > adv_positions[0] for d in dims]
        return (*before, *adv_shape, *after)
    return (*adv_shape, *(d for _, dims in basic for d in dims))


@final
@dataclass(frozen=True)
class Index(Linear, Op):
    """x[spec] with the index arrays as extra operands (NumPy basic + advanced indexing)."""

    spec: tuple = ()

    @property
    def reads(self) -> Reads:  # type: ignore[override]
        """The index arrays (never x itself, only its shape)."""
        return Reads(inputs=tuple(range(1, 1 + self.spec.count(ARRAY))))

    def infer(self, x, *arrays):
        return [TensorType(x.dtype, indexed_shape("getitem", x.type.shape, self.spec, list(arrays)))]

    def perform(self, x, *arrays):
        return x[_index_tuple(self.spec, arrays)]

    def pullback(self, inputs, outputs, grads):
        x, arrays = inputs[0], inputs[1:]

        scattered = IndexUpdate(self.spec, "add")(zeros_like(x, dtype=grads[0].dtype), grads[0], *arrays)
        return [scattered] + [zero_grad(a) for a in arrays]


@final
@dataclass(frozen=True)
class IndexUpdate(Op):
    """A copy of x with x[spec] set to (mode "set") or incremented by (mode "add") v.

    "add" accumulates repeated indices (`np.add.at`), which is what makes it the
    exact adjoint of gathering with repeated indices.
    """

    spec: tuple = ()
    mode: str = "set"

    @property
    def reads(self) -> Reads:  # type: ignore[override]
        """The index arrays only."""
        return Reads(inputs=tuple(range(2, 2 + self.spec.count(ARRAY))))

    def infer(self, x, v, *arrays):
        target = indexed_shape(f"at[].{self.mode}", x.type.shape, self.spec, list(arrays))
        if v.ndim > len(target):
            raise ShapeError(
                f"at[].{self.mode}: value of shape {v.type.shape} has more dimensions than x[index], {target}"
            )
        broadcast_shapes(target, v.type.shape, op=f"at[].{self.mode}")
        return [TensorType(x.dtype, x.type.shape)]

    def perform(self, x, v, *arrays):
        return self.perform_in_place(np.array(x, copy=True), v, *arrays)

    def perform_in_place(self, out, v, *arrays):
        """The update written into `out` itself: for a backend that knows nothing else holds it
        (a gradient accumulated over many indexings updates one buffer, not a copy each)."""
        index = _index_tuple(self.spec, arrays)
        if self.mode == "set":
            out[index] = v
        elif arrays:
            # np.add.at takes integer arrays only: a mask is its nonzero() positions
            flat = []
            for entry in index:
                flat.extend(np.nonzero(entry) if isinstance(entry, np.ndarray) and entry.dtype == np.bool_ else [entry])
            # v broadcast by hand: NumPy 2.4's add.at reads garbage when a 1-d v must
            # broadcast against a multi-dimensional index (add.at(zeros(3), [[0, 1], [2, 1]], [1., 10.]))
            np.add.at(out, tuple(flat), np.broadcast_to(v, out[tuple(flat)].shape))
        else:
            out[index] += v
        return out

    def pullback(self, inputs, outputs, grads):
        (x, v, *arrays), (g,) = inputs, grads
        g_at_index = Index(self.spec)(g, *arrays)
        if self.mode == "set":
            gx = IndexUpdate(self.spec, "set")(g, as_tensor(np.zeros((), g.dtype)), *arrays)
            if any(a.dtype != np.bool_ for a in arrays):  # integer indices can repeat a position
                g_at_index = where(self._last_writes(x, g_at_index, arrays), g_at_index, 0)
        else:
            gx = g
        return [gx, reduce_to(g_at_index, shape_tuple(v))] + [zero_grad(a) for a in arrays]

    def _last_writes(self, x: Variable, like: Variable, arrays) -> Variable:
        """Which entries of x[index] (shaped like `like`) are the write that stays, where the
        index repeats a position: found by the same assignment, of each entry's number."""
        numbers = reshape(arange(size(like)), shape_tuple(like))
        writer = IndexUpdate(self.spec, "set")(full(shape_tuple(x), -1, np.int64), numbers, *arrays)
        return equal(Index(self.spec)(writer, *arrays), numbers)

    @property
    def name(self) -> str:
        return f"at_{self.mode}"


def _is_mask(entry) -> bool:
    if isinstance(entry, Variable):
        return entry.dtype == np.bool_
    return isinstance(entry, np.ndarray | list) and np.asarray(entry).dtype == np.bool_


def _normalize_index(x: Variable, index) -> tuple[tuple, list[Variable]]:
    if not isinstance(index, tuple):
        index = (index,)
    consumed = 0
    for entry in index:
        if entry is None or entry is Ellipsis:
            continue
        if _is_mask(entry):
            consumed += entry.ndim if isinstance(entry, Variable) else np.ndim(entry)
        else:
            consumed += 1
    if sum(e is Ellipsis for e in index) > 1:
        raise ShapeError("getitem: an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise ShapeError(
            f"getitem: too many indices for array: array is {x.ndim}-dimensional, but {consumed} were indexed"
        )
    spec: list = []
    arrays: list[Variable] = []
    for entry in index:
        if entry is Ellipsis:
            spec.extend([(None, None, None)] * (x.ndim - consumed))
        elif entry is None or isinstance(entry, slice):
            if isinstance(entry, slice):
                for bound in (entry.start, entry.stop, entry.step):
                    if not (bound is None or isinstance(bound, int | np.integer)):
                        raise ShapeError(f"getitem: slice bounds must be Python ints or None, got {entry}")
                if entry.step == 0:
                    raise ShapeError("getitem: slice step cannot be zero")
                entry = tuple(None if b is None else int(b) for b in (entry.start, entry.stop, entry.step))
            spec.append(entry)
        elif isinstance(entry, int | np.integer) and not isinstance(entry, bool):
            spec.append(int(entry))
        else:
            arr = as_tensor(entry)
            if arr.dtype.kind not in "iub":
                raise ShapeError(f"getitem: arrays used as indices must be of integer or boolean type, got {arr.type}")
            if arr.dtype.kind == "u":
                arr = arr.astype(np.int64)
            spec.append(ARRAY)
            arrays.append(arr)
    return tuple(spec), arrays


def getitem(x, index):
    """x[index] with NumPy semantics."""
    (x,) = as_operands(x)
    spec, arrays = _normalize_index(x, index)
    if all(e == (None, None, None) for e in spec):
        return x
    return Index(spec)(x, *arrays)


class AtIndexer:
    """`x.at[index]`: functional updates `.set(v)` and `.add(v)` (a new tensor; x is unchanged)."""

    def __init__(self, x: Variable):
        self._x = x

    def __getitem__(self, index) -> _AtUpdate:
        return _AtUpdate(self._x, index)


class _AtUpdate:
    def __init__(self, x: Variable, index):
        self._x, self._index = x, index

    def _apply(self, mode: str, value):
        x, v = as_operands(self._x, value)
        spec, arrays = _normalize_index(x, self._index)
        if v.dtype != x.dtype:
            v = v.astype(x.dtype)
        return IndexUpdate(spec, mode)(x, v, *arrays)

    def set(self, value):
        """x with x[index] = value."""
        return self._apply("set", value)

    def add(self, value):
        """x with value added at index (repeated indices accumulate)."""
        return self._apply("add", value)


def take_along_axis(arr, indices, axis: int):
    """Gather entries along `axis` at `indices` (numpy.take_along_axis)."""
    x, idx = as_operands(arr, indices)
    if idx.ndim != x.ndim:
        raise ShapeError(
            f"take_along_axis: indices of shape {idx.type.shape} and array of shape {x.type.shape} "
            "must have the same number of dimensions"
        )
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"take_along_axis: indices must be integers, got {idx.type}")

    axis = normalize_axis(axis, x.ndim, "take_along_axis")[0]
    index = []
    for d, n in enumerate(shape_tuple(x)):
        if d == axis:
            index.append(idx)
        else:
            shape = [1] * x.ndim
            shape[d] = -1
            index.append(reshape(arange(n), shape))
    return getitem(x, tuple(index))


# -- sorting ----------------------------------------------------------------------------------------
@final
@dataclass(frozen=True)
class Argsort(Op):
    """The indices that sort x along `axis`, ties in their original order.

    Always a stable sort: NumPy leaves the order of ties to its default quicksort,
    and a stable order is one of the orders it may give, the same on every backend.
    """

    axis: int = -1
    reads = READS_NOTHING

    def infer(self, x):
        return [TensorType(np.dtype(np.int64), x.type.shape)]

    def perform(self, x):
        return np.argsort(x, axis=self.axis, kind="stable").astype(np.int64, copy=False)

    def pullback(self, inputs, outputs, grads):
        return [zero_grad(inputs[0])]


def _sort_operand(x, axis, op: str) -> tuple[Variable, int]:
    """x (flattened when axis is None) and the non-negative axis to sort along."""
    (x,) = as_operands(x)
    if axis is None:
        return reshape(x, (-1,)), 0
    if not isinstance(axis, int | np.integer):
        raise ShapeError(f"{op}: axis must be an int or None, got {axis!r}")
    return x, normalize_axis(axis, x.ndim, op)[0]


@dims.along_axis
def argsort(x, axis=-1):
    """Indices that sort x along `axis` (of the flattened array when None); ties keep their order.

    >>> import stablegrad as sg
    >>> sg.argsort(sg.constant([3.0, 1.0, 2.0, 1.0])).eval()
    array([1, 3, 2, 0])
    """
    x, axis = _sort_operand(x, axis, "argsort")
    return Argsort(axis)(x)


@dims.along_axis
def sort(x, axis=-1):
    """x sorted along `axis` (flattened first when None), as numpy.sort.

    The entries are gathered in `argsort` order, so the gradient goes back to the
    entry each output came from (at ties: to the one the stable order puts there).

    >>> import stablegrad as sg
    >>> sg.sort(sg.constant([[3.0, 1.0], [0.0, 2.0]]), axis=0).eval()
    array([[0., 1.],
           [3., 2.]])
    """
    x, axis = _sort_operand(x, axis, "sort")
    return take_along_axis(x, Argsort(axis)(x), axis)


# -- gathering by position ------------------------------------------------------------------------
def take(a, indices, axis=None, mode: str = "raise"):
    """Entries of `a` at `indices` along `axis` (of the flattened array when None), as numpy.take.

    `mode` as NumPy's: "raise" (an index out of range is an error; negative ones count from
    the end), "wrap" (indices modulo the extent) or "clip" (clipped to [0, extent - 1], so a
    negative index is 0).

    >>> import stablegrad as sg
    >>> sg.take(sg.constant([[1.0, 2.0], [3.0, 4.0]]), [1, 0, 1], axis=1).eval()
    array([[2., 1., 2.],
           [4., 3., 4.]])
    >>> sg.take(sg.constant([1.0, 2.0, 3.0]), [-1, 3, 5], mode="clip").eval()
    array([1., 3., 3.])
    """
    if mode not in ("raise", "wrap", "clip"):
        raise ShapeError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    (x,) = as_operands(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if not isinstance(axis, int | np.integer):
        raise ShapeError(f"take: axis must be an int or None, got {axis!r}")
    axis = normalize_axis(axis, x.ndim, "take")[0]
    idx = indices if isinstance(indices, Variable) else np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"take: indices must be integers, got dtype {idx.dtype}")
    if mode != "raise":
        n = shape_tuple(x)[axis]
        if not isinstance(idx, Variable) and isinstance(n, int):
            idx = np.mod(idx, n) if mode == "wrap" else np.clip(idx, 0, n - 1)
        else:
            i = as_tensor(idx)
            idx = i % n if mode == "wrap" else minimum(maximum(i, 0), n - 1)
    index: Variable | np.ndarray | int = idx
    if not isinstance(idx, Variable) and idx.ndim == 0:
        index = int(idx)  # a scalar index drops the axis, as numpy.take's does
    return getitem(x, (slice(None),) * axis + (index,))


def one_hot(x, num_classes, dtype="float64", axis: int = -1):
    """One-hot encoding of integer labels: a new axis of length `num_classes` (jax.nn.one_hot).

    Labels outside [0, num_classes) give all-zero rows, as in JAX.

    >>> import stablegrad as sg
    >>> sg.one_hot(sg.constant([0, 2, 5]), 3).eval()
    array([[1., 0., 0.],
           [0., 0., 1.],
           [0., 0., 0.]])
    """
    (labels,) = as_operands(x)
    if labels.dtype.kind not in "iu":
        raise ShapeError(f"one_hot: labels must be integers, got {labels.type}")
    axis = normalize_axis(axis, labels.ndim + 1, "one_hot")[0]
    shape = [1] * (labels.ndim + 1)
    shape[axis] = -1
    classes = reshape(arange(num_classes), shape)
    return astype(equal(expand_dims(labels, axis), classes), dtype)


# -- diagonals and repeats ---------------------------------------------------------------------------
def diag(v, k: int = 0):
    """The k-th diagonal of a 2-D x, or a 2-D matrix with a 1-D x on its k-th diagonal (numpy.diag).

    >>> import stablegrad as sg
    >>> sg.diag(sg.constant([1.0, 2.0]), k=1).eval()
    array([[0., 1., 0.],
           [0., 0., 2.],
           [0., 0., 0.]])
    """
    (x,) = as_operands(v)
    if not isinstance(k, int | np.integer):
        raise ShapeError(f"diag: k must be an int, got {k!r}")
    k = int(k)
    row0, col0 = max(-k, 0), max(k, 0)  # where the diagonal starts
    if x.ndim == 1:
        n = shape_tuple(x)[0] + abs(k)
        rows = arange(shape_tuple(x)[0]) + row0
        out = full((n, n), np.zeros((), x.dtype))
        return out.at[rows, rows + (col0 - row0)].set(x)
    if x.ndim == 2:
        m, n = shape_tuple(x)
        length = _nonnegative_min(m - row0, n - col0)
        rows = arange(length) + row0
        return getitem(x, (rows, rows + (col0 - row0)))
    raise ShapeError(f"diag: input must be 1-d or 2-d, got shape {x.type.shape}")


def _nonnegative_min(a, b):
    """max(min(a, b), 0) of extents: an int when both are known, else a 0-d int64 tensor."""
    if isinstance(a, int) and isinstance(b, int):
        return max(min(a, b), 0)
    return maximum(minimum(a, b), 0)


def repeat(a, repeats, axis=None):
    """Each entry repeated `repeats` times along `axis` (flattened first when None), as numpy.repeat.

    `repeats` is an int, or a sequence of ints (one per entry along the axis, whose
    extent must then be known).

    >>> import stablegrad as sg
    >>> sg.repeat(sg.constant([[1, 2], [3, 4]]), [1, 2], axis=0).eval()
    array([[1, 2],
           [3, 4],
           [3, 4]])
    """
    (x,) = as_operands(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if not isinstance(axis, int | np.integer):
        raise ShapeError(f"repeat: axis must be an int or None, got {axis!r}")
    axis = normalize_axis(axis, x.ndim, "repeat")[0]
    counts = np.asarray(repeats)
    if counts.size == 0:  # [] for an empty axis: NumPy reads it as ints
        counts = counts.astype(np.int64)
    if counts.dtype.kind not in "iu" or counts.ndim > 1 or np.any(counts < 0):
        raise ShapeError(f"repeat: repeats must be non-negative ints, got {repeats!r}")
    dims = shape_tuple(x)
    if counts.ndim == 0 or counts.size == 1:
        # every entry the same number of times: a broadcast along a new axis, merged into `axis`
        r = int(counts.reshape(()))
        wide = expand_dims(x, axis + 1)
        target = (*dims[: axis + 1], r, *dims[axis + 1 :])
        return reshape(broadcast_to(wide, target), (*dims[:axis], dims[axis] * r, *dims[axis + 1 :]))
    if x.type.shape[axis] != counts.size:
        raise ShapeError(
            f"repeat: {counts.size} repeats for axis {axis} of extent "
            f"{'unknown' if x.type.shape[axis] is None else x.type.shape[axis]} (shape {x.type.shape})"
        )
    positions = np.repeat(np.arange(counts.size), counts)
    return getitem(x, (slice(None),) * axis + (positions,))
