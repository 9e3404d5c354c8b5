"""Shared helpers for the stable-family tests: an mpmath reference, eager evaluation, reads checks.

The reference evaluates a function on object arrays of mpmath numbers at 60
digits; its directional derivatives are central differences at that precision,
so they are exact to far beyond float64.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import mpmath as mp
import numpy as np

import stablegrad as sg
from stablegrad.graph.basic import Variable, Zero

DPS = 340
mp.mp.dps = DPS  # the reference is evaluated at 340 digits throughout (log(exp(1e-300)) must keep its digits)
_exp = np.frompyfunc(lambda v: mp.exp(v), 1, 1)
_log = np.frompyfunc(lambda v: mp.log(v) if v >= 0 else mp.nan, 1, 1)
_log1p = np.frompyfunc(lambda v: mp.log1p(v) if v >= -1 else mp.nan, 1, 1)


def mp_array(a) -> np.ndarray:
    """An object array of mpf with the same (exact) values."""
    a = np.asarray(a, dtype=np.float64)
    return np.array([mp.mpf(float(v)) for v in a.ravel()], dtype=object).reshape(a.shape)


def mexp(x):
    return _exp(x)


def mlog(x):
    return _log(x)


def mlog1p(x):
    return _log1p(x)


def ulps_off(got, expected, dtype) -> np.ndarray:
    """|got - expected| in ulps of `dtype` at expected (at its smallest normal below that)."""
    info = np.finfo(dtype)
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return np.abs(got - expected) / np.maximum(np.abs(expected), float(info.tiny)) / float(info.eps)


def to_float(a, dtype=np.float64) -> np.ndarray:
    a = np.asarray(a, dtype=object)
    return np.array([float(v) for v in a.ravel()], dtype=np.float64).reshape(a.shape).astype(dtype)


def mp_lse(x, axis=-1, keepdims=False):
    return mlog(np.sum(mexp(x), axis=axis, keepdims=keepdims))


def mp_softmax(x, axis=-1):
    e = mexp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def mp_log_softmax(x, axis=-1):
    return x - mp_lse(x, axis=axis, keepdims=True)


# -- derivatives of a scalar functional by high-precision differences ------------------------------
def _functional(fn, args, w, dps):
    def at(t, directions):
        with mp.workdps(dps):
            moved = [a + t * d for a, d in zip(args, directions)]
            return np.sum(np.asarray(fn(*moved), dtype=object) * w)

    return at


def mp_directional(fn, args, w, directions, dps=DPS) -> float:
    """d/dt sum(w * fn(args + t * directions)) at t = 0 (dps: 60 suffices without cancellation in fn)."""
    with mp.workdps(dps):
        args, w = [mp_array(a) for a in args], mp_array(w)
        directions = [mp_array(d) for d in directions]
        at = _functional(fn, args, w, dps)
        t = mp.mpf(10) ** -25
        return float((at(t, directions) - at(-t, directions)) / (2 * t))


def mp_second_directional(fn, args, w, directions, dps=DPS) -> float:
    """d²/dt² sum(w * fn(args + t * directions)) at t = 0."""
    with mp.workdps(dps):
        args, w = [mp_array(a) for a in args], mp_array(w)
        directions = [mp_array(d) for d in directions]
        at = _functional(fn, args, w, dps)
        t = mp.mpf(10) ** -15
        return float((at(t, directions) - 2 * at(0, directions) + at(-t, directions)) / t**2)


# -- the system under test -------------------------------------------------------------------------
@functools.cache
def compiled(build: Callable, ranks: tuple[int, ...], dtype: str, out_rank: int):
    """value, gradient of sum(w * f) and the Hessian-vector product, compiled once per signature."""
    xs = [sg.tensor(f"x{i}", shape=(None,) * r, dtype=dtype) for i, r in enumerate(ranks)]
    w = sg.tensor("w", shape=(None,) * out_rank, dtype=dtype)
    vs = [sg.tensor(f"v{i}", shape=(None,) * r, dtype=dtype) for i, r in enumerate(ranks)]
    out = build(*xs)
    grads = sg.grad(sg.sum(w * out), xs)
    inner = sg.sum(grads[0] * vs[0])
    for g, v in zip(grads[1:], vs[1:]):
        inner = inner + sg.sum(g * v)
    hvp = sg.grad(inner, xs, disconnected="zero")
    return sg.function(xs, out), sg.function([*xs, w], grads), sg.function([*xs, w, *vs], hvp)


def derivatives(build, args: Sequence[np.ndarray], w: np.ndarray, directions: Sequence[np.ndarray]):
    """(value, grads, directional derivative, second directional derivative) from stablegrad."""
    dtype = str(np.asarray(args[0]).dtype)
    value_fn, grad_fn, hvp_fn = compiled(build, tuple(np.ndim(a) for a in args), dtype, np.ndim(w))
    value = value_fn(*args)
    grads = grad_fn(*args, w)
    hv = hvp_fn(*args, w, *directions)
    first = sum(float(np.sum(g.astype(np.float64) * d)) for g, d in zip(grads, directions))
    second = sum(float(np.sum(h.astype(np.float64) * d)) for h, d in zip(hv, directions))
    return value, grads, first, second


_TINY64 = float(np.finfo(np.float64).tiny)


def assert_matches(actual, expected, rtol=1e-13, atol=0.0, tiny=_TINY64) -> None:
    """Equal infinities and NaNs where the reference has them, close elsewhere (atol is absolute)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(actual[~finite], expected[~finite])
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol, atol=atol + tiny)


