"""Products (stablegrad.ops.linalg): matmul / `@`, dot, outer, einsum, tensordot; and dense
linear algebra (stablegrad.ops.decompositions, `sg.linalg`): cholesky, solve_triangular,
solve, inv, det, slogdet.

Shapes come from hypothesis (gufunc signatures for matmul, letter sizes for einsum,
batch axes for the decompositions), size-0 and size-1 extents and broadcast batch axes
included; values are checked against NumPy/SciPy, pullbacks against finite differences
at first and second order (the cross terms of a bilinear map are what the second-order
check sees).  The decompositions draw well-conditioned matrices: SPD `a aᵀ + n·I` for
cholesky, a dominant diagonal (either sign, so determinants of both signs) elsewhere.
"""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import decompositions as dec
from stablegrad.ops import linalg as la
from stablegrad.testing import check_grads

from .helpers import (
    BACKEND,
    assert_same,
    evaluate,
    float32_examples,
    numpy_value,
    pullback_examples,
    seeds,
    shapes,
    value_examples,
)

COVERED = {la.Matmul, la.Einsum, dec.Cholesky, dec.SolveTriangular, dec.Solve, dec.Inv, dec.Det, dec.Slogdet}


def _arrays(draw, *shape_list):
    rng = np.random.default_rng(draw(seeds))
    return [rng.standard_normal(s) for s in shape_list]


@st.composite
def matmul_cases(draw):
    (sa, sb), _ = draw(
        hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, min_side=0, max_side=3)
    )
    fn = draw(st.sampled_from([lambda a, b: a @ b, sg.matmul]))
    return fn, np.matmul, _arrays(draw, sa, sb)


@st.composite
def rmatmul_cases(draw):
    """ndarray @ Variable: NumPy defers to the Variable's __rmatmul__."""
    (sa, sb), _ = draw(hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=1, max_side=3))
    (a,) = _arrays(draw, sa)
    return (lambda b: a @ b), (lambda b: a @ b), _arrays(draw, sb)


@st.composite
def dot_cases(draw):
    sa = draw(shapes(max_dims=3))
    if not sa:
        sb = draw(shapes(max_dims=2))
    elif draw(st.booleans()):
        sb = (sa[-1],)
    else:
        sb = (*draw(shapes(max_dims=1)), sa[-1], draw(st.integers(0, 3)))
    return sg.dot, np.dot, _arrays(draw, sa, sb)


@st.composite
def outer_cases(draw):
    return sg.outer, np.outer, _arrays(draw, draw(shapes(max_dims=2)), draw(shapes(max_dims=2)))


EINSUM = [
    "ij,jk->ik",
    "ij,jk",
    "i,i->",
    "i,i",
    "ij->ji",
    "ij->",
    "ij->j",
    "ij",
    "i,j->ij",
    "ij,ij->ij",
    "ijk,ikl->ijl",
    "bij,j->bi",
    "ij,jk,kl->il",
    "...ij,...jk->...ik",
    "...i,...i->...",
    "i...->...",
    "ij,kl->",
]


@st.composite
def einsum_cases(draw):
    subscripts = draw(st.sampled_from(EINSUM))
    letters = sorted(set(subscripts) - set(",->."))
    size = {c: draw(st.integers(0, 3)) for c in letters}
    batch = draw(shapes(max_dims=2))
    terms = subscripts.split("->")[0].split(",")
    shape_list = []
    for term in terms:
        core = tuple(size[c] for c in term.replace("...", ""))
        if "..." in term:
            lead = term.index("...")
            drop = draw(st.integers(0, len(batch)))  # operands may broadcast over fewer batch axes
            shape_list.append(core[:lead] + batch[drop:] + core[lead:])
        else:
            shape_list.append(core)
    return (
        (lambda *xs: sg.einsum(subscripts, *xs)),
        (lambda *xs: np.einsum(subscripts, *xs)),
        _arrays(draw, *shape_list),
    )


