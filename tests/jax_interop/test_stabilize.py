"""`stablegrad.jax.stabilize`: naive JAX code gets stable values and gradients, and composes with JAX.

Every reference here is independent of stablegrad: an analytic value, or JAX's own stable
functions (`jax.nn.logsumexp`, `jax.nn.softmax`, ...).  Each overflow case also checks that
plain JAX fails on the same inputs, so the test shows something.
"""

from __future__ import annotations

import inspect
import io
import os
import warnings
from contextlib import redirect_stdout

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from stablegrad.jax import StabilizeError, stabilize  # noqa: E402

HERE = os.path.basename(__file__)


@pytest.fixture
def x64():
    """Float64 for one test, without touching JAX's global setting (other tests keep theirs)."""
    with jax.enable_x64(True):
        yield


def line_of(fn, text: str) -> int:
    """The line number in this file of the line of `fn`'s source that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


# -- the naive formulas, written in jax.numpy ------------------------------------------------------------------
def naive_logsumexp(x):
    return jnp.log(jnp.sum(jnp.exp(x)))


def naive_row_logsumexp(x):
    return jnp.sum(jnp.log(jnp.sum(jnp.exp(x), axis=1)))


def naive_softmax(x):
    return jnp.exp(x) / jnp.sum(jnp.exp(x))


def naive_softplus(x):
    return jnp.sum(jnp.log(1 + jnp.exp(x)))


def naive_logaddexp(a, b):
    return jnp.log(jnp.exp(a) + jnp.exp(b))


BIG = np.array([1000.0, 999.0, -1000.0, 998.5])


def test_naive_logsumexp_value_and_gradient_match_the_analytic_ones(x64):
    x = jnp.asarray(BIG)
    assert not np.isfinite(naive_logsumexp(x))  # plain JAX overflows
    assert np.any(np.isnan(jax.grad(naive_logsumexp)(x)))
    stable = stabilize(naive_logsumexp)
    shifted = BIG - 1000.0  # exp of these is representable: the analytic value, computed in float64
    np.testing.assert_allclose(stable(x), 1000.0 + np.log(np.sum(np.exp(shifted))), rtol=1e-15)
    np.testing.assert_allclose(jax.grad(stable)(x), np.exp(shifted) / np.sum(np.exp(shifted)), rtol=1e-14)


def test_naive_logsumexp_of_matrix_rows_matches_jax_nn(x64):
    x = jnp.asarray(np.random.default_rng(0).normal(size=(5, 7)) * 1000)
    assert not np.isfinite(naive_row_logsumexp(x))
    stable = stabilize(naive_row_logsumexp)
    np.testing.assert_allclose(stable(x), jnp.sum(jax.nn.logsumexp(x, axis=1)), rtol=1e-14)
    np.testing.assert_allclose(jax.grad(stable)(x), jax.nn.softmax(x, axis=1), rtol=1e-13, atol=1e-300)


def test_naive_softmax_value_and_jacobian_match_jax_nn(x64):
    x = jnp.asarray(BIG)
    assert np.all(np.isnan(naive_softmax(x)[:2]))
    stable = stabilize(naive_softmax)
    reference = jax.nn.softmax(x)
    np.testing.assert_allclose(stable(x), reference, rtol=1e-14, atol=1e-300)
    s = np.asarray(reference)
    np.testing.assert_allclose(jax.jacrev(stable)(x), np.diag(s) - np.outer(s, s), rtol=1e-13, atol=1e-300)


def test_naive_softplus_value_and_gradient_match_the_analytic_ones(x64):
    x = jnp.asarray([-1000.0, -1.0, 0.0, 30.0, 1000.0])
    assert not np.isfinite(naive_softplus(x))
    stable = stabilize(naive_softplus)
    np.testing.assert_allclose(stable(x), np.sum(np.logaddexp(0.0, np.asarray(x))), rtol=1e-15)
    sigmoid = 0.5 * (1 + np.tanh(np.asarray(x) / 2))  # 1 / (1 + exp(-x)), without its overflow
    np.testing.assert_allclose(jax.grad(stable)(x), sigmoid, rtol=1e-15)


def test_naive_logaddexp_of_two_arguments(x64):
    a, b = jnp.float64(1000.0), jnp.float64(999.0)
    assert not np.isfinite(naive_logaddexp(a, b))
    stable = stabilize(naive_logaddexp)
    np.testing.assert_allclose(stable(a, b), 1000.0 + np.log1p(np.exp(-1.0)), rtol=1e-15)
    da, db = jax.grad(stable, argnums=(0, 1))(a, b)
    np.testing.assert_allclose([da, db], [1 / (1 + np.exp(-1.0)), 1 / (1 + np.exp(1.0))], rtol=1e-15)


def test_a_long_row_whose_cheap_logsumexp_is_in_doubt_gets_the_exact_one(x64):
    # one entry at 0, 19999 at -40: the total 1 + 8.5e-14 rounds in its 3rd digit past the 1,
    # so m + log(total) is off by ~1e-3 relative; the exact form keeps the tail (log1p)
    x = jnp.concatenate([jnp.zeros(1), jnp.full(19999, -40.0)])
    tail = 19999 * np.exp(-40.0)
    value = jax.jit(stabilize(naive_logsumexp))(x)
    np.testing.assert_allclose(value, np.log1p(tail), rtol=1e-12)
    assert abs(float(jnp.log(jnp.sum(jnp.exp(x)))) - np.log1p(tail)) > 1e-4 * np.log1p(tail)  # the naive form is not


def test_float32_inputs_stay_float32_and_finite():
    x = jnp.asarray(BIG, dtype=jnp.float32)
    stable = stabilize(naive_logsumexp)
    value, grad = stable(x), jax.grad(stable)(x)
    assert value.dtype == jnp.float32 and grad.dtype == jnp.float32
    np.testing.assert_allclose(value, jax.nn.logsumexp(x), rtol=1e-6)
    np.testing.assert_allclose(grad, jax.nn.softmax(x), rtol=1e-5, atol=1e-30)


# -- composition with JAX's transformations -----------------------------------------------------------------------
def loglik(theta, x):
    logits = x @ theta
    return jnp.sum(jnp.log(jnp.sum(jnp.exp(logits), axis=1)))


def hand_stable_loglik(theta, x):
    return jnp.sum(jax.nn.logsumexp(x @ theta, axis=1))


@pytest.fixture
def regression(x64):
    rng = np.random.default_rng(1)
    return jnp.asarray(rng.normal(size=(3, 4)) * 3000), jnp.asarray(rng.normal(size=(6, 3)))


def test_jit_grad_and_jit_of_grad(regression):
    theta, x = regression
    assert not np.isfinite(loglik(theta, x))
    stable = stabilize(loglik)
    want_value = hand_stable_loglik(theta, x)
    want_grad = jax.grad(hand_stable_loglik)(theta, x)
    np.testing.assert_allclose(jax.jit(stable)(theta, x), want_value, rtol=1e-13)
    np.testing.assert_allclose(jax.grad(stable)(theta, x), want_grad, rtol=1e-11)
    np.testing.assert_allclose(jax.jit(jax.grad(stable))(theta, x), want_grad, rtol=1e-11)
    np.testing.assert_allclose(
        jax.grad(stable, argnums=1)(theta, x), jax.grad(hand_stable_loglik, 1)(theta, x), rtol=1e-11
    )


def test_vmap_over_a_batch_of_data(regression):
    theta, x = regression
    batch = jnp.stack([x, 2 * x, -x])
    stable = jax.vmap(stabilize(loglik), (None, 0))
    np.testing.assert_allclose(stable(theta, batch), jax.vmap(hand_stable_loglik, (None, 0))(theta, batch), rtol=1e-13)
    grads = jax.vmap(jax.grad(stabilize(loglik)), (None, 0))(theta, batch)
    np.testing.assert_allclose(grads, jax.vmap(jax.grad(hand_stable_loglik), (None, 0))(theta, batch), rtol=1e-11)


def test_hessian_is_finite_and_matches_the_softmax_covariance(x64):
    x = jnp.asarray(BIG)
    assert not np.all(np.isfinite(jax.hessian(naive_logsumexp)(x)))
    s = np.asarray(jax.nn.softmax(x))
    hessian = jax.hessian(stabilize(naive_logsumexp))(x)
    np.testing.assert_allclose(hessian, np.diag(s) - np.outer(s, s), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(jax.jit(jax.hessian(stabilize(naive_logsumexp)))(x), hessian, rtol=1e-14)


def test_forward_mode_on_the_function_itself_is_refused_by_jax_as_documented():
    # (docs/jax.md, Limits: the derivative is a custom_vjp; jax.hessian above works)
    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(stabilize(naive_logsumexp), (jnp.ones(3),), (jnp.ones(3),))


def test_gradient_of_gradient_in_reverse_mode(x64):
    x = jnp.asarray(BIG)
    stable = stabilize(naive_logsumexp)
    s = np.asarray(jax.nn.softmax(x))
    # d/dx of sum(grad · w) is the Hessian times w
    w = jnp.asarray([1.0, -2.0, 0.5, 3.0])
    hvp = jax.grad(lambda v: jnp.vdot(jax.grad(stable)(v), w))(x)
    np.testing.assert_allclose(hvp, (np.diag(s) - np.outer(s, s)) @ np.asarray(w), rtol=1e-12)


def naive_log_softmax_dot(x):
    return jnp.sum(jnp.arange(x.shape[-1]) * (x - jnp.log(jnp.sum(jnp.exp(x), axis=-1, keepdims=True))))


@pytest.mark.parametrize("fn", [naive_logsumexp, naive_log_softmax_dot, lambda x: jnp.sum(jax.nn.softmax(x) ** 2)])
@pytest.mark.parametrize("x", [[1.0, 1.0, 1.0], [2.0, 2.0, -1.0], [800.0, 800.0, 799.0]], ids=["all", "two", "big"])
def test_second_derivatives_at_tied_maxima(x64, fn, x):
    # the lowered softmax pins its max entries to exp(0); JAX's own derivative of that select
    # is 0, which at tied maxima dropped their part of the Hessian (it was 0 at [1, 1, 1])
    x, w = jnp.asarray(x), jnp.asarray([1.0, -2.0, 0.5])
    shifted = x - jnp.max(x)  # the exact Hessian, from the formula in a range where it is safe
    expected = jax.hessian(fn)(shifted) @ w
    stable = stabilize(fn)
    np.testing.assert_allclose(jax.hessian(stable)(x) @ w, expected, rtol=1e-12, atol=1e-15)
    hvp = jax.grad(lambda v: jnp.vdot(jax.grad(stable)(v), w))(x)
    np.testing.assert_allclose(hvp, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("x64_mode", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("fn", [jax.scipy.special.xlogy, jax.scipy.special.xlog1py], ids=["xlogy", "xlog1py"])
def test_jax_scipy_xlogy_keeps_its_derivative_in_x_at_zero(x64_mode, fn):
    # jax.scipy's xlogy guards x * log(y) by `x != 0 | y != y`: imported as written, the guard cut
    # d/dx at x = 0, which is log(y); JAX's own custom derivative gives log(y) there too
    with jax.enable_x64(x64_mode):
        x, y = jnp.asarray([0.0, 2.0, 0.0]), jnp.asarray([0.5, 3.0, 4.0])
        total = lambda a, b: jnp.sum(fn(a, b))  # noqa: E731
        for got, want in zip(jax.grad(stabilize(total), (0, 1))(x, y), jax.grad(total, (0, 1))(x, y)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-6 if not x64_mode else 1e-15)


def test_a_function_closing_over_a_traced_value(regression):
    theta, x = regression

    def outer(theta, x):  # stabilize inside the caller's trace: the closure holds jit's tracer of x
        return stabilize(lambda t: loglik(t, x))(theta)

    np.testing.assert_allclose(jax.jit(outer)(theta, x), hand_stable_loglik(theta, x), rtol=1e-13)
    grads = jax.jit(jax.grad(outer, argnums=(0, 1)))(theta, x)
    for got, want in zip(grads, jax.grad(hand_stable_loglik, argnums=(0, 1))(theta, x)):
        np.testing.assert_allclose(got, want, rtol=1e-11)


def test_integer_labels_take_no_gradient_and_the_logits_get_softmax_minus_one_hot(x64):
    def cross_entropy(logits, labels):  # naive: log of a softmax written out
        one_hot = (labels[:, None] == jnp.arange(logits.shape[1])).astype(logits.dtype)
        log_p = jnp.log(jnp.exp(logits) / jnp.sum(jnp.exp(logits), axis=1, keepdims=True))
        return -jnp.sum(one_hot * log_p)

    logits = jnp.asarray([[1000.0, -1000.0, 0.0], [5.0, 800.0, 799.0]])
    labels = jnp.asarray([1, 2])
    assert not np.isfinite(cross_entropy(logits, labels))
    stable = stabilize(cross_entropy)
    log_p = np.asarray(jax.nn.log_softmax(logits, axis=1))
    np.testing.assert_allclose(stable(logits, labels), -(log_p[0, 1] + log_p[1, 2]), rtol=1e-15)
    one_hot = np.eye(3)[np.asarray(labels)]
    np.testing.assert_allclose(jax.grad(stable)(logits, labels), np.exp(log_p) - one_hot, rtol=1e-13, atol=1e-300)


def test_stop_gradient_keeps_its_meaning(x64):
    def f(x):
        return jnp.log(jnp.sum(jnp.exp(x))) * jax.lax.stop_gradient(x[0])

    x = jnp.asarray(BIG)
    grad = jax.grad(stabilize(f))(x)
    np.testing.assert_allclose(grad, x[0] * np.asarray(jax.nn.softmax(x)), rtol=1e-14, atol=1e-300)


def test_products_are_rounded_as_jax_jit_rounds_them(x64):
    """No guard against XLA's fused multiply-adds (that is `backend="jax"`'s promise): the
    lowered code rounds `a*b - a*c` exactly as the user's own `jax.jit` of it does."""

    def f(a, b, c):
        return a * b - a * c

    rng = np.random.default_rng(7)
    a, b = jnp.asarray(rng.normal(size=1000)), jnp.asarray(rng.uniform(1.0, 2.0, size=1000))
    ours, theirs = jax.jit(stabilize(f))(a, b, b), jax.jit(f)(a, b, b)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    jaxpr = str(jax.make_jaxpr(stabilize(f))(a, b, b))
    assert "select_n" not in jaxpr, jaxpr


