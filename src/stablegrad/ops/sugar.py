"""The functions behind `Variable`'s operators and methods, gathered in one namespace.

`graph` sits below `ops` and cannot import it, so `stablegrad.ops` registers this module
as `graph.hooks.tensor_functions` (whose protocol lists what it must hold).
"""

from .elementwise import (
    abs,
    add,
    astype,
    clip,
    divide,
    equal,
    floor_divide,
    greater,
    greater_equal,
    invert,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    mod,
    multiply,
    negative,
    not_equal,
    subtract,
)
from .indexing import AtIndexer as at
from .indexing import getitem
from .linalg import matmul
from .math import power
from .named import dot, expand_dim, isel, rename, transpose_dims
from .reduction import argmax, argmin, cumprod, cumsum, max, mean, min, prod, std, sum, var
from .shape import ravel, reshape, shape_tuple, size, swapaxes, transpose

__all__ = [
    "abs",
    "add",
    "argmax",
    "argmin",
    "astype",
    "at",
    "clip",
    "cumprod",
    "cumsum",
    "divide",
    "dot",
    "equal",
    "expand_dim",
    "floor_divide",
    "getitem",
    "greater",
    "greater_equal",
    "invert",
    "isel",
    "less",
    "less_equal",
    "logical_and",
    "logical_not",
    "logical_or",
    "matmul",
    "max",
    "mean",
    "min",
    "mod",
    "multiply",
    "negative",
    "not_equal",
    "power",
    "prod",
    "ravel",
    "rename",
    "reshape",
    "shape_tuple",
    "size",
    "std",
    "subtract",
    "sum",
    "swapaxes",
    "transpose",
    "transpose_dims",
    "var",
]
