"""Variables, constants, apply nodes and the abstract Op.

A graph is immutable once built: an `Apply` node records an op, its input variables
and its output variables; a `Variable` knows the node that produced it (`owner`).
Rewrites and compilation build new graphs rather than editing these in place.
"""

from __future__ import annotations

import functools
import gc
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from ..errors import GradientError, InputError, StableGradError, user_location
from . import hooks, names, numpy_protocol
from .types import TensorType

_ids = itertools.count()


class Variable:
    """A symbolic tensor: its type, and the node (if any) that computes it.

    Arithmetic operators, comparisons, indexing and the usual NumPy methods build
    graph, so `sg.exp(x) * w + 1` reads as it would with arrays.
    """

    #: `derivation`: for a gradient `grad` took of a recognised formula, how to take it of the
    #: formula as written instead (what `function(..., recognition=False)` computes); else None
    #: `dims`: one name per axis, or None (positional); see `graph.names`
    __slots__ = ("derivation", "dims", "id", "index", "name", "owner", "type")
    # NumPy hands np.exp(x), np.sum(x), ndarray + x to the tensor, which answers with the sg. function
    __array_ufunc__ = numpy_protocol.array_ufunc
    __array_function__ = numpy_protocol.array_function
    __array__ = numpy_protocol.no_array
    __array_namespace__ = numpy_protocol.no_namespace

    def __init__(self, type: TensorType, owner: Apply | None = None, index: int = 0, name: str | None = None):
        self.type = type
        self.owner = owner
        self.index = index
        self.name = name
        self.id = next(_ids)
        self.derivation: tuple[Any, int] | None = None
        self.dims: names.Dims | None = None

    # -- type shortcuts -------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return self.type.ndim

    @property
    def static_shape(self) -> tuple[int | None, ...]:
        return self.type.shape

    @property
    def shape(self) -> tuple:
        """Known extents as ints, unknown ones as symbolic int64 scalars."""
        return _ops().shape_tuple(self)

    @property
    def size(self):
        return _ops().size(self)

    @property
    def location(self) -> tuple[str, int] | None:
        return self.owner.location if self.owner is not None else None

    def __repr__(self) -> str:
        label = self.name or (self.owner.op.name if self.owner is not None else "input")
        if self.dims is None:
            return f"<{label}: {self.type}>"
        return f"<{label}: {self.dtype.name}[{names.describe(self.dims, self.type.shape)}]>"

    def __hash__(self) -> int:
        return self.id

    def __eq__(self, other):  # elementwise, as in NumPy; hashing stays by identity
        return _ops().equal(self, other)

    def __ne__(self, other):
        return _ops().not_equal(self, other)

    def __float__(self):
        raise StableGradError(
            f"float({self}): a symbolic tensor has no value yet; compute it with .eval() or sg.function "
            "(math.* functions need numbers: use the sg. function of the same name)"
        )

    __int__ = __complex__ = __float__

    def __bool__(self):
        raise StableGradError(
            "a symbolic Variable has no truth value; use sg.where(...) or sg.any/sg.all instead of `if`, `and`, `or`"
        )

    def __len__(self) -> int:
        n = self.type.shape[0] if self.ndim else None
        if n is None:
            raise StableGradError(f"len() of {self!r}: the first extent is not known statically")
        return n

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # -- operators --------------------------------------------------------------------
    def __add__(self, other):
        return _ops().add(self, other)

    def __radd__(self, other):
        return _ops().add(other, self)

    def __sub__(self, other):
        return _ops().subtract(self, other)

    def __rsub__(self, other):
        return _ops().subtract(other, self)

    def __mul__(self, other):
        return _ops().multiply(self, other)

    def __rmul__(self, other):
        return _ops().multiply(other, self)

    def __truediv__(self, other):
        return _ops().divide(self, other)

    def __rtruediv__(self, other):
        return _ops().divide(other, self)

    def __floordiv__(self, other):
        return _ops().floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _ops().floor_divide(other, self)

    def __mod__(self, other):
        return _ops().mod(self, other)

    def __rmod__(self, other):
        return _ops().mod(other, self)

    def __pow__(self, other):
        return _ops().power(self, other)

    def __rpow__(self, other):
        return _ops().power(other, self)

    def __matmul__(self, other):
        return _ops().matmul(self, other)

    def __rmatmul__(self, other):
        return _ops().matmul(other, self)

    def __neg__(self):
        return _ops().negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ops().abs(self)

    def __invert__(self):
        return _ops().logical_not(self) if self.dtype == np.bool_ else _ops().invert(self)

    def __and__(self, other):
        return _ops().logical_and(self, other)

    def __rand__(self, other):
        return _ops().logical_and(other, self)

    def __or__(self, other):
        return _ops().logical_or(self, other)

    def __ror__(self, other):
        return _ops().logical_or(other, self)

    def __lt__(self, other):
        return _ops().less(self, other)

    def __le__(self, other):
        return _ops().less_equal(self, other)

    def __gt__(self, other):
        return _ops().greater(self, other)

    def __ge__(self, other):
        return _ops().greater_equal(self, other)

    def __getitem__(self, index):
        return _ops().getitem(self, index)

    @property
    def at(self):
        """`x.at[idx].set(v)` / `.add(v)`: a copy of x with x[idx] replaced or incremented."""
        return _ops().at(self)

    # -- NumPy-style methods ----------------------------------------------------------
    @property
    def T(self):
        return _ops().transpose(self)

    def transpose(self, *axes):
        """Permute the axes: by position as numpy (`x.transpose(1, 0)`), or by name (`x.transpose("class", "batch")`)."""
        if axes and all(isinstance(a, str) for a in axes):
            return _ops().transpose_dims(self, axes)
        single = len(axes) == 1 and not isinstance(axes[0], int | np.integer)  # x.transpose((1, 0)), not x.transpose(0)
        return _ops().transpose(self, axes[0] if single else (axes or None))

    def reshape(self, *shape):
        return _ops().reshape(self, shape[0] if len(shape) == 1 else shape)

    def astype(self, dtype):
        return _ops().astype(self, dtype)

    def sum(self, axis=None, keepdims=False, *, dim=None):
        return _ops().sum(self, axis=axis, keepdims=keepdims, dim=dim)

    def mean(self, axis=None, keepdims=False, *, dim=None):
        return _ops().mean(self, axis=axis, keepdims=keepdims, dim=dim)

    def max(self, axis=None, keepdims=False, *, dim=None):
        return _ops().max(self, axis=axis, keepdims=keepdims, dim=dim)

    def min(self, axis=None, keepdims=False, *, dim=None):
        return _ops().min(self, axis=axis, keepdims=keepdims, dim=dim)

    def prod(self, axis=None, keepdims=False, *, dim=None):
        return _ops().prod(self, axis=axis, keepdims=keepdims, dim=dim)

    def var(self, axis=None, ddof=0, keepdims=False, *, dim=None):
        return _ops().var(self, axis=axis, ddof=ddof, keepdims=keepdims, dim=dim)

    def std(self, axis=None, ddof=0, keepdims=False, *, dim=None):
        return _ops().std(self, axis=axis, ddof=ddof, keepdims=keepdims, dim=dim)

    def argmax(self, axis=None, keepdims=False, *, dim=None):
        return _ops().argmax(self, axis=axis, keepdims=keepdims, dim=dim)

    def argmin(self, axis=None, keepdims=False, *, dim=None):
        return _ops().argmin(self, axis=axis, keepdims=keepdims, dim=dim)

    def cumsum(self, axis=None, dtype=None, *, dim=None):
        return _ops().cumsum(self, axis=axis, dtype=dtype, dim=dim)

    def cumprod(self, axis=None, dtype=None, *, dim=None):
        return _ops().cumprod(self, axis=axis, dtype=dtype, dim=dim)

    def ravel(self):
        return _ops().ravel(self)

    def flatten(self):
        """A 1-d copy (graph values are never mutated, so the same as ravel)."""
        return _ops().ravel(self)

    def swapaxes(self, axis1, axis2):
        return _ops().swapaxes(self, axis1, axis2)

    def clip(self, min=None, max=None):
        return _ops().clip(self, min, max)

    def dot(self, other):
        return _ops().dot(self, other)

    # -- named dimensions (xarray's names) ---------------------------------------------
    def rename(self, mapping: dict | None = None, **renames):
        """The same tensor with dims renamed: `x.rename({"class": "k"})` or `x.rename(batch="n")`;
        on a positional tensor, `x.rename(("batch", "class"))` names every axis."""
        return _ops().rename(self, mapping, renames)

    def expand_dims(self, dim: str, axis: int = 0):
        """A new length-1 axis called `dim`, at position `axis`."""
        return _ops().expand_dim(self, dim, axis)

    def isel(self, indexers: dict | None = None, **by_name):
        """Index by dim name: `x.isel(batch=0)`, `x.isel({"time": slice(1, None)})`."""
        return _ops().isel(self, {**(indexers or {}), **by_name})

    def eval(self, inputs: dict | None = None):
        """Compile and run this variable; `inputs` maps input variables to values."""
        inputs = inputs or {}
        given = {v.id for v in inputs}
        missing = [v for v in graph_inputs([self]) if v.id not in given]
        if missing:
            names = ", ".join(v.name or "an unnamed input" for v in missing)
            raise InputError(f"eval: the value depends on {names}; give it, e.g. y.eval({{x: np.ones(3)}})")
        return hooks.function.get()(list(inputs), self)(*inputs.values())