@st.composite
def tensordot_cases(draw):
    form = draw(st.sampled_from(["int", "pairs"]))
    if form == "int":
        k = draw(st.integers(0, 2))
        shared = draw(shapes(min_dims=k, max_dims=k))
        sa = (*draw(shapes(max_dims=2)), *shared)
        sb = (*shared, *draw(shapes(max_dims=2)))
        axes = k
    else:
        sa = draw(shapes(min_dims=1, max_dims=3))
        ia = draw(st.permutations(range(len(sa))))[: draw(st.integers(1, len(sa)))]
        rest = draw(shapes(max_dims=2))
        sb_list = list(rest)
        ib = []
        for i in ia:
            position = draw(st.integers(0, len(sb_list)))
            sb_list.insert(position, sa[i])
            ib = [j + (j >= position) for j in ib] + [position]
        sb = tuple(sb_list)
        axes = (list(ia), [j - len(sb) if draw(st.booleans()) else j for j in ib])
    return (lambda a, b: sg.tensordot(a, b, axes)), (lambda a, b: np.tensordot(a, b, axes)), _arrays(draw, sa, sb)


CASES = {
    "matmul": matmul_cases(),
    "rmatmul": rmatmul_cases(),
    "dot": dot_cases(),
    "outer": outer_cases(),
    "einsum": einsum_cases(),
    "tensordot": tensordot_cases(),
}


@pytest.mark.parametrize("name", list(CASES))
@given(data=st.data())
@value_examples
def test_product_value(name, data):
    fn, ref, arrays = data.draw(CASES[name])
    symbolic = data.draw(st.booleans())
    out, value = evaluate(fn, arrays, symbolic)
    assert_same(out, value, numpy_value(ref, arrays), symbolic, rtol=1e-12, atol=1e-12)
    float32 = [a.astype(np.float32) for a in arrays]
    out32, value32 = evaluate(fn, float32, symbolic)
    assert_same(out32, value32, numpy_value(ref, float32), symbolic, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
@given(data=st.data())
@pullback_examples
def test_product_pullback(name, data):
    fn, _, arrays = data.draw(CASES[name])
    check_grads(fn, arrays, order=2, symbolic_shapes=data.draw(st.booleans()))


def test_einsum_diagonal_value_and_clear_gradient_error():
    """A repeated letter within one operand (a diagonal) has a value but no gradient yet: it says so."""
    x = np.arange(9.0).reshape(3, 3)
    out, value = evaluate(lambda v: sg.einsum("ii->i", v), [x])
    assert_same(out, value, np.einsum("ii->i", x), symbolic=False)
    with pytest.raises(sg.GradientError, match="einsum"):
        sg.grad(sg.sum(out), out.owner.inputs[0])


def test_products_promote_like_numpy():
    a32, b64 = np.ones((2, 2), np.float32), np.ones((2, 2))
    for fn, ref in [(sg.matmul, np.matmul), (sg.dot, np.dot), (sg.outer, np.outer)]:
        out, value = evaluate(fn, [a32, b64])
        assert out.dtype == value.dtype == ref(a32, b64).dtype
    ints = np.ones((2, 2), np.int32)
    out, value = evaluate(sg.matmul, [ints, ints])
    assert out.dtype == value.dtype == np.matmul(ints, ints).dtype


# -- dense linear algebra (sg.linalg) ---------------------------------------------------------------------
def _spd(rng, batch, n):
    a = rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _dominant(rng, batch, n):
    """A well-conditioned matrix: noise plus a diagonal of ±(n + 1), so its determinant has either sign."""
    signs = rng.choice([-1.0, 1.0], (*batch, n))
    return 0.5 * rng.standard_normal((*batch, n, n)) + (n + 1) * signs[..., None] * np.eye(n)


def _triangle(a, lower):
    return np.tril(a) if lower else np.triu(a)


@st.composite
def _square_batch(draw):
    """(rng, batch shape, n): batch axes of size 0 to 2, matrices of size 1 to 3."""
    return np.random.default_rng(draw(seeds)), draw(shapes(max_dims=2, max_side=2)), draw(st.integers(1, 3))


@st.composite
def _solve_shapes(draw):
    """(rng, a's batch, n, b's shape): b a vector (n,) or a stack (..., n, k) broadcasting with a's batch."""
    (batch_a, batch_b), _ = draw(broadcastable_batches)
    n = draw(st.integers(1, 3))
    b_shape = (n,) if draw(st.booleans()) else (*batch_b, n, draw(st.integers(1, 2)))
    return np.random.default_rng(draw(seeds)), batch_a, n, b_shape


broadcastable_batches = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=2)


@st.composite
def cholesky_cases(draw):
    rng, batch, n = draw(_square_batch())
    return sg.linalg.cholesky, np.linalg.cholesky, [_spd(rng, batch, n)]


