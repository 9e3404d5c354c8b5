"""Shared pieces of the op tests: domain-aware input generators, evaluation, comparisons.

A *domain* is a function `(rng, shape, dtype) -> ndarray` that draws inputs where an op
is smooth (away from kinks, inside its domain), in the spirit of JAX's `rand_*` factories.
Shapes come from hypothesis; values from a NumPy generator seeded by hypothesis, so a
failing example replays exactly.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.graph.basic import Zero
from stablegrad.testing import check_grads

Domain = Callable[[np.random.Generator, tuple, np.dtype], np.ndarray]

FLOATS = ("float64", "float32")
INTS = ("int64", "int32")

seeds = st.integers(0, 2**32 - 1)
float_dtypes = st.sampled_from(FLOATS)


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 3):
    """Array shapes, size-0 and size-1 extents included."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable(n: int, max_dims: int = 3, max_side: int = 3):
    """n mutually broadcastable shapes (size-0 and size-1 extents included)."""
    return hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side)


# -- domains --------------------------------------------------------------------------------------
def _cast(values, dtype) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def uniform(lo: float, hi: float) -> Domain:
    """Uniform on [lo, hi]."""
    return lambda rng, shape, dtype: _cast(rng.uniform(lo, hi, shape), dtype)


def two_sided(lo: float, hi: float) -> Domain:
    """±U(lo, hi): away from zero by at least lo."""
    return lambda rng, shape, dtype: _cast(rng.choice([-1.0, 1.0], shape) * rng.uniform(lo, hi, shape), dtype)


def off_integers(lo: int = -3, hi: int = 3, margin: float = 0.1) -> Domain:
    """n + u with u in [margin, 1/2 - margin] or [1/2 + margin, 1 - margin]: away from integers and halves."""

    def draw(rng, shape, dtype):
        frac = rng.uniform(margin, 0.5 - margin, shape) + rng.choice([0.0, 0.5], shape)
        return _cast(rng.integers(lo, hi, shape, endpoint=True) + frac, dtype)

    return draw


def lattice(parity: int, spread: float = 0.2) -> Domain:
    """Even (parity 0) or odd (parity 1) integers plus U(-spread, spread): two such never tie."""

    def draw(rng, shape, dtype):
        base = 2 * rng.integers(-2, 2, shape, endpoint=True) + parity
        return _cast(base + rng.uniform(-spread, spread, shape), dtype)

    return draw


def small_integers(lo: int = -2, hi: int = 2) -> Domain:
    """Integers (as the requested dtype): plenty of ties, for comparisons."""
    return lambda rng, shape, dtype: _cast(rng.integers(lo, hi, shape, endpoint=True), dtype)


def nonzero_integers(lo: int = 1, hi: int = 4) -> Domain:
    return lambda rng, shape, dtype: _cast(
        rng.choice([-1, 1], shape) * rng.integers(lo, hi, shape, endpoint=True), dtype
    )


def booleans() -> Domain:
    return lambda rng, shape, dtype: rng.random(shape) < 0.5


def specials() -> Domain:
    """Finite values mixed with nan and ±inf."""
    return lambda rng, shape, dtype: _cast(rng.choice([np.nan, np.inf, -np.inf, 0.0, -1.5, 2.5], shape), dtype)


def distinct(rng: np.random.Generator, shape: tuple, dtype="float64", gap: float = 0.5) -> np.ndarray:
    """Entries pairwise at least `gap` apart (no ties for max/min/sort)."""
    n = int(np.prod(shape))
    values = (rng.permutation(n) - n / 2) * gap + rng.uniform(-gap / 5, gap / 5, n)
    return values.reshape(shape).astype(dtype)


# -- evaluation -----------------------------------------------------------------------------------
def symbols(arrays: Sequence[np.ndarray], symbolic: bool = False) -> list[sg.Variable]:
    """Symbolic inputs typed like `arrays`; with `symbolic`, every extent is unknown (None)."""
    return [
        sg.tensor(f"a{i}", shape=(None,) * a.ndim if symbolic else a.shape, dtype=a.dtype) for i, a in enumerate(arrays)
    ]