def assert_close_scalar(actual: float, expected: float, rtol: float, scale: float = 1.0) -> None:
    assert np.isfinite(actual), actual
    assert abs(actual - expected) <= rtol * max(abs(expected), scale), (actual, expected)


# -- eager evaluation and gradients ------------------------------------------------------------------
def run(build, *args):
    """Build on fresh symbolic inputs shaped like args, compile, run."""
    xs = [sg.tensor(f"x{i}", shape=np.shape(a), dtype=np.asarray(a).dtype) for i, a in enumerate(args)]
    out = build(*xs)
    return sg.function(xs, out)(*args)


def grad_of(build, *args, w=None, wrt=None):
    """Gradients of sum(w * build(*args)) (w = ones by default) w.r.t. the float args."""
    arrays = [np.asarray(a) for a in args]
    xs = [sg.tensor(f"x{i}", shape=a.shape, dtype=a.dtype) for i, a in enumerate(arrays)]
    out = build(*xs)
    weight = 1.0 if w is None else sg.constant(np.asarray(w, dtype=out.dtype))
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else list(wrt)
    grads = sg.grad(sg.sum(weight * out), [xs[i] for i in wrt])
    return sg.function(xs, grads)(*arrays)


# -- the reads contract -------------------------------------------------------------------------------
def _poison(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.full_like(a, np.nan)
    if a.dtype == np.bool_:
        return ~a
    return np.full_like(a, 7919)


def check_reads(op, *arrays, seed: int = 0) -> None:
    """The op's pullback gives the same result when everything it does not `read` is poison."""
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(a) for a in arrays]
    inputs = [sg.tensor(f"in{i}", shape=a.shape, dtype=a.dtype) for i, a in enumerate(arrays)]
    results = op.perform(*arrays)
    results = [np.asarray(r) for r in (results if op.nout > 1 else (results,))]
    outputs = [sg.tensor(f"out{i}", shape=r.shape, dtype=r.dtype) for i, r in enumerate(results)]
    cotangents = [sg.tensor(f"g{i}", shape=r.shape, dtype=r.dtype) for i, r in enumerate(results)]
    grads = op.pullback(inputs, outputs, cotangents)
    assert len(grads) == len(inputs)
    wanted = [g for g in grads if isinstance(g, Variable)]
    assert all(isinstance(g, Variable | Zero) for g in grads)
    fn = sg.function([*inputs, *outputs, *cotangents], wanted)
    g_values = [rng.standard_normal(r.shape).astype(r.dtype) for r in results]
    honest = fn(*arrays, *results, *g_values)
    poisoned_inputs = [a if op.reads.reads_input(i) else _poison(a) for i, a in enumerate(arrays)]
    poisoned_outputs = [r if op.reads.reads_output(i) else _poison(r) for i, r in enumerate(results)]
    poisoned = fn(*poisoned_inputs, *poisoned_outputs, *g_values)
    for h, p in zip(honest, poisoned):
        np.testing.assert_array_equal(h, p)
