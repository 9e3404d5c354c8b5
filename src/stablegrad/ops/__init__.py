"""The op families.  Each module holds one family, forward and derivative side by side.

Importing this package registers the functions behind `Variable`'s operators and methods
(`ops.sugar`) with `graph.hooks`, since the graph layer cannot import the ops, and the
alignment of named operands (`ops.named`), which the entrywise base sits below.
"""

from ..graph import hooks
from . import named, sugar

hooks.tensor_functions.provide(sugar)
hooks.align_dims.provide(named.align)