def evaluate(fn: Callable, arrays: Sequence[np.ndarray], symbolic: bool = False):
    """(output variable, its compiled value) of fn on symbolic inputs fed with `arrays`."""
    arrays = [np.asarray(a) for a in arrays]
    xs = symbols(arrays, symbolic)
    out = fn(*xs)
    return out, sg.function(xs, out)(*arrays)


def numpy_value(ref: Callable, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The reference result; NumPy's warnings (mean of an empty slice, ...) are not failures here."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(ref(*arrays))


def assert_same(out: sg.Variable, value: np.ndarray, expected: np.ndarray, symbolic: bool, rtol=1e-12, atol=0.0):
    """Value, dtype, run-time shape and static shape of a result agree with NumPy's."""
    expected = np.asarray(expected)
    assert out.dtype == expected.dtype, f"static dtype {out.dtype} != NumPy's {expected.dtype}"
    assert value.dtype == expected.dtype, f"run-time dtype {value.dtype} != NumPy's {expected.dtype}"
    assert value.shape == expected.shape, f"shape {value.shape} != NumPy's {expected.shape}"
    assert_static_shape(out, expected.shape, exact=not symbolic)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(value, expected)


def assert_static_shape(out: sg.Variable, shape: tuple, exact: bool) -> None:
    static = out.type.shape
    assert len(static) == len(shape), f"static rank of {static} != {shape}"
    if exact:
        assert static == tuple(shape), f"static shape {static} != {shape}"
    else:
        assert all(s is None or s == n for s, n in zip(static, shape)), f"static shape {static} contradicts {shape}"


def assert_zero_pullback(out: sg.Variable) -> None:
    """The op that made `out` returns a typed zero for every float operand."""
    node = out.owner
    assert node is not None
    grads = node.op.pullback(node.inputs, node.outputs, [sg.ones_like(o, dtype="float64") for o in node.outputs])
    for v, g in zip(node.inputs, grads):
        assert isinstance(g, Zero), f"{node.op.name}: pullback for {v} is {g!r}, not a Zero"
        assert g.type == v.type


def assert_grad_exactly_zero(fn: Callable, arrays: Sequence[np.ndarray], symbolic: bool = False) -> None:
    """grad of sum(w * fn(x)) is exactly zero (piecewise-constant ops), shaped and typed like x."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    xs = symbols(arrays, symbolic)
    out = fn(*xs)
    cost = sg.sum(sg.astype(out, "float64") * 1.5)
    grads = sg.function(xs, sg.grad(cost, xs, disconnected="zero"))(*arrays)
    for g, a in zip(grads, arrays):
        assert g.shape == a.shape and g.dtype == a.dtype
        assert np.all(g == 0), f"gradient of a piecewise-constant op is not zero: {g}"


# -- elementwise spec tables ------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """One elementwise function under test.

    `grad` says how its pullback is checked: "fd" against finite differences at first
    and second order, "zero" as exactly zero (piecewise constant), "none" for boolean
    outputs (the pullback must hand back typed zeros).  `diff[i]` False marks an operand
    that is not differentiated (a condition), held constant in the gradient check.
    """

    name: str
    fn: Callable
    ref: Callable
    domains: tuple[Domain, ...]
    ops: tuple[type, ...]
    grad: str = "fd"
    dtypes: tuple[str, ...] = FLOATS
    int_domains: tuple[Domain, ...] | None = None
    diff: tuple[bool, ...] | None = None
    grad_rtol: float = 1e-6

    @property
    def nargs(self) -> int:
        return len(self.domains)

    def __str__(self) -> str:
        return self.name


def draw_inputs(spec: Spec, shapes_: Sequence[tuple], seed: int, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    domains = spec.int_domains if np.dtype(dtype).kind in "iu" and spec.int_domains else spec.domains
    return [domain(rng, tuple(s), np.dtype(dtype)) for domain, s in zip(domains, shapes_)]


def check_value(spec: Spec, shapes_: Sequence[tuple], seed: int, dtype: str, symbolic: bool) -> None:
    """Value, dtype and shapes (static and run-time) agree with the NumPy/SciPy reference."""
    arrays = draw_inputs(spec, shapes_, seed, dtype)
    out, value = evaluate(spec.fn, arrays, symbolic)
    rtol = 1e-5 if value.dtype == np.float32 else 1e-12
    assert_same(out, value, numpy_value(spec.ref, arrays), symbolic, rtol=rtol)


def check_pullback(spec: Spec, shapes_: Sequence[tuple], seed: int, symbolic: bool) -> None:
    """The pullback at first and second order (or its exact zero) in float64."""
    arrays = draw_inputs(spec, shapes_, seed, "float64")
    diff = spec.diff or (True,) * spec.nargs
    if spec.grad == "fd":
        where = [i for i, d in enumerate(diff) if d]

        def partial(*vs):
            full: list = [sg.constant(a) for a in arrays]
            for i, v in zip(where, vs):
                full[i] = v
            return spec.fn(*full)

        check_grads(partial, [arrays[i] for i in where], order=2, symbolic_shapes=symbolic, rtol=spec.grad_rtol)
    elif spec.grad == "zero":
        assert_grad_exactly_zero(spec.fn, arrays, symbolic)
        assert_zero_pullback(evaluate(spec.fn, arrays, symbolic)[0])
    else:
        assert_zero_pullback(evaluate(spec.fn, arrays, symbolic)[0])


def check_float32_pullback(spec: Spec, shapes_: Sequence[tuple], seed: int) -> None:
    """Gradients of float32 inputs are float32 and agree with the float64 gradient at the same point."""
    arrays = [a.astype(np.float32) for a in draw_inputs(spec, shapes_, seed, "float64")]
    diff = spec.diff or (True,) * spec.nargs
    results = {}
    for dtype in ("float32", "float64"):
        typed = [a.astype(dtype) if d else a for a, d in zip(arrays, diff)]
        xs = symbols(typed)
        out = spec.fn(*xs)
        w = np.random.default_rng(seed).standard_normal(np.shape(numpy_value(spec.ref, typed))).astype(out.dtype)
        wrt = [x for x, d in zip(xs, diff) if d]
        results[dtype] = sg.function(xs, sg.grad(sg.sum(out * w), wrt))(*typed)
    for g32, g64 in zip(results["float32"], results["float64"]):
        assert g32.dtype == np.float32, f"float32 input got a {g32.dtype} gradient"
        np.testing.assert_allclose(g32, g64, rtol=2e-4, atol=2e-5)


# -- example budgets (the conftest profile's 25 is for the cheap checks; a gradient check at
# order 2 compiles four functions, so these keep tests/ops well inside its time budget).
# On another backend (STABLEGRAD_TEST_BACKEND, see conftest) every function is an XLA
# compilation, and the NumPy run has already covered the numerics: a fifth as many. --
BACKEND = os.environ.get("STABLEGRAD_TEST_BACKEND") or "numpy"
_OTHER_BACKEND = BACKEND != "numpy"


def as_the_backend_sees(a: np.ndarray) -> np.ndarray:
    """`a` as the backend under test computes with it: XLA treats subnormal inputs as 0."""
    if BACKEND != "jax":
        return a
    return np.where(np.abs(a) < np.finfo(a.dtype).tiny, a * 0, a)


def _examples(n: int) -> settings:
    return settings(max_examples=max(2, n // 5) if _OTHER_BACKEND else n)


value_examples = _examples(15)
pullback_examples = _examples(10)
float32_examples = _examples(5)
