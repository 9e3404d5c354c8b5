"""The op families.  Each module holds one family, forward and derivative side by side.

Importing this package registers the functions behind `Variable`'s operators and methods
(`ops.sugar`) with `graph.hooks`, since the graph layer cannot import the ops.
"""

from ..graph import hooks
from . import sugar

hooks.tensor_functions.provide(sugar)
