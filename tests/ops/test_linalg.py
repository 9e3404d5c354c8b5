"""Products (stablegrad.ops.linalg): matmul / `@`, dot, outer, einsum, tensordot.

Shapes come from hypothesis (gufunc signatures for matmul, letter sizes for einsum),
size-0 and size-1 extents and broadcast batch axes included; values are checked against
NumPy, pullbacks against finite differences at first and second order (the cross terms
of a bilinear map are what the second-order check sees).
"""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stablegrad as sg
from stablegrad.ops import linalg as la
from stablegrad.testing import check_grads

from .helpers import assert_same, evaluate, numpy_value, pullback_examples, seeds, shapes, value_examples

COVERED = {la.Matmul, la.Einsum}


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
