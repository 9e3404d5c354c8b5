"""What every op family shares: turning arguments into variables, and the elementwise base.

`Elementwise` ops broadcast their operands like NumPy ufuncs, and their output
dtype is *defined* as the dtype NumPy gives for their `perform`: the rule is read
off NumPy itself once per (op, dtypes) and cached, so promotion (NEP 50 included)
can never drift from NumPy's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..graph.basic import Constant, Op, Variable, Zero
from ..graph.types import TensorType, broadcast_shapes

_PYTHON_SCALARS = (bool, int, float, complex)


def as_tensor(x, dtype=None) -> Variable:
    """A Variable as is, anything array-like as a Constant."""
    if isinstance(x, Variable):
        return x
    return Constant(np.asarray(x, dtype=dtype))


def as_operands(*args) -> list[Variable]:
    """Variables for an op's operands, with Python scalars *weak* (NEP 50).

    A Python scalar takes the dtype NumPy would give it next to the other operands,
    so `float32_var * 2.0` stays float32 and `int_var + 2.5` becomes float64.
    """
    if all(isinstance(a, Variable) for a in args):
        return list(args)
    strong = [a.dtype if isinstance(a, Variable) else np.asarray(a).dtype for a in args if not _is_scalar(a)]
    result = []
    for a in args:
        if isinstance(a, Variable):
            result.append(a)
        elif _is_scalar(a):
            dtype = np.result_type(*strong, a) if strong else np.asarray(a).dtype
            result.append(Constant(np.asarray(a, dtype=dtype)))
        else:
            result.append(Constant(np.asarray(a)))
    return result


def _is_scalar(a) -> bool:
    return isinstance(a, _PYTHON_SCALARS) and not isinstance(a, np.generic)


def zero_grad(x: Variable) -> Zero:
    return Zero(x.type)


@functools.cache
def _numpy_result_dtype(op: Op, dtypes: tuple[np.dtype, ...]) -> np.dtype:
    with np.errstate(all="ignore"):
        return np.asarray(op.perform(*[np.ones((), dt) for dt in dtypes])).dtype


@dataclass(frozen=True)
class Elementwise(Op):
    """Abstract: an op applied entry by entry with NumPy broadcasting."""

    def infer(self, *inputs: Variable) -> list[TensorType]:
        shape = broadcast_shapes(*(v.type.shape for v in inputs), op=self.name)
        return [TensorType(_numpy_result_dtype(self, tuple(v.dtype for v in inputs)), shape)]
