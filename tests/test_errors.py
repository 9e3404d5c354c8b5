"""Bad input: every user mistake raises a stablegrad error naming the op, the argument and the user's line.

Where the error points is checked against the traceback itself (the line of this
file the exception came through), or, for errors raised while a compiled function
runs, against the line that built the failing node (captured with `lineno()`).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import stablegrad as sg
from stablegrad import DTypeError, ExecutionError, GradientError, InputError, ShapeError, StableGradError

HERE = os.path.basename(__file__)


def lineno() -> int:
    """The caller's line: `y, built = x[3], lineno()` records where y was built."""
    return sys._getframe(1).f_lineno


def line_in_this_file(exc: BaseException) -> int:
    """The innermost line of this file the exception propagated through."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == __file__:
            line = tb.tb_lineno
        tb = tb.tb_next
    assert line is not None
    return line


def assert_located(error: StableGradError, line: int) -> None:
    assert error.location == (__file__, line)
    assert str(error).endswith(f"(at {HERE}:{line})")


def assert_raises(error_class, build, *fragments: str) -> StableGradError:
    """`build()` raises `error_class` naming every fragment, located at the line that called it."""
    with pytest.raises(error_class) as info:
        build()
    error = info.value
    message = str(error)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert_located(error, line_in_this_file(error))
    return error


@pytest.fixture
def x():
    return sg.tensor("x", (3, 4))


# -- broadcasting ----------------------------------------------------------------------------------
def test_broadcast_mismatch_names_op_and_both_shapes(x):
    y = sg.tensor("y", (5,))
    assert_raises(ShapeError, lambda: x + y, "add:", "(3, 4)", "(5,)")
    assert_raises(ShapeError, lambda: x * y, "multiply:", "(3, 4)", "(5,)")
    assert_raises(ShapeError, lambda: sg.maximum(y, x), "maximum:", "(5,) and (3, 4)")


def test_broadcast_mismatch_with_unknown_extents_is_static_where_known():
    a = sg.tensor("a", (None, 4))
    b = sg.tensor("b", (2, 3))
    assert_raises(ShapeError, lambda: a - b, "subtract:", "(?, 4)", "(2, 3)")


def test_broadcast_mismatch_of_three_operands_names_all(x):
    assert_raises(ShapeError, lambda: sg.where(x > 0, x, sg.tensor("y", (2,))), "where:", "(3, 4)", "(2,)")


def test_broadcast_mismatch_at_run_time_names_op_shapes_and_build_line():
    a, b = sg.vector("a"), sg.vector("b")
    total, built = a + b, lineno()
    f = sg.function([a, b], total)
    with pytest.raises(ExecutionError) as info:
        f(np.ones(3), np.ones(5))
    message = str(info.value)
    assert message.startswith("add: ")
    assert "(3,)" in message and "(5,)" in message
    assert_located(info.value, built)


# -- matmul ------------------------------------------------------------------------------------------
def test_matmul_inner_dimension_mismatch_names_shapes_and_extents(x):
    w = sg.tensor("w", (5, 2))
    assert_raises(ShapeError, lambda: x @ w, "matmul:", "inner", "(3, 4)", "(5, 2)", "4 != 5")
    assert_raises(ShapeError, lambda: sg.dot(x, sg.vector("v", length=3)), "matmul:", "(3,)")


def test_matmul_of_a_scalar_is_an_error(x):
    assert_raises(ShapeError, lambda: sg.matmul(x, sg.scalar("s")), "matmul:", "scalar", "()")


def test_matmul_mismatch_at_run_time_names_op_and_build_line():
    a, b = sg.matrix("a"), sg.matrix("b")
    product, built = a @ b, lineno()
    f = sg.function([a, b], product)
    with pytest.raises(ExecutionError) as info:
        f(np.ones((2, 3)), np.ones((4, 2)))
    assert str(info.value).startswith("matmul: ")
    assert_located(info.value, built)


# -- concatenate -----------------------------------------------------------------------------------------
def test_concatenate_mismatch_off_the_axis_names_shapes(x):
    z = sg.tensor("z", (2, 5))
    assert_raises(ShapeError, lambda: sg.concatenate([x, z]), "concatenate:", "(3, 4)", "(2, 5)", "axis 0")


def test_concatenate_rank_mismatch_names_shapes(x):
    v = sg.vector("v", length=4)
    assert_raises(ShapeError, lambda: sg.concatenate([x, v], axis=1), "concatenate:", "dimensions", "(3, 4)", "(4,)")


def test_concatenate_of_scalars_is_an_error():
    s = sg.scalar("s")
    assert_raises(ShapeError, lambda: sg.concatenate([s, s]), "concatenate:", "zero-dimensional")


def test_stack_shape_mismatch_names_shapes(x):
    assert_raises(ShapeError, lambda: sg.stack([x, sg.tensor("z", (3, 5))]), "stack:", "(3, 4)", "(3, 5)")


# -- axes ----------------------------------------------------------------------------------------------
AXIS_OUT_OF_RANGE = [
    ("sum", lambda x: sg.sum(x, axis=2), "axis 2"),
    ("sum", lambda x: sg.sum(x, axis=-3), "axis -3"),
    ("mean", lambda x: sg.mean(x, axis=2), "axis 2"),
    ("max", lambda x: sg.max(x, axis=(0, 5)), "axis 5"),
    ("min", lambda x: x.min(axis=-3), "axis -3"),
    ("prod", lambda x: sg.prod(x, axis=2), "axis 2"),
    ("any", lambda x: sg.any(x > 0, axis=2), "axis 2"),
    ("all", lambda x: sg.all(x > 0, axis=2), "axis 2"),
    ("argmax", lambda x: sg.argmax(x, axis=2), "axis 2"),
    ("argmin", lambda x: sg.argmin(x, axis=-3), "axis -3"),
    ("var", lambda x: sg.var(x, axis=2), "axis 2"),
    ("std", lambda x: sg.std(x, axis=2), "axis 2"),
    ("expand_dims", lambda x: sg.expand_dims(x, 3), "axis 3"),
    ("expand_dims", lambda x: sg.expand_dims(x, -4), "axis -4"),
    ("squeeze", lambda x: sg.squeeze(x, 2), "axis 2"),
    ("concatenate", lambda x: sg.concatenate([x, x], axis=2), "axis 2"),
    ("stack", lambda x: sg.stack([x, x], axis=3), "axis 3"),
    ("transpose", lambda x: sg.transpose(x, (0, 2)), "2"),
    ("swapaxes", lambda x: sg.swapaxes(x, 0, 2), "axis2 2"),
    ("moveaxis", lambda x: sg.moveaxis(x, 0, 2), "destination 2"),
    ("moveaxis", lambda x: sg.moveaxis(x, -3, 0), "source -3"),
    ("take_along_axis", lambda x: sg.take_along_axis(x, sg.zeros((3, 4), "int64"), 2), "axis 2"),
]


@pytest.mark.parametrize(("op", "build", "axis"), AXIS_OUT_OF_RANGE, ids=[f"{o}-{a}" for o, _, a in AXIS_OUT_OF_RANGE])
def test_axis_out_of_range_names_op_and_axis(x, op, build, axis):
    assert_raises(ShapeError, lambda: build(x), f"{op}:", axis, "out of range")


REPEATED_AXES = [
    ("sum", lambda x: sg.sum(x, axis=(0, -2))),
    ("mean", lambda x: sg.mean(x, axis=(1, 1))),
    ("max", lambda x: sg.max(x, axis=(1, -1))),
    ("var", lambda x: sg.var(x, axis=(0, 0))),
    ("expand_dims", lambda x: sg.expand_dims(x, (0, 0))),
    ("squeeze", lambda x: sg.squeeze(sg.reshape(x, (1, 3, 4)), (0, -3))),
    ("transpose", lambda x: sg.transpose(x, (1, 1))),
]


@pytest.mark.parametrize(("op", "build"), REPEATED_AXES, ids=[o for o, _ in REPEATED_AXES])
def test_repeated_axes_name_op(x, op, build):
    assert_raises(ShapeError, lambda: build(x), f"{op}:", "repeated")


def test_squeeze_of_an_axis_longer_than_one_names_extent(x):
    assert_raises(ShapeError, lambda: sg.squeeze(x, 0), "squeeze:", "axis 0", "extent 3", "(3, 4)")


def test_axis_of_the_wrong_type_names_op(x):
    assert_raises(ShapeError, lambda: sg.sum(x, axis=1.0), "sum:", "axis must be an int")
    assert_raises(ShapeError, lambda: sg.argmax(x, axis=(0, 1)), "argmax:", "axis must be an int")


# -- other shapes -------------------------------------------------------------------------------------
def test_reshape_to_a_different_size_names_both_shapes(x):
    assert_raises(ShapeError, lambda: sg.reshape(x, (5, 3)), "reshape:", "(3, 4)", "(5, 3)")
    assert_raises(ShapeError, lambda: x.reshape(-1, -1), "reshape:", "one unknown dimension")


def test_broadcast_to_an_incompatible_shape_names_both(x):
    assert_raises(ShapeError, lambda: sg.broadcast_to(x, (3, 5)), "broadcast_to:", "(3, 4)", "(3, 5)")


def test_einsum_letter_with_two_sizes_names_it(x):
    assert_raises(ShapeError, lambda: sg.einsum("ij,jk->ik", x, x), "einsum:", "'j'", "4", "3")


def test_invert_of_a_float_tensor_is_a_dtype_error(x):
    assert_raises(DTypeError, lambda: ~x, "invert:", "float64")


# -- grad --------------------------------------------------------------------------------------------------
def test_grad_of_a_non_scalar_cost_names_its_shape(x):
    assert_raises(GradientError, lambda: sg.grad(x * 2.0, x), "grad:", "scalar", "(3, 4)")


def test_grad_of_an_integer_cost_is_an_error():
    i = sg.tensor("i", (3,), "int64")
    assert_raises(GradientError, lambda: sg.grad(sg.sum(i), i), "grad:", "float", "int64")


def test_grad_wrt_not_in_the_graph_names_it(x):
    y = sg.vector("y")
    assert_raises(GradientError, lambda: sg.grad(sg.sum(x), y), "grad:", "wrt[0]", "'y'", "not part")
    assert_raises(GradientError, lambda: sg.grad(sg.sum(x), [x, y]), "grad:", "wrt[1]", "'y'", "disconnected")


def test_grad_wrt_not_in_the_graph_with_disconnected_zero_gives_zeros(x):
    y = sg.tensor("y", (None, 2), dtype="float32")
    gx, gy = sg.grad(sg.sum(x * x), [x, y], disconnected="zero")
    f = sg.function([x, y], [gx, gy])
    x_value = np.arange(12.0).reshape(3, 4)
    gx_value, gy_value = f(x_value, np.ones((5, 2), dtype=np.float32))
    np.testing.assert_array_equal(gx_value, 2 * x_value)
    assert gy_value.shape == (5, 2) and gy_value.dtype == np.float32
    np.testing.assert_array_equal(gy_value, np.zeros((5, 2)))


def test_grad_wrt_an_integer_input_names_it_and_its_dtype(x):
    i = sg.tensor("i", (3,), "int64")
    cost = sg.sum(x) + sg.sum(i)
    assert_raises(GradientError, lambda: sg.grad(cost, i), "grad:", "wrt[0]", "'i'", "int64")
    assert_raises(GradientError, lambda: sg.grad(cost, [x, i]), "grad:", "wrt[1]", "'i'", "int64")


def test_grad_wrt_a_constant_or_a_non_variable_names_the_argument(x):
    assert_raises(GradientError, lambda: sg.grad(sg.sum(x), sg.constant(1.0)), "grad:", "wrt[0]", "constant")
    assert_raises(GradientError, lambda: sg.grad(sg.sum(x), [x, 3.0]), "grad:", "wrt[1]", "float")


def test_grad_with_an_unknown_disconnected_mode_is_an_error(x):
    assert_raises(GradientError, lambda: sg.grad(sg.sum(x), x, disconnected="ignore"), "grad:", "'ignore'")


# -- calling a compiled function -------------------------------------------------------------------------
@pytest.fixture
def f(x):
    i = sg.tensor("i", (None,), "int64")
    return sg.function([x, i], sg.sum(x) + sg.sum(i))


def test_call_with_the_wrong_number_of_arguments_names_the_inputs(f):
    assert_raises(InputError, lambda: f(np.ones((3, 4))), "function:", "expected 2", "'x', 'i'", "got 1")
    assert_raises(InputError, lambda: f(np.ones((3, 4)), np.ones(2, int), 1), "expected 2", "got 3")


def test_call_with_the_wrong_rank_names_argument_and_shapes(f):
    assert_raises(InputError, lambda: f(np.ones(12), np.ones(2, int)), "argument 0", "'x'", "2 dimensions", "(12,)")
    assert_raises(InputError, lambda: f(np.ones((3, 4)), 1), "argument 1", "'i'", "1 dimensions", "()")


def test_call_with_a_float_array_for_an_integer_input_names_both_dtypes(f):
    assert_raises(InputError, lambda: f(np.ones((3, 4)), np.ones(2)), "argument 1", "'i'", "int64", "float64")


def test_call_with_a_complex_array_for_a_float_input_is_an_error(f):
    assert_raises(InputError, lambda: f(np.ones((3, 4), complex), np.ones(2, int)), "argument 0", "complex128")


def test_call_with_the_wrong_static_extent_names_argument_and_shapes(f):
    assert_raises(InputError, lambda: f(np.ones((3, 5)), np.ones(2, int)), "argument 0", "'x'", "[3, 4]", "(3, 5)")


def test_call_with_same_kind_arrays_casts_them(f):
    result = f(np.ones((3, 4), np.float32), np.ones(2, np.int8))
    assert result.dtype == np.float64
    assert float(result) == 14.0


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        ("abc", ["must be an array of float64", "str 'abc'"]),
        (None, ["must be an array of float64", "NoneType"]),
        ({}, ["must be an array of float64", "dict {}"]),
        ([[1.0, 2.0], [3.0]], ["not an array NumPy can read", "inhomogeneous"]),
    ],
)
def test_call_with_something_that_is_not_an_array_says_what_it_got(f, value, fragments):
    assert_raises(InputError, lambda: f(value, np.ones(2, int)), "argument 0", "'x'", *fragments)


def test_call_with_a_symbolic_tensor_says_it_takes_values(f, x):
    assert_raises(InputError, lambda: f(x, np.ones(2, int)), "argument 0", "is a symbolic tensor", "takes values")


def test_call_with_a_python_int_past_int64_converts_it_as_numpy_does():
    s = sg.scalar("s")
    assert float(sg.function([s], s * 2)(2**70)) == 2.0**71


def test_inputs_not_given_as_a_list_say_so(x):
    assert_raises(InputError, lambda: sg.function(x, sg.sum(x)), "function:", "must be a list", "write [x]")


def test_eval_of_a_graph_with_inputs_names_them_not_function(x):
    error = assert_raises(InputError, lambda: (x + 1).eval(), "eval:", "depends on x")
    assert "function:" not in str(error)


def test_a_misspelt_dtype_names_it():
    assert_raises(DTypeError, lambda: sg.vector("y", dtype="flot64"), "tensor:", "'flot64'", "not a dtype")


def test_grad_wrt_a_number_or_an_array_names_what_it_got(x):
    assert_raises(GradientError, lambda: sg.grad(sg.sum(x), 2.0), "wrt[0]", "got float")
    assert_raises(GradientError, lambda: sg.grad(sg.sum(x), np.ones(3)), "wrt[0]", "got ndarray")


def test_float_or_math_of_a_tensor_says_it_has_no_value_yet(x):
    import math

    assert_raises(StableGradError, lambda: float(sg.sum(x)), "no value yet", ".eval()")
    assert_raises(StableGradError, lambda: math.exp(sg.sum(x)), "no value yet", "sg. function")


def test_call_by_input_name(f):
    x, i = np.ones((3, 4)), np.array([1, 2])
    assert float(f(x=x, i=i)) == float(f(x, i=i)) == float(f(x, i)) == 15.0
    assert_raises(InputError, lambda: f(x, y=i), "function:", "no input is named 'y'", "'x', 'i'")
    assert_raises(InputError, lambda: f(x, x=x), "'x'", "given twice")
    assert_raises(InputError, lambda: f(i=i), "missing argument", "'x'")


def test_call_by_a_name_two_inputs_share_is_refused():
    a, b = sg.vector("v"), sg.vector("v")
    g = sg.function([a, b], a + b)
    assert_raises(InputError, lambda: g(v=np.ones(2)), "2 inputs are named 'v'", "by position")


def test_call_with_python_scalars_lists_and_other_byte_orders_converts_them(f):
    # (the common case, a native array of the right dtype and shape, takes a shortcut; these do not)
    swapped = np.arange(12.0).reshape(3, 4).astype(">f8")
    assert float(f(swapped, [1, 2])) == 66.0 + 3
    assert float(f(swapped.tolist(), np.array([5]))) == 66.0 + 5


def test_outputs_depending_on_an_unlisted_input_name_it(x):
    y = sg.tensor("y", (3, 4))
    assert_raises(InputError, lambda: sg.function([x], x + y), "function:", "depend on input y", "not among")


def test_a_non_input_listed_as_input_is_an_error(x):
    assert_raises(InputError, lambda: sg.function([x * 2.0], x), "function:", "inputs[0]", "symbolic input")
    assert_raises(InputError, lambda: sg.function([x, x], x), "function:", "listed twice")


# -- indexing -----------------------------------------------------------------------------------------------
def test_static_index_out_of_range_names_index_axis_and_size(x):
    assert_raises(ShapeError, lambda: x[3], "getitem:", "index 3", "axis 0", "size 3")
    assert_raises(ShapeError, lambda: x[:, -5], "getitem:", "index -5", "axis 1", "size 4")
    assert_raises(ShapeError, lambda: x.at[1, 4].set(0.0), "at[].set:", "index 4", "axis 1")


def test_static_index_array_out_of_range_names_index_axis_and_size(x):
    assert_raises(ShapeError, lambda: x[np.array([0, 5])], "getitem:", "index 5", "axis 0", "size 3")
    assert_raises(ShapeError, lambda: x[:, [-5, 1]], "getitem:", "index -5", "axis 1", "size 4")
    assert_raises(ShapeError, lambda: x.at[[0, 7]].add(1.0), "at[].add:", "index 7", "axis 0")


def test_constant_index_out_of_range_is_an_error_at_build_not_when_folded():
    c = sg.constant(np.arange(3.0))
    assert_raises(ShapeError, lambda: c[np.array([5])], "getitem:", "index 5")


def test_too_many_indices_and_bad_index_types_are_errors(x):
    assert_raises(ShapeError, lambda: x[0, 0, 0], "getitem:", "too many indices", "2-dimensional")
    assert_raises(ShapeError, lambda: x[np.array([0.5])], "getitem:", "integer or boolean", "float64")
    assert_raises(ShapeError, lambda: x[::0], "getitem:", "step cannot be zero")
    assert_raises(ShapeError, lambda: x[np.ones(4, bool)], "getitem:", "boolean index", "(4,)", "(3,)")


def test_index_out_of_range_at_run_time_names_op_and_build_line():
    v = sg.vector("v")
    entry, built = v[3], lineno()
    f = sg.function([v], entry * 2.0)
    assert float(f(np.arange(5.0))) == 6.0
    with pytest.raises(ExecutionError) as info:
        f(np.arange(2.0))
    message = str(info.value)
    assert message.startswith(("getitem: ", "index: ")), message
    assert "index 3 is out of bounds" in message and "size 2" in message
    assert_located(info.value, built)


def test_index_array_out_of_range_at_run_time_names_op_and_build_line(x):
    i = sg.tensor("i", (None,), "int64")
    rows, built = x[i], lineno()
    f = sg.function([x, i], sg.sum(rows, axis=0))
    with pytest.raises(ExecutionError) as info:
        f(np.ones((3, 4)), np.array([0, 9]))
    message = str(info.value)
    assert message.startswith(("getitem: ", "index: ")), message
    assert "index 9 is out of bounds" in message
    assert_located(info.value, built)


def test_run_time_errors_name_the_build_line_of_a_gradient_node_too():
    # the gradient of x[i] is a scatter built by grad(); it still points into this file
    x, i = sg.vector("x"), sg.tensor("i", (None,), "int64")
    g = sg.grad(sg.sum(x[i]), x)
    f = sg.function([x, i], g)
    with pytest.raises(ExecutionError) as info:
        f(np.ones(3), np.array([7]))
    assert info.value.location is not None and info.value.location[0] == __file__


def test_non_numeric_operands_are_a_dtype_error():
    error = assert_raises(DTypeError, lambda: sg.exp("a"), "numeric or boolean", "<U1")
    with pytest.raises(DTypeError, match="numeric or boolean"):
        sg.vector("v") + np.array(["a", "b"])
    assert error.location is not None


# -- values at the boundary of an argument's dtype ------------------------------------------------------------
@pytest.mark.parametrize(
    ("dtype", "value", "given"),
    [
        ("int32", np.array([1, 2**40]), "int64"),  # would wrap
        ("int64", np.array([2**64 - 1], dtype=np.uint64), "uint64"),  # would wrap to -1
        ("int16", np.array([3, 40000]), "int64"),
        ("float32", np.array([1.0, 1e300]), "float64"),  # would overflow to inf
    ],
)
def test_an_argument_its_dtype_cannot_hold_is_refused_by_name(dtype, value, given):
    v = sg.tensor("v", (None,), dtype=dtype)
    f = sg.function([v], v * 1)
    assert_raises(InputError, lambda: f(value), "argument 0 ('v')", f"is {dtype}", f"the {given} values")


def test_values_a_narrower_dtype_holds_are_cast_and_infinities_pass():
    i, x = sg.tensor("i", (None,), dtype="int32"), sg.tensor("x", (None,), dtype="float32")
    assert sg.function([i], i + 1)(np.array([2**31 - 2], dtype=np.int64)).tolist() == [2**31 - 1]
    out = sg.function([x], x * 1)(np.array([np.inf, -np.inf, 1e-50, 3.0]))
    assert out.dtype == np.float32 and out.tolist() == [np.inf, -np.inf, 0.0, 3.0]


def test_a_python_integer_past_a_small_integer_type_names_itself():
    k = sg.tensor("k", (3,), dtype="int8")
    assert_raises(DTypeError, lambda: k + 1000, "the Python integer 1000 does not fit int8")
