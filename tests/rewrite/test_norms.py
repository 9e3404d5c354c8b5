"""Square roots of sums of squares recognised as the norm op (rewrite/norms.py)."""

from __future__ import annotations

import numpy as np
import pytest

import stablegrad as sg

mpmath = pytest.importorskip("mpmath")

RULE = "[norm_from_root_of_sum_of_squares]"


def _exact_norm(rows: np.ndarray, divisor: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """√(Σ x² / n) along the last axis and its gradient x / (n·r) (0 at 0), with 50 digits."""
    values, slopes = [], []
    with mpmath.workdps(50):
        for row in np.atleast_2d(rows):
            xs = [mpmath.mpf(float(v)) for v in row]
            r = mpmath.sqrt(mpmath.fsum(v * v for v in xs) / divisor)
            values.append(float(r))
            slopes.append([float(v / (divisor * r)) if r != 0 else 0.0 for v in xs])
    return np.array(values), np.array(slopes)


SPELLINGS = {
    "sqrt(sum(x*x))": lambda x: sg.sqrt(sg.sum(x * x, axis=-1)),
    "sqrt(sum(x**2))": lambda x: sg.sqrt(sg.sum(x**2, axis=-1)),
    "sum(square(x))**0.5": lambda x: sg.sum(sg.square(x), axis=-1) ** 0.5,
}


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize(("dtype", "big", "small"), [("float64", 1e200, 1e-200), ("float32", 1e25, 1e-25)])
def test_a_root_of_a_sum_of_squares_is_finite_accurate_and_has_gradient_0_at_0(spelling, dtype, big, small):
    rows = np.array([[3.0, 4.0], [3 * big, 4 * big], [3 * small, 4 * small], [0.0, 0.0], [-0.5, 1e-3]], dtype=dtype)
    x = sg.tensor("x", (None, 2), dtype)
    r = SPELLINGS[spelling](x)
    f = sg.function([x], [r, sg.grad(sg.sum(r), x)])
    value, slope = f(rows)
    exact_value, exact_slope = _exact_norm(rows.astype(np.float64))
    rtol = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(value, exact_value, rtol=rtol, atol=0)
    np.testing.assert_allclose(slope, exact_slope, rtol=rtol, atol=0)
    assert value.dtype == dtype and slope[3].tolist() == [0.0, 0.0]
    written_value, written_slope = sg.function([x], [r, sg.grad(sg.sum(r), x)], recognition=False)(rows)
    assert np.isinf(written_value[1]) and written_value[2] == 0 and np.isnan(written_slope[3]).all()
    assert value[0] == written_value[0] and value[4] == written_value[4]  # in range: the written value, bit for bit
    assert RULE in f.explain()


def test_a_mean_of_squares_and_a_standard_deviation_written_with_var():
    x = sg.vector("x")
    cases = [
        (sg.sqrt(sg.mean(x * x)), [3e200, 4e200], 3.0, lambda v: _exact_norm(v, 2.0)),
        (sg.sqrt(sg.var(x)), [1.0, 1.0, 1.0], 3.0, None),  # a constant sample: std 0, gradient 0
    ]
    for r, point, n, reference in cases:
        f = sg.function([x], [r, sg.grad(r, x)])
        value, slope = f(np.array(point))
        assert RULE in f.explain()
        if reference is None:
            assert value == 0.0 and slope.tolist() == [0.0] * int(n)
            continue
        exact_value, exact_slope = reference(np.array(point))
        np.testing.assert_allclose(value, exact_value[0], rtol=4e-16)
        np.testing.assert_allclose(slope, exact_slope[0], rtol=4e-16)
    spread = np.array([1.0, 2.5, -4.0, 7.25])
    np.testing.assert_allclose(sg.function([x], sg.sqrt(sg.var(x, ddof=1)))(spread), np.std(spread, ddof=1), rtol=4e-16)


def test_a_pairwise_distance_matrix_has_a_finite_gradient_on_its_diagonal():
    points = np.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])
    x = sg.matrix("x")
    distances = sg.sqrt(sg.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1))
    w = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, -1.0], [3.0, 0.5, 0.0]])
    grad = sg.function([x], sg.grad(sg.sum(distances * w), x))(points)
    # d/dx_i Σ_jk w_jk ‖x_j - x_k‖: the pairs (i, k) and (j, i), u / ‖u‖ each; the diagonal contributes 0
    expected = np.zeros_like(points)
    for j in range(3):
        for k in range(3):
            if j != k:
                u = points[j] - points[k]
                expected[j] += w[j, k] * u / np.linalg.norm(u)
                expected[k] -= w[j, k] * u / np.linalg.norm(u)
    np.testing.assert_allclose(grad, expected, rtol=1e-15)