# -- pytrees and static arguments ------------------------------------------------------------------------------
def test_pytrees_in_and_out(x64):
    def model(params, data):
        logits = data["x"] * params["scale"] + params["shift"][0]
        lse = jnp.log(jnp.sum(jnp.exp(logits)))
        return {"lse": lse, "parts": (logits, jnp.exp(logits - lse))}

    params = {"scale": jnp.float64(500.0), "shift": (jnp.asarray([1.0, 2.0, 3.0]),)}
    data = {"x": jnp.asarray([1.0, 2.0, 3.0])}
    out = stabilize(model)(params, data)
    assert set(out) == {"lse", "parts"} and len(out["parts"]) == 2
    logits = np.asarray([501.0, 1002.0, 1503.0])
    np.testing.assert_allclose(out["lse"], jax.nn.logsumexp(logits), rtol=1e-15)
    np.testing.assert_allclose(out["parts"][1], jax.nn.softmax(logits), rtol=1e-14, atol=1e-300)
    grads = jax.grad(lambda p: stabilize(model)(p, data)["lse"])(params)
    softmax = np.asarray(jax.nn.softmax(logits))
    np.testing.assert_allclose(grads["scale"], softmax @ np.asarray([1.0, 2.0, 3.0]), rtol=1e-14)
    np.testing.assert_allclose(grads["shift"][0], softmax, rtol=1e-14, atol=1e-300)