@st.composite
def solve_triangular_cases(draw):
    rng, batch, n, b_shape = draw(_solve_shapes())
    lower, trans, unit = draw(st.booleans()), draw(st.sampled_from([0, 1, "N", "T", "C"])), draw(st.booleans())
    # noise off the diagonal (the other triangle is not read; the diagonal is, and noise there made a
    # 1×1 matrix as small as 0.04, where the finite differences of a second derivative miss by 1e-5)
    a = _dominant(rng, batch, n) + rng.standard_normal((*batch, n, n)) * (1.0 - np.eye(n))

    def ref(a, b):
        t = _triangle(a, lower)
        if unit:
            eye = np.eye(n, dtype=a.dtype)
            t = t - np.diagonal(t, axis1=-2, axis2=-1)[..., None] * eye + eye
        return np.linalg.solve(np.swapaxes(t, -1, -2) if trans in (1, "T", "C") else t, b)

    def fn(a, b):
        return sg.linalg.solve_triangular(a, b, lower=lower, trans=trans, unit_diagonal=unit)

    return fn, ref, [a, rng.standard_normal(b_shape)]


@st.composite
def solve_cases(draw):
    rng, batch, n, b_shape = draw(_solve_shapes())
    return sg.linalg.solve, np.linalg.solve, [_dominant(rng, batch, n), rng.standard_normal(b_shape)]


def _unary_cases(fn, ref):
    @st.composite
    def cases(draw):
        rng, batch, n = draw(_square_batch())
        return fn, ref, [_dominant(rng, batch, n)]

    return cases()


DECOMPOSITIONS = {
    "cholesky": cholesky_cases(),
    "solve_triangular": solve_triangular_cases(),
    "solve": solve_cases(),
    "inv": _unary_cases(sg.linalg.inv, np.linalg.inv),
    "det": _unary_cases(sg.linalg.det, np.linalg.det),
    "slogdet": _unary_cases(lambda a: sg.linalg.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1]),
    "slogdet_sign": _unary_cases(lambda a: sg.linalg.slogdet(a)[0], lambda a: np.linalg.slogdet(a)[0]),
}