def test_a_root_of_one_square_is_the_absolute_value_and_a_vector_dot_itself_a_norm():
    x = sg.vector("x")
    r = sg.sqrt(x * x)
    f = sg.function([x], [r, sg.grad(sg.sum(r), x)])
    value, slope = f(np.array([-1e200, 0.0, 2.5]))
    assert value.tolist() == [1e200, 0.0, 2.5] and slope.tolist() == [-1.0, 0.0, 1.0]
    assert RULE in f.explain()
    dot = sg.sqrt(x @ x)
    value, slope = sg.function([x], [dot, sg.grad(dot, x)])(np.array([3e-200, -4e-200]))
    np.testing.assert_allclose([value, *slope], [5e-200, 0.6, -0.8], rtol=4e-16)


def test_the_domain_stays_as_written():
    x = sg.vector("x")
    r = sg.sqrt(sg.sum(x * x))
    f, written = sg.function([x], r), sg.function([x], r, recognition=False)
    for point in ([np.nan, 1.0], [np.inf, 1.0], [-np.inf, np.nan], [-np.inf, 2.0]):
        np.testing.assert_array_equal(f(np.array(point)), written(np.array(point)))
    n = sg.scalar("n")
    rms = sg.sqrt(sg.sum(x * x) / n)  # a divisor that may be negative: sqrt(0 / -2) is -0, 0 / sqrt(-2) NaN
    assert RULE not in sg.function([x, n], rms).explain()
    std = sg.sqrt(sg.var(x, ddof=1))  # var's divisor is max(n - ddof, 0): one entry gives 0 / 0, as written
    f, written = sg.function([x], std), sg.function([x], std, recognition=False)
    assert RULE in f.explain()
    np.testing.assert_array_equal(f(np.array([2.0])), written(np.array([2.0])))


def test_near_misses_are_left_as_written():
    x, y = sg.vector("x"), sg.vector("y")
    z = sg.tensor("z", (None,), "complex128")
    for near_miss in (
        sg.sqrt(sg.sum(x * y)),  # not a square
        sg.sqrt(sg.sum(x * x) + 1.0),  # a constant term
        sg.sqrt(x * x - y * y),  # a difference
        sg.sum(x * x) ** 0.25,  # another root
        sg.sqrt(sg.prod(x * x)),
        sg.sqrt(x * x + y * y),  # separate terms (hypot): not recognised, see the rule's docstring
    ):
        assert RULE not in sg.function([x, y], near_miss).explain()
    assert RULE not in sg.function([z], sg.sqrt(sg.sum(z * z))).explain()  # z·z is no squared modulus


def test_fires_inside_a_user_composite_and_a_scan_body():
    u = sg.vector("u")
    composite = sg.OpFromGraph([u], [sg.sqrt(sg.sum(u * u))])
    x = sg.vector("x")
    r = composite(x)
    f = sg.function([x], [r, sg.grad(r, x)])
    value, slope = f(np.zeros(3))
    assert RULE in f.explain() and value == 0 and slope.tolist() == [0.0, 0.0, 0.0]

    steps = sg.matrix("steps")

    def step(total, row):
        return total + sg.sqrt(sg.sum(row * row)), None

    length, _ = sg.scan(step, sg.constant(0.0), steps)
    f = sg.function([steps], [length, sg.grad(length, steps)])
    value, slope = f(np.array([[3.0, 4.0], [0.0, 0.0], [3e200, 4e200]]))
    assert RULE in f.explain()
    np.testing.assert_allclose(value, 5e200, rtol=4e-16)
    np.testing.assert_allclose(slope, [[0.6, 0.8], [0.0, 0.0], [0.6, 0.8]], rtol=4e-16)