def test_static_argnums_retraces_per_value(x64):
    def tempered(x, temperature):
        return jnp.log(jnp.sum(jnp.exp(x / temperature))) * temperature

    stable = stabilize(tempered, static_argnums=1)
    x = jnp.asarray(BIG)
    for t in (1.0, 0.5):
        np.testing.assert_allclose(stable(x, t), t * jax.nn.logsumexp(x / t), rtol=1e-15)
        np.testing.assert_allclose(jax.grad(stable)(x, t), jax.nn.softmax(x / t), rtol=1e-13, atol=1e-300)
    assert len(stable._traced) == 2  # one trace per static value


def test_decorator_forms(x64):
    @stabilize
    def plain(x):
        return jnp.log(jnp.sum(jnp.exp(x)))

    @stabilize(static_argnums=(1,))
    def scaled(x, k):
        return k * jnp.log(jnp.sum(jnp.exp(x)))

    x = jnp.asarray(BIG)
    np.testing.assert_allclose(plain(x), jax.nn.logsumexp(x), rtol=1e-15)
    np.testing.assert_allclose(scaled(x, 3), 3 * jax.nn.logsumexp(x), rtol=1e-15)
    assert plain.__name__ == "plain"


# -- a long recursion: the HMM forward algorithm in lax.scan --------------------------------------------------------
def hmm_naive(log_transition, log_emission, log_initial):
    def step(alpha, log_b):
        alpha = jnp.log(jnp.sum(jnp.exp(alpha[:, None] + log_transition), axis=0)) + log_b
        return alpha, None

    alpha, _ = jax.lax.scan(step, log_initial + log_emission[0], log_emission[1:])
    return jnp.log(jnp.sum(jnp.exp(alpha)))


