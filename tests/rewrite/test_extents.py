"""A rewrite never changes a shape: with unknown extents the replacement must broadcast as the
written formula does (the engine checks every replacement's extents, `rewrite/extents.py`)."""

from __future__ import annotations

import numpy as np
import pytest

import stablegrad as sg
from stablegrad.graph.basic import toposort
from stablegrad.ops.math import Exp, Log
from stablegrad.rewrite.engine import Kind, Phase, Rebuilder, rewrite
from stablegrad.rewrite.extents import Extents

ONES, ZEROS, MASK = np.ones(5), np.zeros(5), np.array([True, False, True, True, False])

# formulas whose recognised form reads only `v`, while the written one broadcasts it against five entries
LOST_BROADCASTS = {
    "log(ones + exp(v))": lambda v: sg.log(ONES + sg.exp(v)),
    "log(exp(v) + ones)": lambda v: sg.log(sg.exp(v) + ONES),
    "log(ones + v)": lambda v: sg.log(ONES + v),
    "exp(v) - ones": lambda v: sg.exp(v) - ONES,
    "1 / (ones + exp(-v))": lambda v: 1 / (ONES + sg.exp(-v)),
    "ones - sigmoid(v)": lambda v: ONES - sg.sigmoid(v),
    "log(ones - exp(-|v| - 1))": lambda v: sg.log(ONES - sg.exp(-sg.abs(v) - 1)),
    "where(mask, exp(v), zeros)": lambda v: sg.where(MASK, sg.exp(v), ZEROS),
    "v * (ones / (v + 2))": lambda v: v * (ONES / (v + 2)),
    "log(sum(exp(v + zeros)))": lambda v: sg.log(sg.sum(sg.exp(v + ZEROS), keepdims=True)),
}


@pytest.mark.parametrize("build", LOST_BROADCASTS.values(), ids=LOST_BROADCASTS.keys())
@pytest.mark.parametrize("n", [1, 5])
def test_recognised_formulas_broadcast_as_written(build, n):
    v = sg.tensor("v", shape=(None,))
    out = build(v)
    cost = sg.sum(out * np.arange(1.0, 6.0))
    outputs = [out, sg.grad(cost, v)]
    args = [np.linspace(0.3, 0.7, n)]
    recognised = sg.function([v], outputs)(*args)
    written = sg.function([v], outputs, recognition=False)(*args)
    for got, expected in zip(recognised, written):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-13)


def test_the_example_of_the_report_is_right_and_still_recognised():
    v = sg.tensor("v", shape=(None,))
    cost = sg.sum(sg.log(np.ones(5) + sg.exp(v)))
    f = sg.function([v], [cost, sg.grad(cost, v)])
    value, grad = f(np.array([0.3]))
    np.testing.assert_allclose(value, 5 * np.log1p(np.exp(0.3)), rtol=1e-15)
    np.testing.assert_allclose(grad, [5 / (1 + np.exp(-0.3))], rtol=1e-15)
    assert "softplus" in f.explain()
    value, grad = f(np.array([1000.0]))  # the written formula overflows; the recognised one broadcasts back
    np.testing.assert_allclose([value, grad[0]], [5000.0, 5.0], rtol=1e-15)


def test_a_replacement_whose_extent_could_differ_is_refused():
    x, y = sg.tensor("x", shape=(None,)), sg.tensor("y", shape=(None,))

    @rewrite(Phase.CANONICALIZE, Kind.ALGEBRA, Exp)
    def exp_of_another_input(node):
        return sg.exp(y)  # compatible type, unrelated extent

    (out,) = Rebuilder([exp_of_another_input])([sg.exp(x)])
    assert out.owner.inputs[0] is x  # not rewritten


def test_a_replacement_that_drops_a_broadcast_is_broadcast_back():
    x = sg.tensor("x", shape=(None,))

    @rewrite(Phase.CANONICALIZE, Kind.ALGEBRA, Log)
    def drop_the_ones(node):  # log(ones + exp(x)) → log1p(exp(x)), the operand's shape only
        return sg.log1p(node.inputs[0].owner.inputs[1])

    (out,) = Rebuilder([drop_the_ones])([sg.log(ONES + sg.exp(x))])
    assert "BroadcastTo" in {type(n.op).__name__ for n in toposort([out])}
    assert sg.function([x], out)(np.array([0.5])).shape == (5,)


@pytest.mark.parametrize(
    "build",
    [
        lambda x, y: (sg.exp(x + y), sg.exp(y + x)),  # operands in either order
        lambda x, y: (sg.sum(x * y, axis=1), sg.sum(y * x, axis=1)),  # through a reduction
        lambda x, y: (sg.softplus(x + y), sg.log1p(sg.exp(x + y))),  # through a composite's body
        lambda x, y: (sg.transpose(x + y).T, y + x),  # through layout ops
        lambda x, y: (sg.expand_dims(sg.sum(x, axis=1), 1), sg.sum(x, axis=1, keepdims=True)),
    ],
)
def test_equal_extents_are_proven_equal(build):
    x, y = sg.tensor("x", shape=(None, None)), sg.tensor("y", shape=(None, None))
    a, b = build(x, y)
    extents = Extents()
    assert extents.conform(a, b) is a


def test_an_extent_with_fewer_sources_is_not_proven_equal():
    x, y = sg.tensor("x", shape=(None,)), sg.tensor("y", shape=(None,))
    extents = Extents()
    assert extents.conform(sg.exp(x), sg.exp(x + y)) is not None  # x broadcasts against x + y
    assert extents.conform(sg.exp(x), sg.exp(x + y)).owner.op.name == "broadcast_to"
    assert extents.conform(sg.exp(x + y), sg.exp(x)) is None  # y could widen it


def test_tracing_a_long_chain_is_linear_and_not_recursive():
    x = sg.tensor("x", shape=(None,))
    y = x
    for _ in range(20_000):
        y = y * 1.0001
    assert list(Extents().leaves(y, 0)) == [(x.id, 0)]
