"""Products and quotients whose partial results leave the float range where the answer does not
(ops/monomial.py, rewrite/monomials.py): values and gradients against mpmath's exact products,
the written bits kept where they are a normal number, the written formula's zeros, infinities
and NaNs kept where the factors make them, and the rule's reach (what it folds, what it leaves)."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.ops.monomial import Monomial, monomial

from .written import ulps

RULE = "[monomial_from_products]"
BACKENDS = ["numpy", "numba", "jax"]


def _exact(fn, *columns):
    """fn of each row of float inputs in mpmath (exactly: 60 digits hold these products), as floats."""
    with mp.workdps(max(60, mp.mp.dps)):
        return np.array([float(fn(*(mp.mpf(float(v)) for v in row))) for row in zip(*columns)])


# -- values: in range where the answer is ------------------------------------------------------------------
CASES = [
    # (name, the graph, its value and partials in mpmath, float64 and float32 columns: factors whose
    # partial products over- or underflow although the answer and its partials do not, and ordinary ones)
    (
        "y*y*y/(x*x)",
        lambda x, y: y * y * y / (x * x),
        (lambda x, y: y**3 / x**2, lambda x, y: -2 * y**3 / x**3, lambda x, y: 3 * y**2 / x**2),
        ([1e-200, 1e200, 3.0, -1e-100, 1e150], [1e-150, 1e150, 2.0, 1e-70, -1e110]),
        ([1e-25, 1e25, 3.0, -1e-12, 1e18], [1e-18, 1e18, 2.0, 1e-9, -1e13]),
    ),
    (
        "-(x*x)/(y*y)",
        lambda x, y: -(x * x) / (y * y),
        (lambda x, y: -(x**2) / y**2, lambda x, y: -2 * x / y**2, lambda x, y: 2 * x**2 / y**3),
        ([1e-200, 1e200, 3.0, 1e-170, 1e300], [1e-190, 1e210, 0.5, 1e-165, 1e301]),
        ([1e-25, 1e25, 3.0, 1e-21, 1e37], [1e-23, 1e26, 0.5, 1e-23, 1e38]),
    ),
    (
        "x*(x*x)/y",
        lambda x, y: x * (x * x) / y,
        (lambda x, y: x**3 / y, lambda x, y: 3 * x**2 / y, lambda x, y: -(x**3) / y**2),
        ([1e110, 1e-110, 7.0, -1e-150], [1e300, 1e-300, 3.0, 1e-200]),
        ([1e14, 1e-16, 7.0, -1e-18], [1e37, 1e-37, 3.0, 1e-30]),
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, build, exact, points, points32", CASES, ids=[c[0] for c in CASES])
def test_value_and_gradient_stay_in_range(name, build, exact, points, points32, dtype, backend):
    if backend != "numpy":
        pytest.importorskip(backend)
    x, y = sg.vector("x", dtype=dtype), sg.vector("y", dtype=dtype)
    out = build(x, y)
    f = sg.function([x, y], [out, *sg.grad(sg.sum(out), [x, y])], backend=backend)
    assert RULE in f.explain()
    args = [np.array(c, dtype=dtype) for c in (points if dtype == "float64" else points32)]
    with np.errstate(all="ignore"):
        written = sg.function([x, y], out, recognition=False, backend="numpy")(*args)
    got = f(*args)
    expected = [_exact(fn, *args) for fn in exact]
    tiny = float(np.finfo(dtype).tiny)
    for g, e in zip(got, expected):
        assert g.dtype == np.dtype(dtype)
        in_range = np.abs(e) >= tiny  # (XLA flushes subnormal results to 0)
        assert np.all(ulps(g[in_range], e[in_range], dtype) <= 8), (g, e)
    # (and these are points where the written tree leaves the range)
    with np.errstate(invalid="ignore"):
        assert not np.all(ulps(written, expected[0], dtype) <= 8)


def test_the_written_bits_where_the_written_result_is_normal():
    x, y, z = sg.vector("x"), sg.vector("y"), sg.vector("z")
    f = sg.function([x, y, z], (x * y) / (z * z))
    assert RULE in f.explain()
    rng = np.random.default_rng(1)
    a, b, c = (rng.normal(size=1000) * 10.0 ** rng.integers(-5, 5, 1000) for _ in range(3))
    np.testing.assert_array_equal(f(a, b, c), (a * b) / (c * c))


def test_one_minus_cos_over_its_square_near_zero():
    x = sg.vector("x")
    f = sg.function([x], (1.0 - sg.cos(x)) / (x * x))
    points = np.array([1e-300, -1e-200, 1e-160, 1e-5, 1.0])
    with mp.workdps(700):  # (1 - cos(1e-300) needs 600 digits to be more than 0)
        exact = _exact(lambda t: (1 - mp.cos(t)) / t**2, points)
    assert np.all(ulps(f(points), exact, "float64") <= 4)


# -- zeros, infinities and NaN ------------------------------------------------------------------------------
def test_zeros_infinities_and_nans_of_the_factors():
    x, y, z = sg.vector("x"), sg.vector("y"), sg.vector("z")
    f = sg.function([x, y, z], (x * y * y) / z)
    x_ = np.array([0.0, 0.0, 1e200, np.inf, np.inf, np.nan, 0.0, 1e-200])
    y_ = np.array([1e200, 1.0, 1e200, 1e-200, 0.0, 1.0, 1.0, 1e-200])
    z_ = np.array([1e-200, 0.0, np.inf, 1e300, 1.0, 1.0, np.inf, 0.0])
    with np.errstate(all="ignore"):
        got = f(x_, y_, z_)
    # 0·(huge)² / tiny: 0 (the written 0·inf is NaN); 0/0: NaN; huge³/inf: 0; inf·tiny²/huge: inf
    # (the written inf·0 is NaN); inf·0: NaN; NaN: NaN; 0/inf: 0; tiny³/0: inf (as written)
    expected = np.array([0.0, np.nan, 0.0, np.inf, np.nan, np.nan, 0.0, np.inf])
    np.testing.assert_array_equal(got, expected)


def test_cancelling_factors_are_not_cancelled():
    x, y = sg.vector("x"), sg.vector("y")
    f = sg.function([x, y], (x * y * y) / x)  # (x·y·y is folded, the quotient by x is not)
    with np.errstate(all="ignore"):
        value = f(np.array([0.0, np.inf, 2.0]), np.array([3.0, 3.0, 3.0]))
    np.testing.assert_array_equal(value, [np.nan, np.nan, 9.0])  # 0/0 and inf/inf, as written


# -- what the rule folds, and what it leaves --------------------------------------------------------------------
@pytest.mark.parametrize(
    "build, folds",
    [
        (lambda a, b, c: a * b * c, False),  # three factors and no divisor
        (lambda a, b, c: a * a * b, False),
        (lambda a, b, c: 2.0 * a * b / 3.0, False),  # (constants are not counted)
        (lambda a, b, c: a * b * c * a, True),  # four
        (lambda a, b, c: sg.square(a) * sg.square(b), True),
        (lambda a, b, c: a * b / c, True),  # three with a divisor
        (lambda a, b, c: -(a / (b * c)), True),
        (lambda a, b, c: sg.reciprocal(a) * b * c, True),
        (lambda a, b, c: a * a / 2.0, False),
    ],
)
def test_which_products_are_folded(build, folds):
    a, b, c = sg.vector("a"), sg.vector("b"), sg.vector("c")
    assert (RULE in sg.function([a, b, c], build(a, b, c)).explain()) == folds


def test_broadcast_factors_keep_the_written_shape():
    x, y = sg.matrix("x"), sg.vector("y")
    f = sg.function([x, y], [x * x / y, sg.grad(sg.sum(x * x / y), y)])
    a, b = np.full((3, 4), 1e200), np.full(4, 1e300)
    value, grad = f(a, b)
    assert value.shape == (3, 4) and grad.shape == (4,)
    np.testing.assert_allclose(value, 1e100, rtol=1e-15)
    np.testing.assert_allclose(grad, -3e-200, rtol=1e-14)  # -Σ x²/y² over the 3 rows: 1e400/1e600 each


# -- the op itself -------------------------------------------------------------------------------------------------
def test_second_derivative_of_a_monomial():
    x, y = sg.vector("x"), sg.vector("y")
    m = monomial([x, y], [3, -2])
    assert isinstance(m.owner.op, Monomial)
    (gx,) = sg.grad(sg.sum(m), [x])
    (gxx,) = sg.grad(sg.sum(gx), [x])
    f = sg.function([x, y], [gx, gxx])
    got_gx, got_gxx = f(np.array([1e-150, 2.0]), np.array([1e-200, 3.0]))
    # 3x²/y² and 6x/y²: 3e-300/1e-400 and 6e-150/1e-400, their partial products out of range
    np.testing.assert_allclose(got_gx, [3e100, 12 / 9], rtol=1e-14)
    np.testing.assert_allclose(got_gxx, [6e250, 12 / 9], rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_monomial_in_a_loop_step(backend):
    if backend != "numpy":
        pytest.importorskip(backend)
    xs = sg.matrix("xs")

    def step(total, row):
        return total + row * row / (row * 1e-300 + 1e-300), None

    final, _ = sg.scan(step, sg.zeros(3), xs)
    f = sg.function([xs], [final, sg.grad(sg.sum(final), xs)], backend=backend)
    value, grad = f(np.full((4, 3), 1e-200))
    # row² underflows as written; row²/1e-300 = 1e-100 a step, 4 steps; the derivative 2·row/1e-300
    np.testing.assert_allclose(value, 4e-100, rtol=1e-13)
    np.testing.assert_allclose(grad, 2e100, rtol=1e-13)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_monomial_in_a_fused_numba_loop(dtype, tmp_path, monkeypatch):
    pytest.importorskip("numba")
    from stablegrad.backends.numba_backend import loops
    from stablegrad.backends.numba_backend.loop_source import source

    monkeypatch.setenv("STABLEGRAD_CACHE_DIR", str(tmp_path))
    x, y = sg.tensor("x", (4096,), dtype), sg.tensor("y", (4096,), dtype)
    out = y * y * y / (x * x) + 1.0
    f = sg.function([x, y], [out, *sg.grad(sg.sum(out), [x, y])], backend="numba")
    (loop,) = [n for n in f.nodes if isinstance(n.op, loops.Loop)]
    assert "math.ldexp" in source(loop.op)
    rng = np.random.default_rng(2)
    low, high = (-300, 300) if dtype == "float64" else (-36, 36)
    a, b = (10.0 ** rng.uniform(low, high, 4096) * rng.choice([-1, 1], 4096) for _ in range(2))
    a[:4], b[:4] = [0.0, np.inf, np.nan, 1e-30], [1e-30, 2.0, 1.0, 0.0]
    args = [a.astype(dtype), b.astype(dtype)]
    with np.errstate(all="ignore"):
        expected = sg.function([x, y], [out, *sg.grad(sg.sum(out), [x, y])])(*args)
    for got, want in zip(f(*args), expected):  # the NumPy backend's perform, entry for entry
        np.testing.assert_array_equal(got, want)


def test_a_monomial_of_scalars():
    x, y = sg.scalar("x"), sg.scalar("y")
    f = sg.function([x, y], [y * y * y / (x * x), sg.grad(y * y * y / (x * x), x)])
    value, grad = f(1e-200, 1e-150)
    assert value == pytest.approx(1e-50, rel=1e-15) and grad == pytest.approx(-2e150, rel=1e-15)


def test_a_long_chain_of_products_compiles_in_linear_time():
    # each fold walks at most monomials.MOST nodes: a chain of n products costs O(n), not O(n²)
    import time

    def compile_time(n):
        x, y = sg.vector("x"), sg.vector("y")
        out = x
        for _ in range(n):
            out = out * y / x
        start = time.perf_counter()
        sg.function([x, y], [out, sg.grad(sg.sum(out), y)])
        return time.perf_counter() - start

    compile_time(50)  # (warm)
    small, large = compile_time(200), compile_time(800)
    assert large < 8 * small, (small, large)  # linear: about 4x; quadratic would be 16x


@pytest.mark.parametrize(
    "build, value, slope",
    [
        (
            lambda x: (1.0 - sg.cos(x)) / (x * x),
            lambda t: (1 - mp.cos(t)) / t**2,
            lambda t: mp.sin(t) / t**2 - 2 * (1 - mp.cos(t)) / t**3,
        ),
        (
            lambda x: x * x / (sg.sinh(x) * sg.sinh(x)),
            lambda t: t**2 / mp.sinh(t) ** 2,
            lambda t: 2 * t / mp.sinh(t) ** 2 - 2 * t**2 * mp.cosh(t) / mp.sinh(t) ** 3,
        ),
    ],
    ids=["(1 - cos x)/x²", "x²/sinh(x)²"],
)
def test_a_sine_over_its_argument_keeps_its_derivative_near_zero(build, value, slope):
    # the written partials of the pair cancel (two terms of about 2/x); f(u)/u's series does not
    x = sg.vector("x")
    out = build(x)
    f = sg.function([x], [out, sg.grad(sg.sum(out), x)])
    points = np.array([1e-200, -1e-8, 1e-3, 0.5, -3.0, 40.0])
    with mp.workdps(1300):  # (1 - cos(1e-200) needs its 400 digits below the 1)
        expected = [_exact(value, points), _exact(slope, points)]
    for got, want in zip(f(points), expected):
        in_range = np.abs(want) >= np.finfo(np.float64).tiny
        assert np.all(ulps(got[in_range], want[in_range], "float64") <= 8), (got, want)
    with np.errstate(all="ignore"):
        at_zero = f(np.array([0.0]))
    assert np.isnan(at_zero[0][0])  # 0/0, as written


# -- vanishing functions whose arguments' bases cancel (f(u) read as u·(f(u)/u)) -----------------------------
def _partials(fn, row, h_digits=400):
    """fn's value and partials at row, in mpmath (central differences far below float64's resolution)."""
    with mp.workdps(h_digits):
        point = [mp.mpf(float(v)) for v in row]
        partials = [
            mp.diff(lambda t, i=i: fn(*(t if j == i else v for j, v in enumerate(point))), point[i])
            for i in range(len(point))
        ]
        return [float(fn(*point))] + [float(d) for d in partials]


THROUGH = [
    # (name, the graph, its value in mpmath, rows of operands, the outputs checked: value, partials...)
    (
        "log(1 - x)/log(1 + x)",
        lambda x: sg.log(1.0 - x) / sg.log(1.0 + x),
        lambda x: mp.log(1 - x) / mp.log(1 + x),
        # the quotient rule's two terms of about 1 cancel to about x: no digit left below 1e-16
        [(1e-300,), (-1e-16,), (1e-8,), (-1e-3,), (0.1,), (0.9,), (-0.95,)],
        [0, 1],
    ),
    (
        "e·expm1((a + b)·e)/(expm1(a·e)·expm1(b·e))",
        lambda a, b, e: e * sg.expm1((a + b) * e) / (sg.expm1(a * e) * sg.expm1(b * e)),
        lambda a, b, e: e * mp.expm1((a + b) * e) / (mp.expm1(a * e) * mp.expm1(b * e)),
        # each argument underflows (0/0 as written), and ordinary points
        [(1e-100, 3e-100, 1e-200), (2e-150, -5e-150, 1e-170), (1e-5, -2e-5, 1e-3), (0.3, 0.2, 1.5)],
        # (∂/∂e is a remainder of terms that cancel: 1/200 of them at the last row, and of the order
        # of e·(a + b) where that is small; not checked)
        [0, 1, 2],
    ),
    (
        "-n·t²/sinh(t·τ)², t = θ·T",
        lambda n, th, T, tau: -n * (th * T) * (th * T) / (sg.sinh(th * T * tau) * sg.sinh(th * T * tau)),
        lambda n, th, T, tau: -n * (th * T) ** 2 / mp.sinh(th * T * tau) ** 2,
        # t underflows (0/0 as written, the answer is -n/τ²), and an ordinary point
        [(3.3e-187, -2.9e-142, 1e-305, -6e-187), (2.0, 0.5, 3.0, 0.25)],
        [0, 1, 2, 3, 4],
    ),
    (
        "n·t/tanh(t·τ), t = θ·T",
        lambda n, th, T, tau: n * (th * T) / sg.tanh(th * T * tau),
        lambda n, th, T, tau: n * (th * T) / mp.tanh(th * T * tau),
        # t underflows (0/0 as written, the answer is n/τ); t·τ small, where the written partials
        # in θ and T are two terms of about n·τ/(t·τ)² that cancel; and an ordinary point
        [(1e-20, 1e-160, 1e-170, 1e-100), (3.0, 2e-5, 1e-4, 0.5), (2.0, 0.5, 3.0, 0.25)],
        [0, 1, 2, 3, 4],
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, build, exact, rows, checked", THROUGH, ids=[c[0] for c in THROUGH])
def test_vanishing_functions_cancel_through_their_arguments(name, build, exact, rows, checked, backend):
    if backend != "numpy":
        pytest.importorskip(backend)
    xs = [sg.vector(f"x{i}") for i in range(len(rows[0]))]
    out = build(*xs)
    f = sg.function(xs, [out, *sg.grad(sg.sum(out), xs)], backend=backend)
    assert RULE in f.explain()
    got = np.array(f(*(np.array(column) for column in zip(*rows)))).T
    for row, computed in zip(rows, got):
        expected = np.array(_partials(exact, row))[checked]
        in_range = np.abs(expected) >= np.finfo(np.float64).tiny  # (XLA flushes subnormal results to 0)
        assert np.all(ulps(computed[checked][in_range], expected[in_range], "float64") <= 8), (row, computed, expected)


def test_vanishing_functions_keep_the_written_zeros_infinities_and_nans():
    x, y = sg.vector("x"), sg.vector("y")
    out = x * sg.expm1(x) / sg.expm1(3.0 * x)
    f = sg.function([x], [out, sg.grad(sg.sum(out), x)])
    points = np.array([0.0, -np.inf, -800.0, 800.0, np.nan, 2.0])
    with np.errstate(all="ignore"):
        written = sg.function([x], out, recognition=False)(points)
        value, grad = f(points)
    # 0·0/0 is NaN; at -inf and -800 each expm1 is -1 (as written, not u·0/(3u·0)); past 710 the
    # written inf/inf is NaN, which the wide-range rescue evaluates: 800·e⁸⁰⁰/e²⁴⁰⁰ = 0
    np.testing.assert_array_equal(np.delete(value, 3), np.delete(written, 3))
    assert np.isnan(written[3]) and value[3] == 0.0
    assert np.isnan(value[0]) and value[2] == -800.0 and np.isnan(grad[0])
    # a base that is 0 through a factor of it: the written 0/0 stays NaN, value and gradient
    t = x * y
    out = t * t / (sg.sinh(t * 2.0) * sg.sinh(t * 2.0))
    f = sg.function([x, y], [out, *sg.grad(sg.sum(out), [x, y])])
    with np.errstate(all="ignore"):
        got = f(np.array([0.0, 1e-200, 1.0]), np.array([3.0, 1e-200, 0.5]))
    assert np.isnan(got[0][0]) and np.isnan(got[1][0]) and np.isnan(got[2][0])
    np.testing.assert_allclose([g[1] for g in got], [0.25, 0.0, 0.0], atol=1e-300)  # (t underflowed: 1/4)
    np.testing.assert_allclose(got[0][2], 0.25 / np.sinh(1.0) ** 2, rtol=1e-15)


@pytest.mark.parametrize(
    "build",
    [
        lambda x, y: sg.log1p(x) / sg.log1p(y),  # no base in common
        lambda x, y: sg.expm1(x) * sg.sin(x) * y,  # a base in common, at powers of one sign
        lambda x, y: sg.exp(x) * x / sg.expm1(y),  # exp does not vanish at 0
    ],
)
def test_what_does_not_cancel_through_arguments(build):
    x, y = sg.vector("x"), sg.vector("y")
    assert "over_argument" not in str(sg.function([x, y], build(x, y)).nodes)
