"""Complex logsumexp as SciPy defines it: values against mpmath, the edges, gradients in JAX's convention."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

import stablegrad as sg

INF = np.inf
EPS = np.finfo(np.float64).eps


def mp_total(row, weights=None) -> mp.mpc:
    """Σ b·exp(z) in 60 digits (entries with b = 0 or real part -inf add nothing)."""
    weights = np.ones(len(row)) if weights is None else weights
    with mp.workdps(60):
        return mp.fsum(
            mp.mpc(complex(w)) * mp.exp(mp.mpc(complex(z))) for z, w in zip(row, weights) if w != 0 and z.real != -INF
        )


def exact_log(total: mp.mpc) -> complex:
    with mp.workdps(60):
        return complex(mp.log(total))


def exact_signed(total: mp.mpc) -> tuple[float, complex]:
    with mp.workdps(60):
        magnitude = abs(total)
        return float(mp.log(magnitude)), complex(total / magnitude)


def rows_with_large_real_parts(seed: int = 0) -> np.ndarray:
    """Real parts near ±1e3 mixed in each row (one row all near -1e3), phases anywhere."""
    rng = np.random.default_rng(seed)
    real = rng.choice([1e3, -1e3], size=(6, 5)) + rng.uniform(-3, 3, (6, 5))
    real[0] = -1e3 + rng.uniform(-3, 3, 5)
    return real + 1j * rng.uniform(-np.pi, np.pi, (6, 5))


def z_input(shape=(None, 5), dtype="complex128"):
    return sg.tensor("z", shape=shape, dtype=dtype)


def rel_error(got: complex, exact: complex) -> float:
    return abs(got - exact) / abs(exact)


# -- values -------------------------------------------------------------------------------------------
def test_values_at_large_real_parts_against_mpmath():
    v = rows_with_large_real_parts()
    z = z_input()
    out, (value, phase) = sg.logsumexp(z, axis=1), sg.logsumexp(z, axis=1, return_sign=True)
    got, got_value, got_phase = sg.function([z], [out, value, phase])(v)
    assert got.dtype == np.complex128 and got_value.dtype == np.float64 and got_phase.dtype == np.complex128
    assert np.all(np.abs(v.real) > 709)  # the naive exp overflows or underflows on every entry
    for row, g, gv, gp in zip(v, got, got_value, got_phase):
        total = mp_total(row)
        assert rel_error(g, exact_log(total)) < 4 * EPS
        exact_value, exact_phase = exact_signed(total)
        assert abs(gv - exact_value) <= 4 * EPS * abs(exact_value)
        assert abs(gp - exact_phase) < 4 * EPS


def test_imaginary_part_is_the_principal_angle():
    z = z_input((1, 2))
    got = sg.function([z], sg.logsumexp(z, axis=1))(np.array([[1000 + 3.0j, 1000 + 3.1j]]))
    assert -np.pi < got.imag[0] <= np.pi
    assert rel_error(got[0], exact_log(mp_total([1000 + 3.0j, 1000 + 3.1j]))) < 4 * EPS


def test_complex_weights_axis_and_keepdims():
    rng = np.random.default_rng(3)
    v = rng.normal(size=(2, 3, 4)) * 300 + 1j * rng.normal(size=(2, 3, 4))
    w = rng.normal(size=(2, 3, 4)) + 1j * rng.normal(size=(2, 3, 4))
    z, b = sg.tensor("z", (2, 3, 4), "complex128"), sg.tensor("b", (2, 3, 4), "complex128")
    out = sg.logsumexp(z, axis=(0, 2), b=b, keepdims=True)
    value, phase = sg.logsumexp(z, axis=(0, 2), b=b, keepdims=True, return_sign=True)
    got, got_value, got_phase = sg.function([z, b], [out, value, phase])(v, w)
    assert got.shape == got_value.shape == got_phase.shape == (1, 3, 1)
    for j in range(3):
        total = mp_total(v[:, j, :].ravel(), w[:, j, :].ravel())
        assert rel_error(got[0, j, 0], exact_log(total)) < 16 * EPS
        exact_value, exact_phase = exact_signed(total)
        assert abs(got_value[0, j, 0] - exact_value) <= 16 * EPS * abs(exact_value)
        assert abs(got_phase[0, j, 0] - exact_phase) < 16 * EPS


def test_real_z_with_complex_weights_and_complex_z_with_real_weights():
    x, c = sg.vector("x"), sg.vector("c", dtype="complex128")
    xv, cv = np.array([800.0, 801.0, -5.0]), np.array([1j, -2.0, 3 + 1j])
    got_a = sg.function([x, c], sg.logsumexp(x, b=c))(xv, cv)
    got_b = sg.function([c, x], sg.logsumexp(c * 400, b=x))(cv, xv)
    assert rel_error(complex(got_a), exact_log(mp_total(xv, cv))) < 4 * EPS
    assert rel_error(complex(got_b), exact_log(mp_total(cv * 400, xv))) < 4 * EPS


def test_mask():
    z = z_input((2, 3))
    v = np.array([[1 + 1j, 2 - 1j, 900 + 0.5j], [-1j, 3.0, 2 + 2j]])
    keep = np.array([[True, True, False], [False, True, True]])
    got = sg.function([z], sg.logsumexp(z, axis=1, where=keep))(v)
    for row, k, g in zip(v, keep, got):
        assert rel_error(g, exact_log(mp_total(row, k.astype(float)))) < 4 * EPS


def test_complex64_computes_in_single_precision():
    z = z_input((1, 3), "complex64")
    value, phase = sg.logsumexp(z, axis=1, return_sign=True)
    v = np.array([[80 + 1j, 90 - 2j, 95 + 0.1j]], np.complex64)  # exp(95) overflows float32
    got_value, got_phase = sg.function([z], [value, phase])(v)
    assert got_value.dtype == np.float32 and got_phase.dtype == np.complex64
    exact_value, exact_phase = exact_signed(mp_total(v[0]))
    eps32 = np.finfo(np.float32).eps
    assert abs(got_value[0] - exact_value) <= 4 * eps32 * abs(exact_value)
    assert abs(got_phase[0] - exact_phase) < 4 * eps32


# -- cancellation and the edges ---------------------------------------------------------------------------
def test_a_sum_that_nearly_cancels():
    # exp(0) + exp(iπ) is 1 - 1 + i·sin(π - fl(π)) = 1.2e-16 i: log|Σ| = -36.6, the phase i
    z = z_input((1, 2))
    value, phase = sg.logsumexp(z, axis=1, return_sign=True)
    v = np.array([[0j, 1j * np.pi]])
    got_value, got_phase = sg.function([z], [value, phase])(v)
    exact_value, exact_phase = exact_signed(mp_total(v[0]))
    assert np.isfinite(got_value[0]) and abs(got_value[0] - exact_value) < 1e-14 * abs(exact_value)
    assert abs(got_phase[0] - exact_phase) < 1e-15


def test_a_sum_that_is_exactly_zero_is_minus_inf_with_sign_zero_as_scipy():
    z, b = z_input((2, 2)), sg.tensor("b", (2, 2), "complex128")
    value, phase = sg.logsumexp(z, axis=1, b=b, return_sign=True)
    out = sg.logsumexp(z, axis=1, b=b)
    v = np.array([[1000 + 1j, 1000 + 1j], [2 - 1j, 2 - 1j]])
    w = np.array([[1.0, -1.0], [1j, -1j]])
    got_value, got_phase, got = sg.function([z, b], [value, phase, out])(v, w)
    assert got_value.tolist() == [-INF, -INF]
    assert got_phase.tolist() == [0j, 0j]
    assert got.tolist() == [complex(-INF, 0), complex(-INF, 0)]  # SciPy's -inf + 0j


def test_minus_inf_real_parts_are_absent():
    z = z_input((2, 3))
    v = np.array([[complex(-INF, 1.0), 2 + 1j, complex(-INF, -3.0)], [complex(-INF, 0.5)] * 3])
    (value, phase), out = sg.logsumexp(z, axis=1, return_sign=True), sg.logsumexp(z, axis=1)
    got_value, got_phase, got = sg.function([z], [value, phase, out])(v)
    assert got[0] == 2 + 1j and got_value[0] == 2.0 and abs(got_phase[0] - np.exp(1j)) < EPS
    assert got_value[1] == -INF and got_phase[1] == 0 and got[1] == complex(-INF, 0)


def test_plus_inf_real_part_is_the_formula_as_written_as_scipy():
    # SciPy lets C99's complex exp and log decide there: exp(inf + 0.5i) is inf + inf·i, whose log
    # has the angle π/4; the sign is inf/inf, NaN
    z = z_input((1, 3))
    (value, phase), out = sg.logsumexp(z, axis=1, return_sign=True), sg.logsumexp(z, axis=1)
    got_value, got_phase, got = sg.function([z], [value, phase, out])(np.array([[complex(INF, 0.5), 1e3, 2j]]))
    assert got_value[0] == INF and np.isnan(got_phase[0].real) and np.isnan(got_phase[0].imag)
    assert got[0] == complex(INF, np.pi / 4)


def test_gradient_where_a_real_part_is_plus_inf_is_the_limit():
    # Re log Σ's gradient at [inf + iθ, 5]: all of it on the +inf entry, e^{iθ}/e^{iθ} = 1
    z = z_input((1, 2))
    g = sg.function([z], sg.grad(sg.sum(sg.real(sg.logsumexp(z, axis=1))), z))(np.array([[complex(INF, 0.5), 5.0]]))
    assert abs(g[0, 0] - 1) < 2 * EPS and g[0, 1] == 0  # (a complex quotient rounds its parts)


def test_nan_propagates():
    z = z_input((1, 2))
    got = sg.function([z], sg.logsumexp(z, axis=1))(np.array([[complex(np.nan, 0), 1j]]))
    assert np.isnan(got[0].real)


def test_the_naive_formula_overflows_where_this_does_not():
    z = z_input((1, 2))
    v = np.array([[1000 + 1j, 1000 - 1j]])
    with np.errstate(over="ignore", invalid="ignore"):
        assert not np.isfinite(np.log(np.sum(np.exp(v))))
    got = sg.function([z], sg.logsumexp(z, axis=1))(v)
    assert rel_error(got[0], exact_log(mp_total(v[0]))) < 4 * EPS


# -- gradients: JAX's convention, ∂C/∂x - i·∂C/∂y for a real cost C -----------------------------------
def central_gradient(f, args: list[np.ndarray], k: int, h: float = 1e-6) -> np.ndarray:
    """∂f/∂x - i·∂f/∂y of f(*args) in argument k, entry by entry (y only for complex arguments)."""
    v = args[k]
    out = np.zeros_like(v)
    steps = (1.0, 1j) if v.dtype.kind == "c" else (1.0,)
    for i in np.ndindex(v.shape):
        for step in steps:
            e = np.zeros_like(v)
            e[i] = h * step
            plus = [a + e if j == k else a for j, a in enumerate(args)]
            minus = [a - e if j == k else a for j, a in enumerate(args)]
            d = (f(*plus) - f(*minus)) / (2 * h)
            out[i] += d if step == 1.0 else -1j * d
    return out


V = np.array([[1.0 + 1j, 0.5 - 1j, -0.3 + 2j], [300.2, 301 + 0.7j, 299 - 2j]])
W = np.array([[1.0, -0.5 + 0.2j, 2j], [1, 0.3, -1]])


def _costs(z, b):
    value, phase = sg.logsumexp(z, axis=1, b=b, return_sign=True)
    out = sg.logsumexp(z, axis=1, b=b)
    scale = np.array([1.0, -2.0])
    return {
        "log|Σ|": sg.sum(value * scale),
        "Re phase": sg.sum(sg.real(phase) * scale),
        "Im phase": sg.sum(sg.imag(phase)),
        "log|Σ| and phase": sg.sum(value) + sg.sum(2 * sg.imag(phase) + sg.real(phase)),
        "Re log Σ": sg.sum(sg.real(out) * scale),
        "Im log Σ": sg.sum(sg.imag(out) * scale),
    }


@pytest.mark.parametrize("cost_name", list(_costs(z_input((2, 3)), z_input((2, 3)))))
def test_gradients_of_real_costs_against_finite_differences(cost_name):
    z, b = sg.tensor("z", (2, 3), "complex128"), sg.tensor("b", (2, 3), "complex128")
    cost = _costs(z, b)[cost_name]
    f = sg.function([z, b], cost)
    gz, gb = sg.function([z, b], sg.grad(cost, [z, b]))(V, W)
    assert gz.dtype == gb.dtype == np.complex128
    # (central differences of values near 300 carry ~300·eps/h ≈ 7e-8 of rounding)
    np.testing.assert_allclose(gz, central_gradient(f, [V, W], 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gb, central_gradient(f, [V, W], 1), rtol=1e-6, atol=1e-7)


def test_gradient_for_real_weights_is_real():
    z, b = sg.tensor("z", (2, 3), "complex128"), sg.tensor("b", (2, 3))
    value, _ = sg.logsumexp(z, axis=1, b=b, return_sign=True)
    cost = sg.sum(value)
    wv = np.array([[1.0, -0.5, 2.0], [1.0, 0.3, -1.0]])
    gb = sg.function([z, b], sg.grad(cost, b))(V, wv)
    assert gb.dtype == np.float64
    np.testing.assert_allclose(gb, central_gradient(sg.function([z, b], cost), [V, wv], 1), rtol=1e-7)


def test_gradient_at_large_real_parts_is_the_complex_softmax():
    # d log Σ / dz_k = exp(z_k) / Σ: the gradient of Re log Σ in JAX's convention is that number
    z = z_input((1, 3))
    v = np.array([[1e3 + 1j, 1e3 - 0.5j, -1e3 + 0j]])
    g = sg.function([z], sg.grad(sg.sum(sg.real(sg.logsumexp(z, axis=1))), z))(v)
    total = mp_total(v[0])
    with mp.workdps(60):
        exact = [complex(mp.exp(mp.mpc(complex(t))) / total) for t in v[0]]
    np.testing.assert_allclose(g[0], exact, rtol=4 * EPS, atol=1e-300)


def test_a_complex_cost_gives_the_holomorphic_derivative():
    # jax.grad(..., holomorphic=True): the cotangent 1 pulled back, d log Σ / dz
    z = z_input((1, 3))
    v = np.array([[1 + 1j, 0.5 - 1j, 2j]])
    g = sg.function([z], sg.grad(sg.sum(sg.logsumexp(z, axis=1)), z))(v)
    total = mp_total(v[0])
    with mp.workdps(60):
        exact = [complex(mp.exp(mp.mpc(complex(t))) / total) for t in v[0]]
    np.testing.assert_allclose(g[0], exact, rtol=4 * EPS)


def test_gradient_where_the_sum_is_zero_is_zero_not_nan():
    z, b = z_input((1, 2)), sg.tensor("b", (1, 2), "complex128")
    value, _ = sg.logsumexp(z, axis=1, b=b, return_sign=True)
    gz = sg.function([z, b], sg.grad(sg.sum(value), z))(np.array([[1j, 1j]]), np.array([[1.0, -1.0]]))
    assert gz.tolist() == [[0j, 0j]]


# -- every backend (also run whole with STABLEGRAD_TEST_BACKEND) ---------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "jax", "numba"])
def test_each_backend(backend):
    # (Numba compiles no complex kernel: its backend runs these nodes as the NumPy backend does)
    v = rows_with_large_real_parts(5)
    z = z_input()
    value, phase = sg.logsumexp(z, axis=1, return_sign=True)
    out = sg.logsumexp(z, axis=1)
    fn = sg.function([z], [out, value, phase, sg.grad(sg.sum(value), z)], backend=backend)
    got, got_value, got_phase, grad = fn(v)
    for row, g, gv, gp, gg in zip(v, got, got_value, got_phase, grad):
        total = mp_total(row)
        assert rel_error(g, exact_log(total)) < 4 * EPS
        exact_value, exact_phase = exact_signed(total)
        assert abs(gv - exact_value) <= 4 * EPS * abs(exact_value) and abs(gp - exact_phase) < 4 * EPS
        with mp.workdps(60):
            exact_grad = [complex(mp.exp(mp.mpc(complex(t))) / total) for t in row]
        np.testing.assert_allclose(gg, exact_grad, rtol=8 * EPS, atol=1e-300)