@pytest.mark.parametrize("name", list(DECOMPOSITIONS))
@given(data=st.data())
@value_examples
def test_decomposition_value(name, data):
    fn, ref, arrays = data.draw(DECOMPOSITIONS[name])
    symbolic = data.draw(st.booleans())
    out, value = evaluate(fn, arrays, symbolic)
    assert_same(out, value, numpy_value(ref, arrays), symbolic, rtol=1e-11, atol=1e-12)
    float32 = [a.astype(np.float32) for a in arrays]
    out32, value32 = evaluate(fn, float32, symbolic)
    assert_same(out32, value32, numpy_value(ref, float32), symbolic, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", [n for n in DECOMPOSITIONS if n != "slogdet_sign"])
@given(data=st.data())
@pullback_examples
def test_decomposition_pullback(name, data):
    fn, _, arrays = data.draw(DECOMPOSITIONS[name])
    check_grads(fn, arrays, order=2, symbolic_shapes=data.draw(st.booleans()))


@pytest.mark.parametrize("name", [n for n in DECOMPOSITIONS if n != "slogdet_sign"])
@given(data=st.data())
@float32_examples
def test_decomposition_pullback_float32(name, data):
    """float32 operands get float32 gradients, close to the float64 ones."""
    fn, _, arrays = data.draw(DECOMPOSITIONS[name])
    results = {}
    for dtype in ("float32", "float64"):
        typed = [a.astype(np.float32).astype(dtype) for a in arrays]
        xs = [sg.tensor(f"a{i}", shape=a.shape, dtype=dtype) for i, a in enumerate(typed)]
        out = fn(*xs)
        w = np.random.default_rng(0).standard_normal(out.type.shape).astype(dtype)
        results[dtype] = sg.function(xs, sg.grad(sg.sum(out * w), xs))(*typed)
    for g32, g64 in zip(results["float32"], results["float64"]):
        assert g32.dtype == np.float32
        np.testing.assert_allclose(g32, g64, rtol=1e-3, atol=1e-4)


def test_slogdet_of_the_hilbert_matrix_against_mpmath():
    """Condition 1.5e10, det 2.7e-33: log det to 1e-10 relative (6e-9 absolute) and its gradient, inv(H)ᵀ,
    to the 1e-6 the conditioning allows (both against mpmath on the same float64 entries)."""
    n = 8
    h = 1.0 / (np.arange(n)[:, None] + np.arange(n)[None, :] + 1.0)
    a = sg.matrix("a")
    sign, logdet = sg.linalg.slogdet(a)
    got_sign, got, grad = sg.function([a], [sign, logdet, sg.grad(logdet, a)])(h)
    with mpmath.workdps(60):
        exact = mpmath.matrix(h.tolist())
        expected = float(mpmath.log(mpmath.det(exact)))
        expected_grad = np.array((exact**-1).T.tolist(), dtype=float)
    assert got_sign == 1.0
    assert abs(got - expected) < 1e-7 * abs(expected)
    assert np.linalg.norm(grad - expected_grad) < 1e-5 * np.linalg.norm(expected_grad)


def test_slogdet_gradient_goes_through_solves_not_an_inverse():
    a = sg.matrix("a")
    g = sg.grad(sg.linalg.slogdet(a)[1], a)
    ops = {type(node.op) for node in sg.graph.basic.toposort([g])}
    assert dec.Solve in ops and dec.Inv not in ops


def test_slogdet_does_not_overflow_where_det_does():
    a = np.diag(np.full(4, 1e-100))
    x = sg.matrix("x")
    sign, logdet = sg.function([x], sg.linalg.slogdet(x))(a)
    assert sign == 1.0 and np.isclose(logdet, 4 * np.log(1e-100), rtol=1e-15)
    assert sg.function([x], sg.linalg.det(x))(a) == 0.0  # det underflows: this is why slogdet exists


def test_cholesky_reads_only_the_lower_triangle_and_its_gradient_is_lower():
    rng = np.random.default_rng(1)
    a = _spd(rng, (), 3)
    polluted = a + np.triu(rng.standard_normal((3, 3)), 1)
    x = sg.matrix("x")
    l = sg.linalg.cholesky(x)
    f = sg.function([x], [l, sg.grad(sg.sum(l * rng.standard_normal((3, 3))), x)])
    (l1, g1), (l2, g2) = f(a), f(polluted)
    np.testing.assert_allclose(l1, l2, rtol=1e-14)
    assert np.all(np.triu(g1, 1) == 0) and np.all(np.triu(g2, 1) == 0)


def test_gradient_of_a_gaussian_log_density_through_cholesky():
    """log N(y; 0, Σ) = -½ yᵀΣ⁻¹y - ½ log det Σ - (n/2) log 2π, with Σ = L Lᵀ: the usual model code."""
    rng = np.random.default_rng(2)
    cov, y = _spd(rng, (), 4), rng.standard_normal(4)

    def log_density(s, v):
        l = sg.linalg.cholesky(s)
        z = sg.linalg.solve_triangular(l, v, lower=True)
        return -0.5 * sg.sum(z * z) - 0.5 * sg.linalg.slogdet(s)[1] - 2 * np.log(2 * np.pi)

    check_grads(log_density, [cov, y], order=2)
    s, v = sg.matrix("s"), sg.vector("v")
    expected = -0.5 * y @ np.linalg.solve(cov, y) - 0.5 * np.linalg.slogdet(cov)[1] - 2 * np.log(2 * np.pi)
    np.testing.assert_allclose(sg.function([s, v], log_density(s, v))(cov, y), expected, rtol=1e-13)


def test_integer_matrices_compute_in_float64():
    out, value = evaluate(sg.linalg.inv, [np.array([[2, 0], [0, 4]])])
    assert out.dtype == value.dtype == np.float64
    np.testing.assert_array_equal(value, [[0.5, 0.0], [0.0, 0.25]])


_SQUARE_OPS = [sg.linalg.cholesky, sg.linalg.inv, sg.linalg.det, sg.linalg.slogdet]


@pytest.mark.parametrize("fn", _SQUARE_OPS, ids=lambda f: f.__name__)
def test_non_square_matrices_are_a_shape_error_naming_the_op_and_line(fn):
    x = sg.tensor("x", shape=(2, 3, 4))
    with pytest.raises(sg.ShapeError, match=rf"{fn.__name__}: a must be square .*\(2, 3, 4\)") as info:
        fn(x)
    assert info.value.location is not None and info.value.location[0] == __file__
    with pytest.raises(sg.ShapeError, match=fn.__name__):
        fn(sg.vector("v"))


@pytest.mark.parametrize("fn", [sg.linalg.solve, sg.linalg.solve_triangular], ids=lambda f: f.__name__)
def test_solves_check_their_operands(fn):
    a = sg.tensor("a", shape=(3, 3))
    with pytest.raises(sg.ShapeError, match=rf"{fn.__name__}: a is 3×3 but b has 2 rows") as info:
        fn(a, sg.tensor("b", shape=(2, 1)))
    assert info.value.location[0] == __file__
    with pytest.raises(sg.ShapeError, match=fn.__name__):
        fn(sg.tensor("a", shape=(3, 2)), sg.vector("b"))
    with pytest.raises(sg.ShapeError, match="scalar"):
        fn(a, sg.scalar("b"))
    with pytest.raises(sg.ShapeError, match=fn.__name__):
        fn(sg.tensor("a", shape=(2, 3, 3)), sg.tensor("b", shape=(4, 3, 1)))


@pytest.mark.parametrize("dtype", ["float16", "complex128"])
def test_unsupported_dtypes_are_refused(dtype):
    with pytest.raises(sg.DTypeError, match="cholesky"):
        sg.linalg.cholesky(sg.tensor("x", shape=(2, 2), dtype=dtype))


def test_solve_triangular_rejects_an_unknown_trans():
    with pytest.raises(ValueError, match="trans"):
        sg.linalg.solve_triangular(sg.matrix("a"), sg.vector("b"), trans="X")


def test_failures_at_run_time_name_the_op():
    """NumPy and Numba raise, naming the op; compiled XLA code cannot raise, and answers NaN (or inf)."""
    x = sg.matrix("x")
    cholesky = sg.function([x], sg.linalg.cholesky(x))
    solve = sg.function([x], sg.linalg.solve(x, np.ones(2)))
    if BACKEND == "jax":
        np.testing.assert_array_equal(cholesky(-np.eye(2)), [[np.nan, 0.0], [np.nan, np.nan]])
        assert not np.isfinite(solve(np.zeros((2, 2)))).any()
        return
    with pytest.raises(sg.ExecutionError, match="cholesky"):
        cholesky(-np.eye(2))
    with pytest.raises(sg.ExecutionError, match="solve"):
        solve(np.zeros((2, 2)))


def test_cholesky_on_error_nan_marks_only_the_failed_matrices():
    """The same answer on every backend: NaN in the lower triangle of each matrix that is not positive
    definite, zeros above it, and the other matrices of the stack factored as NumPy factors them."""
    good, bad = np.array([[4.0, 2.0], [2.0, 5.0]]), np.array([[1.0, 2.0], [2.0, 1.0]])
    a = sg.tensor("a", (None, 2, 2))
    got = sg.function([a], sg.linalg.cholesky(a, on_error="nan"))(np.stack([good, bad, -np.eye(2)]))
    np.testing.assert_array_equal(got[0], np.linalg.cholesky(good))
    for failed in got[1:]:
        np.testing.assert_array_equal(failed, [[np.nan, 0.0], [np.nan, np.nan]])
    with pytest.raises(sg.ShapeError, match="cholesky: on_error must be 'raise' or 'nan', got 'ignore'"):
        sg.linalg.cholesky(a, on_error="ignore")


def test_empty_matrices_as_numpy():
    for fn, ref in [
        (sg.linalg.inv, np.linalg.inv),
        (sg.linalg.det, np.linalg.det),
        (sg.linalg.cholesky, np.linalg.cholesky),
    ]:
        out, value = evaluate(fn, [np.zeros((2, 0, 0))])
        assert_same(out, value, ref(np.zeros((2, 0, 0))), symbolic=False)


def test_the_mpmath_evaluator_runs_the_decompositions_in_high_precision():
    """The audit's reference (`audit.mpmath_eval`) has an mpmath rule for each op, gradients included."""
    from stablegrad.audit.mpmath_eval import evaluate as mp_evaluate
    from stablegrad.audit.mpmath_eval import to_float

    rng = np.random.default_rng(3)
    spd, b = _spd(rng, (2,), 3), rng.standard_normal((3, 2))
    a, x = sg.tensor("a", shape=spd.shape), sg.matrix("x")
    outs = [
        sg.linalg.cholesky(a),
        sg.linalg.solve(a, x),
        sg.linalg.solve_triangular(a, x, lower=False, trans=1, unit_diagonal=True),
        sg.linalg.inv(a),
        sg.linalg.det(a),
        *sg.linalg.slogdet(a),
        sg.grad(sg.sum(sg.linalg.slogdet(a)[1]), a),
    ]
    exact = mp_evaluate([a, x], outs, [spd, b], dps=30)
    for got, want in zip(exact, sg.function([a, x], outs)(spd, b)):
        np.testing.assert_allclose(to_float(got), want, rtol=1e-12, atol=1e-14)