def _ops() -> hooks.TensorFunctions:
    """The ops layer's functions behind the operators and methods (registered by `stablegrad.ops`)."""
    return hooks.tensor_functions.get()


class Constant(Variable):
    """A variable with a fixed value (a read-only ndarray)."""

    __slots__ = ("data",)

    def __init__(self, data, name: str | None = None):
        array = np.array(data)  # a private copy, so later edits by the caller cannot leak in
        array.flags.writeable = False
        super().__init__(TensorType(array.dtype, array.shape), None, 0, name)
        self.data = array

    def __repr__(self) -> str:
        if self.data.size <= 4:
            return f"Constant({self.data.tolist()!r}, {self.type.dtype.name})"
        return f"Constant({self.type})"


def constant(value, dtype=None, name: str | None = None) -> Constant:
    """A constant tensor.

    >>> import stablegrad as sg
    >>> sg.constant([1.0, 2.0]).sum().eval()
    array(3.)
    """
    return Constant(np.asarray(value, dtype=dtype), name=name)


# -- ops ------------------------------------------------------------------------------------
ALL: Literal["all"] = "all"


@dataclass(frozen=True, slots=True)
class Reads:
    """Which operands and outputs an op's pullback uses.

    A contract: the pullback may reference only these (plus the *shapes* of
    anything), a test hands it poison for the rest, and the executor can free an
    unread forward value as soon as the forward pass is done with it.
    """

    inputs: tuple[int, ...] | Literal["all"] = ALL
    outputs: tuple[int, ...] | Literal["all"] = ()

    def reads_input(self, i: int) -> bool:
        return self.inputs == ALL or i in self.inputs

    def reads_output(self, i: int) -> bool:
        return self.outputs == ALL or i in self.outputs


