"""Every concrete op of the core families is named by a spec table of the op tests.

A new op in stablegrad.ops.{elementwise, math, reduction, shape, indexing, linalg,
creation, norms, complex_parts} fails this test until a spec (value against NumPy/SciPy, pullback against
finite differences) covers it.
"""

from __future__ import annotations

import inspect

import pytest

from stablegrad.graph.basic import Op
from stablegrad.ops import (
    complex_parts,
    creation,
    decompositions,
    elementwise,
    indexing,
    linalg,
    math,
    norms,
    reduction,
    shape,
)

from . import (
    test_complex_parts,
    test_creation,
    test_elementwise,
    test_indexing,
    test_linalg,
    test_math,
    test_norms,
    test_reduction,
    test_shape,
)

MODULES = [elementwise, math, reduction, shape, indexing, linalg, decompositions, norms, creation, complex_parts]
COVERED = (
    test_elementwise.COVERED
    | test_math.COVERED
    | test_reduction.COVERED
    | test_shape.COVERED
    | test_indexing.COVERED
    | test_linalg.COVERED
    | test_norms.COVERED
    | test_creation.COVERED
    | test_complex_parts.COVERED
)


def _concrete_ops(module) -> list[type]:
    """Op classes defined in `module` that are final, or that nothing in the module subclasses."""
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    ops = [c for c in classes if issubclass(c, Op)]
    return [c for c in ops if getattr(c, "__final__", False) or not any(o is not c and issubclass(o, c) for o in ops)]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_op_has_a_spec(module):
    ops = _concrete_ops(module)
    assert ops, f"no ops found in {module.__name__}"
    missing = sorted(c.__name__ for c in ops if c not in COVERED)
    assert not missing, f"ops of {module.__name__} without a spec in tests/ops: {missing}"
