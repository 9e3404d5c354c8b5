"""Specialize: late inlining of composites, so backends see plain ops to fuse and run.

Runs after recognition, and recognition never runs again afterwards: that is what
keeps the max-shifted body of `LogSumExp`, once inlined, from being recognised as
`LogSumExp` again.
"""

from __future__ import annotations

from ..ops.composite import OpFromGraph, SymbolicOp, inline
from .engine import Kind, Phase, rewrite


@rewrite(Phase.SPECIALIZE, Kind.INLINING, SymbolicOp, OpFromGraph)
def inline_composite(node):
    """A composite op → its body, rebuilt on the node's inputs."""
    op = node.op
    if isinstance(op, SymbolicOp) and not op.inline:
        return None
    return inline(op, node.inputs)


RULES = (inline_composite,)