READS_INPUTS = Reads(ALL, ())
READS_OUTPUTS = Reads((), ALL)
READS_NOTHING = Reads((), ())


class Zero:
    """A gradient known to be zero, with the type a real gradient would have.

    Pullbacks return it for operands the output does not vary with (`floor`, the
    index of a gather, ...); `grad` materialises it only if the user asks for it.
    """

    __slots__ = ("type",)

    def __init__(self, type: TensorType):
        self.type = type

    def __repr__(self) -> str:
        return f"Zero({self.type})"


@functools.cache  # an op's name is asked for on every node built (errors name the op)
def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class Op:
    """An operation: a type rule, a NumPy implementation and a derivative rule.

    Subclasses are frozen dataclasses whose fields are the op's parameters, so two
    ops with equal parameters are equal (that is what graph merging relies on).
    """

    reads: ClassVar[Reads] = READS_INPUTS
    #: number of outputs of every node of this op
    nout: ClassVar[int] = 1

    #: the NumPy/SciPy name of the function this op implements, where the class name does not say it
    public_name: ClassVar[str | None] = None

    @property
    def name(self) -> str:
        return self.public_name or _snake(type(self).__name__)

    def infer(self, *inputs: Variable) -> list[TensorType]:
        """The output types for these inputs; raises a StableGradError on misuse."""
        raise NotImplementedError

    def perform(self, *arrays: np.ndarray) -> Any:
        """NumPy reference semantics: one array, or a tuple of `nout` arrays."""
        raise NotImplementedError

    def perform_unread(self, unread: frozenset[int]) -> Callable | None:
        """A `perform` that may skip the outputs numbered in `unread` (nobody reads them),
        or None where skipping saves nothing (the default)."""
        return None

    def pullback(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Sequence[Variable]):
        """Gradients w.r.t. the inputs (graph, or `Zero`) given the output cotangents."""
        raise GradientError(f"{self.name}: has no gradient")

    def pushforward(self, inputs: Sequence[Variable], outputs: Sequence[Variable], tangents: Sequence):
        """Tangents of the outputs (graph, or None for zero) given the inputs' (None for zero).

        Forward mode's rule, next to `pullback`.  This default transposes the pullback, which
        is linear in its cotangents (`autodiff.transposed_pullback`, through the
        `pushforward` hook); families with a cheaper rule (entrywise, linear) define their own.
        """
        return hooks.pushforward.get()(self, inputs, outputs, tangents)

    def __call__(self, *inputs: Variable):
        node = Apply(self, inputs, self.infer(*inputs))
        return node.outputs[0] if self.nout == 1 else node.outputs

    def __str__(self) -> str:
        return self.name


