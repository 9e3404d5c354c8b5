"""`scan` on the Numba backend: the whole loop compiled, with the NumPy backend's values."""

import numpy as np
import pytest

pytest.importorskip("numba")

import stablegrad as sg
from stablegrad.backends.numba_backend import scan_loop

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STABLEGRAD_CACHE_DIR", str(tmp_path))


@pytest.fixture
def compiled_loops(monkeypatch):
    """The loop sources generated while the test runs (None where a body could not be)."""
    made: list = []
    original = scan_loop.loop_source

    def spy(*args):
        text = original(*args)
        made.append(text)
        return text

    monkeypatch.setattr(scan_loop, "loop_source", spy)
    return made


def _hmm(steps, k, dtype="float64"):
    log_a = sg.tensor("log_a", (k, k), dtype)
    log_b = sg.tensor("log_b", (steps, k), dtype)
    log_pi = sg.tensor("log_pi", (k,), dtype)
    alpha, _ = sg.scan(
        lambda alpha, lb: (sg.logsumexp(alpha[:, None] + log_a, axis=0) + lb, None), log_pi + log_b[0], log_b[1:]
    )
    cost = sg.logsumexp(alpha, axis=0)
    return [log_a, log_b, log_pi], [cost, *sg.grad(cost, [log_a, log_b, log_pi])]


def _same(inputs, outputs, values, rtol):
    got = sg.function(inputs, outputs, backend="numba")(*values)
    expected = sg.function(inputs, outputs)(*values)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol * np.max(np.abs(np.nan_to_num(e))))
    return got


def test_an_hmm_forward_recursion_and_its_gradient_run_as_compiled_loops(compiled_loops):
    values = [RNG.normal(size=(6, 6)), RNG.normal(size=(300, 6)), RNG.normal(size=6)]
    _same(*_hmm(300, 6), values, rtol=1e-12)
    assert len(compiled_loops) == 2 and all(compiled_loops)  # the forward loop and its pullback's


def test_a_loop_stores_only_the_history_that_is_read(compiled_loops):
    """The forward loop stores the alphas its pullback reads back; the pullback's loop, whose
    carries are accumulators nobody reads step by step, and a value-only loop store none."""
    inputs, outputs = _hmm(40, 3)
    values = [RNG.normal(size=(3, 3)), RNG.normal(size=(40, 3)), RNG.normal(size=3)]
    _same(inputs, outputs, values, rtol=1e-13)
    forward, pullback = compiled_loops
    assert "h0[t, i0] = c0[i0]" in forward
    assert "h0[t]" not in pullback and "h1[t]" not in pullback
    _same(inputs, outputs[:1], values, rtol=1e-13)
    assert "h0[t]" not in compiled_loops[2]


def test_impossible_transitions_keep_the_gradient_finite(compiled_loops):
    with np.errstate(divide="ignore"):
        log_a = np.log(np.triu(RNG.uniform(0.1, 1.0, size=(5, 5))))  # -inf below the diagonal
    log_b = RNG.normal(size=(200, 5))
    log_b[50:60, 2] = -np.inf  # a state that cannot emit for a while
    got = _same(*_hmm(200, 5), [log_a, log_b, np.log(np.full(5, 0.2))], rtol=1e-12)
    assert all(np.all(np.isfinite(g)) for g in got[2:])  # logsumexp's gradient is 0 there, never NaN
    assert all(compiled_loops)


def test_a_loop_bodys_softmax_keeps_the_edge_columns(compiled_loops):
    """The compiled body's logsumexp gradient (one reciprocal a column, a product an entry),
    as the loop's output, on columns with nothing above -inf (0), with ties, with a +inf
    entry (its mass) and with a NaN: the NumPy backend's values, NaN where it has NaN."""
    a = sg.tensor("a", (4, 4), "float64")
    seq = sg.tensor("xs", (30, 4), "float64")

    def step(c, x):
        z = c[:, None] + a
        (softmax,) = sg.grad(sg.sum(sg.logsumexp(z, axis=0)), [a])
        return sg.logsumexp(z, axis=0) * 0.5 + x, softmax

    _, ys = sg.scan(step, sg.zeros(4), seq)
    log_a, xs = RNG.normal(size=(4, 4)), RNG.normal(size=(30, 4))
    log_a[:, 0] = -np.inf  # nothing above -inf: gradient 0
    log_a[1:3, 1] = 0.5  # ties at the max
    (got,) = _same([a, seq], [ys], [log_a, xs], rtol=1e-14)
    assert np.all(got[:, :, 0] == 0) and np.all(np.isfinite(got))
    with np.errstate(invalid="ignore"):
        for t, column, entry in [(7, 2, np.inf), (12, 3, np.nan)]:
            edge = RNG.normal(size=(30, 4))
            edge[t, column] = entry
            (got,) = _same([a, seq], [ys], [RNG.normal(size=(4, 4)), edge], rtol=1e-14)
            if entry == np.inf:  # the carry's +inf entry takes each column's whole mass
                assert np.all(got[t + 1, 2] == 1) and np.all(got[t + 1, [0, 1, 3]] == 0)
    assert compiled_loops and all(compiled_loops)