def hmm_by_hand(log_transition, log_emission, log_initial):
    def step(alpha, log_b):
        return jax.nn.logsumexp(alpha[:, None] + log_transition, axis=0) + log_b, None

    alpha, _ = jax.lax.scan(step, log_initial + log_emission[0], log_emission[1:])
    return jax.nn.logsumexp(alpha)


def test_hmm_forward_algorithm_over_5000_steps(x64):
    rng = np.random.default_rng(2)
    K, T = 3, 5000
    log_transition = jnp.asarray(np.log(rng.dirichlet(np.ones(K), size=K)))
    log_emission = jnp.asarray(-rng.uniform(1.0, 30.0, size=(T, K)))
    log_initial = jnp.asarray(np.log(np.ones(K) / K))
    args = (log_transition, log_emission, log_initial)
    assert not np.isfinite(hmm_naive(*args))  # the forward variables underflow: log(0)
    stable = stabilize(hmm_naive)
    np.testing.assert_allclose(stable(*args), hmm_by_hand(*args), rtol=1e-12)
    grads = jax.jit(jax.grad(stable, argnums=(0, 1, 2)))(*args)
    wanted = jax.grad(hmm_by_hand, argnums=(0, 1, 2))(*args)
    for got, want in zip(grads, wanted):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


# -- what it cannot import, and what it reports ----------------------------------------------------------------
def test_an_unimportable_primitive_stays_a_jax_call_and_the_rest_is_recognised(x64):
    def sorted_and_naive(x):
        return jnp.sum(jnp.sort(x) * jnp.arange(3.0)) + jnp.log(jnp.sum(jnp.exp(1000 * x)))

    def by_hand(x):
        return jnp.sum(jnp.sort(x) * jnp.arange(3.0)) + jax.nn.logsumexp(1000 * x)

    stable = stabilize(sorted_and_naive)
    x = jnp.asarray([3.0, 1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about: the function is stabilised
        value, grad = stable(x), jax.grad(stable)(x)
    assert not np.isfinite(sorted_and_naive(x))
    np.testing.assert_allclose(value, by_hand(x), rtol=1e-15)
    np.testing.assert_allclose(grad, jax.grad(by_hand)(x), rtol=1e-15)  # JAX's own gradient of the sort
    np.testing.assert_allclose(jax.jit(jax.grad(stable))(x), grad, rtol=1e-15)
    batch = jnp.stack([x, x[::-1] - 1.0])
    np.testing.assert_allclose(jax.vmap(stable)(batch), jax.vmap(by_hand)(batch), rtol=1e-15)
    np.testing.assert_allclose(jax.hessian(stable)(x), jax.hessian(by_hand)(x), atol=1e-300)
    explained = stable.explain(x)
    assert "logsumexp_from_naive" in explained
    sort_line = line_of(sorted_and_naive, "jnp.sort")
    assert f"{HERE}:{sort_line}  sort: no stablegrad op, kept as a JAX call" in explained


def test_a_kept_call_inside_a_loop_body_is_listed_and_differentiated(x64):
    def running(xs):
        def step(c, x):
            return c + jnp.log(jnp.sum(jnp.exp(jnp.cumsum(x)))), None

        return jax.lax.scan(step, 0.0, xs)[0]

    def by_hand(xs):
        return jnp.sum(jax.vmap(lambda x: jax.nn.logsumexp(jnp.cumsum(x)))(xs))

    xs = jnp.asarray([[300.0, 400.0], [-2.0, 1.0], [1.0, 900.0]])
    stable = stabilize(running)
    assert not np.isfinite(running(xs))
    np.testing.assert_allclose(stable(xs), by_hand(xs), rtol=1e-15)
    np.testing.assert_allclose(jax.grad(stable)(xs), jax.grad(by_hand)(xs), rtol=1e-15)
    assert "cumsum: no stablegrad op, kept as a JAX call" in stable.explain(xs)


def test_a_function_whose_values_our_graph_cannot_hold_runs_as_written():
    def noisy(x, key):  # jax.random computes on PRNG key arrays, which are not NumPy arrays
        return jnp.sum(x * jax.random.normal(key, x.shape))

    stable = stabilize(noisy)
    x, key = jnp.asarray([3.0, 1.0, 2.0]), jax.random.PRNGKey(0)
    with pytest.warns(UserWarning, match=r"'random_wrap' returns a key<fry>\[\], which our graph cannot hold"):
        value = stable(x, key)
    assert float(value) == float(noisy(x, key))
    np.testing.assert_allclose(jax.grad(stable)(x, key), jax.random.normal(key, x.shape))
    assert "not stabilised" in stable.explain(x, key)
    with warnings.catch_warnings():  # warned once per signature, not on every call
        warnings.simplefilter("error")
        stable(x, key)


def test_explain_names_the_recognition_and_the_users_line(x64):
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        stable = stabilize(naive_row_logsumexp, explain=True)
        stable(jnp.ones((2, 3)))
    printed = buffer.getvalue()
    line = line_of(naive_row_logsumexp, "jnp.log(jnp.sum(jnp.exp(x), axis=1))")
    assert "stabilize(naive_row_logsumexp):" in printed
    assert f"{HERE}:{line}" in printed and "logsumexp_from_naive" in printed
    assert stable.explain(jnp.ones((2, 3))) in printed  # the same text, on demand


def test_explain_names_lines_inside_a_scan_body(x64):
    args = (jnp.zeros((3, 3)), jnp.zeros((4, 3)), jnp.zeros(3))
    text = stabilize(hmm_naive).explain(*args)
    line = line_of(hmm_naive, "alpha = jnp.log(jnp.sum(")
    assert f"{HERE}:{line}" in text and "logsumexp" in text


def test_a_function_with_nothing_to_recognise_says_so():
    assert "no rewrites" in stabilize(lambda x: x * 2.0).explain(jnp.ones(2))


# -- clear errors ------------------------------------------------------------------------------------------------
def test_a_non_array_argument_is_named():
    stable = stabilize(lambda x, options: x * options["k"])
    with pytest.raises(StabilizeError, match=r"argument options\['k'\] is a str.*static_argnums"):
        stable(jnp.ones(2), {"k": "two"})


def test_wrong_arity_is_reported_with_the_function_name():
    with pytest.raises(StabilizeError, match=r"stabilize\(naive_logaddexp\).*missing.*'b'"):
        stabilize(naive_logaddexp)(jnp.ones(2))


def test_static_argnums_out_of_range_and_unhashable():
    with pytest.raises(StabilizeError, match="static_argnums names argument 3"):
        stabilize(naive_logaddexp, static_argnums=3)(1.0, 2.0)
    with pytest.raises(StabilizeError, match="hashable"):
        stabilize(lambda x, k: x * len(k), static_argnums=1)(jnp.ones(2), [1, 2])


# -- a sampler: NUTS on a mixture whose naive potential has NaN gradients -----------------------------------------
def test_numpyro_nuts_samples_a_mixture_with_a_stabilized_potential(x64):
    numpyro = pytest.importorskip("numpyro", reason="numpyro is not installed (pip install numpyro)")
    from numpyro.infer import MCMC, NUTS

    rng = np.random.default_rng(3)
    truth = np.array([-2.0, 3.0])
    data = jnp.asarray(np.concatenate([rng.normal(truth[0], 1.0, 150), rng.normal(truth[1], 1.0, 150)]))

    def potential(mu):
        # far from the data the log densities reach -5000: exp underflows to 0, log(0) = -inf, gradient NaN
        log_densities = -0.5 * (data[:, None] - mu[None, :]) ** 2 + jnp.log(0.5)
        return -jnp.sum(jnp.log(jnp.sum(jnp.exp(log_densities), axis=1))) + 0.5 * jnp.sum(mu**2) / 100

    init = jnp.asarray([-100.0, 100.0])
    assert not np.all(np.isfinite(jax.grad(potential)(init)))  # plain JAX: no gradient to start from
    mcmc = MCMC(NUTS(potential_fn=stabilize(potential)), num_warmup=100, num_samples=100, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), init_params=init)
    samples = np.asarray(mcmc.get_samples())
    assert np.all(np.isfinite(samples))
    np.testing.assert_allclose(np.sort(samples.mean(axis=0)), truth, atol=0.4)
    del numpyro