class Apply:
    """One application of an op to input variables; owns its output variables."""

    __slots__ = ("inputs", "location", "op", "outputs", "settled")

    def __init__(
        self,
        op: Op,
        inputs: Sequence[Variable],
        output_types: Iterable[TensorType],
        location: tuple[str, int] | None = None,
    ):
        self.op = op
        self.inputs = tuple(inputs)
        self.outputs = tuple([Variable(t, self, i) for i, t in enumerate(output_types)])
        self.location = location if location is not None else user_location()
        #: rule sets under which this node came out of a rewrite pass unchanged (see rewrite.engine)
        self.settled: tuple = ()

    def __repr__(self) -> str:
        return f"Apply({self.op}, {list(self.inputs)})"


def paused_gc(fn):
    """Decorator: pause the cyclic garbage collector while `fn` builds a large graph.

    Building a graph allocates many long-lived container objects (a Variable and its
    Apply refer to each other), and every few hundred allocations the collector
    rescans the young ones, now and then the whole growing graph: about 40% of the
    time `grad` and `function` take on a 50,000-node graph.  Nothing built here is
    garbage until the build is over; what the rewrites drop is collected afterwards.
    """

    @functools.wraps(fn)
    def paused(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


# -- graph walks ------------------------------------------------------------------------------
def toposort(
    outputs: Iterable[Variable], stop: Iterable[Variable] = (), stop_ids: set[int] | None = None
) -> list[Apply]:
    """Nodes needed for `outputs`, each after the nodes computing its inputs.

    Iterative (no recursion limit on deep graphs) and linear in graph size;
    `stop` variables (or those whose ids are in `stop_ids`) are treated as leaves.
    """
    stopped = {v.id for v in stop} if stop_ids is None else stop_ids
    order: list[Apply] = []
    seen: set[int] = set()
    for out in outputs:
        if out.owner is None or out.id in stopped or id(out.owner) in seen:
            continue
        # each stack entry holds an iterator over the node's inputs, so a node resumes where it
        # left off after a parent is done (one entry per node, not one per edge: ~2x faster)
        stack = [(out.owner, iter(out.owner.inputs))]
        seen.add(id(out.owner))
        while stack:
            node, pending = stack[-1]
            for v in pending:
                parent = v.owner
                if parent is not None and id(parent) not in seen and v.id not in stopped:
                    seen.add(id(parent))
                    stack.append((parent, iter(parent.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def ancestors(outputs: Iterable[Variable], stop: Iterable[Variable] = ()) -> list[Variable]:
    """Every variable `outputs` depend on (leaves and intermediates), outputs included."""
    result: dict[int, Variable] = {}
    nodes = toposort(outputs, stop)
    for node in nodes:
        for v in node.inputs + node.outputs:
            result[v.id] = v
    for v in outputs:
        result[v.id] = v
    return list(result.values())


def substitute(outputs: Sequence[Variable], replacements: dict[int, Variable]) -> list[Variable]:
    """A copy of the graph of `outputs` with variables replaced (keyed by the old variable's id).

    Only nodes downstream of a replaced variable are copied; their types are
    inferred afresh, so a body written for unknown shapes gets the actual ones.
    """
    mapping = dict(replacements)
    for node in toposort(outputs, stop_ids=set(mapping)):
        new_inputs = [mapping.get(v.id, v) for v in node.inputs]
        if all(a is b for a, b in zip(new_inputs, node.inputs)):
            continue
        clone = Apply(node.op, new_inputs, node.op.infer(*new_inputs), node.location)
        for old, new in zip(node.outputs, clone.outputs):
            mapping[old.id] = new
    return [mapping.get(o.id, o) for o in outputs]


def graph_inputs(outputs: Iterable[Variable]) -> list[Variable]:
    """The non-constant leaves of the graph of `outputs` (in the order `ancestors` lists them)."""
    outputs = list(outputs)
    leaves: dict[int, Variable] = {}
    for node in toposort(outputs):  # only leaves are kept: no dict of every variable, as `ancestors` builds
        for v in node.inputs:
            if v.owner is None and not isinstance(v, Constant):
                leaves.setdefault(v.id, v)
    for v in outputs:
        if v.owner is None and not isinstance(v, Constant):
            leaves.setdefault(v.id, v)
    return list(leaves.values())