@pytest.mark.parametrize("backend", ["numpy", "jax", "numba"])
def test_every_backend(backend):
    pytest.importorskip(backend)
    x = sg.matrix("x")
    r = sg.sqrt(sg.sum(x**2, axis=1))
    value, slope = sg.function([x], [r, sg.grad(sg.sum(r), x)], backend=backend)(np.array([[3e200, 4e200], [0.0, 0.0]]))
    np.testing.assert_allclose(value, [5e200, 0.0], rtol=4e-16)
    np.testing.assert_allclose(slope, [[0.6, 0.8], [0.0, 0.0]], rtol=4e-16)


# -- the log of a modulus: log(sqrt(a² + b²)), log(a² + b²) ----------------------------------------------------
LOG_RULE = "[log_modulus_from_sum_of_squares]"


def _exact_log_modulus(a: float, b: float, power: int) -> tuple[float, float, float]:
    """log((a² + b²)^(power/2)) and its partials power·a/(a² + b²), power·b/(a² + b²), with 50 digits."""
    with mpmath.workdps(50):
        a_, b_ = mpmath.mpf(a), mpmath.mpf(b)
        s = a_ * a_ + b_ * b_
        return float(power * mpmath.log(s) / 2), float(power * a_ / s), float(power * b_ / s)


@pytest.mark.parametrize(
    ("spelling", "power"),
    [
        (lambda a, b: sg.log(sg.sqrt(a * a + b * b)), 1),
        (lambda a, b: sg.log((a**2 + b**2) ** 0.5), 1),
        (lambda a, b: sg.log(sg.square(a) + sg.square(b)), 2),
    ],
)
@pytest.mark.parametrize(("dtype", "big", "small"), [("float64", 1.9e154, 1e-200), ("float32", 2e19, 1e-25)])
def test_the_log_of_a_modulus_is_finite_and_accurate_past_the_range_of_the_squares(spelling, power, dtype, big, small):
    a_values = np.array([-big, 3 * big, 3 * small, 3.0, 0.6, -1e-3], dtype=dtype)
    b_values = np.array([3e-15, 4 * big, 4 * small, 4.0, 0.8, 2.5], dtype=dtype)
    a, b = sg.tensor("a", (None,), dtype), sg.tensor("b", (None,), dtype)
    y = spelling(a, b)
    f = sg.function([a, b], [y, *sg.grad(sg.sum(y), [a, b])])
    assert LOG_RULE in f.explain()
    got = f(a_values, b_values)
    exact = np.array([_exact_log_modulus(float(p), float(q), power) for p, q in zip(a_values, b_values)]).T
    accurate = [0, 1, 2, 3, 5]  # (at (0.6, 0.8), |z| is 1 within an ulp: the log is as written, below)
    for g, e in zip(got, exact):
        assert g.dtype == dtype
        np.testing.assert_allclose(g[accurate], e[accurate].astype(dtype), rtol=4 * np.finfo(dtype).eps, atol=0)
    np.testing.assert_allclose(got[1][4], exact[1][4], rtol=4 * np.finfo(dtype).eps)  # its gradient, accurate
    with np.errstate(all="ignore"):
        written = sg.function([a, b], [y], recognition=False)(a_values, b_values)[0]
    assert np.isinf(written[:3]).all()  # overflow and underflow as written
    np.testing.assert_array_equal(got[0][3:], written[3:])  # in range: the written value, bit for bit


def test_the_log_of_a_modulus_keeps_the_written_domain_and_its_near_misses():
    a, b = sg.vector("a"), sg.vector("b")
    y = sg.log(sg.sqrt(a * a + b * b))
    values = [np.array([0.0, np.inf, np.nan, -np.inf]), np.array([0.0, 1.0, 1.0, np.inf])]
    got = sg.function([a, b], y)(*values)
    assert got[0] == -np.inf and got[1] == np.inf and np.isnan(got[2]) and got[3] == np.inf
    for near in (sg.log(sg.sqrt(a * a + b * b + 1.0)), sg.log(a * a - b * b), sg.log(sg.sqrt(a * b + b * b))):
        assert LOG_RULE not in sg.function([a, b], near).explain()