@pytest.mark.parametrize("axis, keepdims", [(0, False), (0, True), (1, False), (1, True)])
def test_a_loop_bodys_logsumexp_over_either_axis_keeps_the_edge_rows(compiled_loops, axis, keepdims):
    """A step's logsumexp of a matrix (its logs taken by one kernel call) down the columns or
    along the rows, kept or not, with rows of -inf, a +inf and a NaN entry, and ties."""
    z = sg.tensor("z", (6, 4, 4), "float64")

    def step(c, zt):
        lse = sg.logsumexp(zt + c, axis=axis, keepdims=keepdims)
        return c * 0.5, lse

    _, ys = sg.scan(step, sg.zeros(4), z)
    values = RNG.normal(size=(6, 4, 4))
    edges = [(0, np.s_[:, 0], -np.inf), (1, np.s_[:, 1], np.inf), (2, np.s_[1, :], np.nan), (3, np.s_[2, :], -np.inf)]
    for t, where, entry in edges:
        values[t][where if axis == 0 else where[::-1]] = entry
    values[4, :2, :2] = 0.75  # ties
    with np.errstate(invalid="ignore"):
        _same([z], [ys], [values], rtol=1e-15)
    assert compiled_loops and all(compiled_loops)


def test_a_carry_and_an_output_that_are_one_entry_constants_compile(compiled_loops, monkeypatch):
    """A new carry or a per-step output that is a one-entry constant is a number in the loop's
    code (`c0[:] = 1.0`), not an array to copy: the loop compiles instead of falling back."""

    def fell_back(*args):
        raise AssertionError(f"the loop fell back to NumPy: {args}")

    monkeypatch.setattr(scan_loop, "warn_unsupported", fell_back)
    xs = sg.tensor("xs", (5, 1), "float64")

    def step(carry, x):
        a, b = carry
        return (sg.ones(1), a * x + b), sg.ones(1)

    (a, b), ys = sg.scan(step, (sg.zeros(1), sg.ones(1)), xs)
    got = _same([xs], [a, b, ys], [np.arange(1.0, 6.0).reshape(5, 1)], rtol=0)
    assert got[1].tolist() == [15.0] and got[2].tolist() == [[1.0]] * 5
    assert "c0[:] = 1.0" in compiled_loops[0]


def test_a_float32_loop_stays_float32():
    values = [RNG.normal(size=(4, 4)), RNG.normal(size=(100, 4)), RNG.normal(size=4)]
    got = _same(*_hmm(100, 4, "float32"), [v.astype(np.float32) for v in values], rtol=2e-5)
    assert all(g.dtype == np.float32 for g in got)


def test_stacked_outputs_reverse_loops_and_several_carries(compiled_loops):
    xs = sg.tensor("xs", (50, 3), "float64")
    w = sg.tensor("w", (3,), "float64")

    def step(carry, x):
        a, b = carry
        return (b * 0.5 + x * w, a), sg.exp(a) - b  # the carries swap: each write-back reads the other

    (a, b), ys = sg.scan(step, (sg.zeros(3), sg.ones(3)), xs, reverse=True)
    cost = sg.sum(ys) + sg.sum(a * b)
    outputs = [a, b, ys, *sg.grad(cost, [xs, w])]
    _same([xs, w], outputs, [RNG.normal(size=(50, 3)), RNG.normal(size=3)], rtol=1e-13)
    assert compiled_loops and all(compiled_loops)


def test_a_body_with_an_op_it_has_no_code_for_runs_as_on_numpy(compiled_loops):
    xs = sg.tensor("xs", (20, 3), "float64")
    m = sg.tensor("m", (3, 3), "float64")
    final, _ = sg.scan(lambda c, x: (sg.tanh(c @ m) + x, None), sg.zeros(3), xs)  # matmul: not compiled
    _same(
        [xs, m], [final, *sg.grad(sg.sum(final), [xs, m])], [RNG.normal(size=(20, 3)), RNG.normal(size=(3, 3))], 1e-13
    )
    assert None in compiled_loops


def test_a_body_that_slices_and_updates_at_an_index_is_compiled(compiled_loops):
    xs = sg.tensor("xs", (40, 4), "float64")

    def step(c, x):
        c2 = c.at[0:2].add(x[1:3] * 0.5)  # an update at a basic index, and slices as views
        return sg.tanh(c2) * 0.9 + x, c[1:3] * 2.0

    final, ys = sg.scan(step, sg.zeros(4), xs)
    outputs = [final, ys, *sg.grad(sg.sum(final) + sg.sum(ys * ys), [xs])]
    _same([xs], outputs, [RNG.normal(size=(40, 4))], rtol=1e-13)
    assert compiled_loops and all(compiled_loops)
