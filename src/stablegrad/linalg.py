"""`sg.linalg`: the linear-algebra functions under NumPy's `numpy.linalg` (and SciPy's) names.

The ops live in `ops.decompositions` (factorizations, solves, determinants) and `ops.linalg`
(products); this module only gathers them, as `numpy.linalg` gathers NumPy's.

>>> import numpy as np, stablegrad as sg
>>> a = sg.matrix("a")
>>> round(float(sg.function([a], sg.linalg.slogdet(a)[1])(np.eye(3) * 2.0)), 12)  # 3 log 2
2.07944154168
"""

from .ops.decompositions import cholesky, det, inv, slogdet, solve, solve_triangular
from .ops.linalg import matmul
from .ops.norms import norm

__all__ = ["cholesky", "det", "inv", "matmul", "norm", "slogdet", "solve", "solve_triangular"]
