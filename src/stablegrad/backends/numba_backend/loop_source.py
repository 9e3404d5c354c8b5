"""The Numba source of a `Loop` (see `loops`), and the function that runs it.

Two shapes of loop nest:

- *plain*: one loop per axis in C order, every member computed as a scalar at each index;
- *blocked*, for a 2-d space of short rows (at most `SHORT_ROW` entries): 256 rows at a
  time, the inner loop running down the block's rows, so that it is long enough for SIMD
  lanes.  A logsumexp-family row op splits the block into stages: members before it write
  its operand into a column-major scratch block, the kernels' column passes turn that
  into the softmax in place (and the row's logsumexp), and members after it read it
  there.  Members that both stages need are computed in each.

Every leaf arrives with the loop's rank (leading extent-1 axes added) and every output
keeps it (a sum's reduced axes as extent 1), so one index expression per array reads or
writes it: the loop index on a full axis, 0 on an extent-1 one.  A sum down the rows of
a block adds into a local through `kernels.add`, whose reassociation (its own, not the
member's arithmetic) lets the loop vectorise.

A loop with `Monomial` members runs speculatively: each product as written, with a test
per entry that the result is in range (see `source`); a call where one is not runs again
with the exact kernel.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numba
import numpy as np

from ...graph.basic import Apply, Constant, Variable
from ...graph.types import is_floating
from ...ops.elementwise import Where
from ...ops.monomial import Monomial
from ...ops.reduction import Sum
from .kernels import SHORT_ROW
from .loops import Loop, monomial_unexplained, monomial_written, row_lse, row_op, row_softmax, scalar_form

BLOCK = 256
_NUMBA_TYPE = {"float32": "np.float32", "float64": "np.float64", "bool": "np.bool_", "int64": "np.int64"}


def source(op: Loop, parallel: bool = False, speculate: bool = False) -> str:
    """Python source of the loop's kernel `loop(leaf0, ..., result0, ...)`; `parallel`: its
    outer loop split over threads (`numba.prange`) where the iterations are independent.

    `speculate`: each `Monomial` member is computed as written only, and the kernel returns
    True where one of them left the range at some entry (`monomial_unexplained`), for the
    caller to run the exact kernel instead.  The exact form's per-entry branch into frexp
    keeps a loop from vectorising (a mixture's gradient took 2.4× as long with it); its
    test alone, in bitwise operators, does not."""
    return _Source(op, parallel, speculate).text()


def speculates(op: Loop) -> bool:
    """Whether the loop has members that a speculative kernel computes as written only."""
    return any(isinstance(node.op, Monomial) for node in op.members)


class _Source:
    def __init__(self, op: Loop, parallel: bool, speculate: bool = False):
        self.op = op
        self.speculate = speculate
        d = len(op.space)
        self.blocked = d == 2 and op.space[1] <= SHORT_ROW
        self.idx = ["i0", "i1"] if self.blocked else [f"i{a}" for a in range(d)]
        self.result_of = {v.id: k for k, v in enumerate(op.results)}
        self.args: list[str] = []
        self.loads: dict[int, str] = {}  # leaf id → its load statement
        self.arrays: dict[int, str] = {}  # leaf id → the argument holding it
        self.names: dict[int, str] = {}
        for k, v in enumerate(op.leaves):
            literal = _literal(v)
            if literal is not None:
                self.names[v.id] = literal
            else:
                self.args.append(f"a{k}")
                self.arrays[v.id] = f"a{k}"
                self.names[v.id] = f"x{k}"
                self.loads[v.id] = f"x{k} = a{k}[{self.index(v.type.shape)}]"
        self.number = {id(node): i for i, node in enumerate(op.members)}
        rows = [n for n in op.members if row_op(n) is not None]
        self.row = rows[0] if rows else None
        # blocks of rows are independent (their sums go to one partial each, added in block
        # order after: the serial kernel's arithmetic); plain rows are unless a sum runs down them
        down = any(isinstance(n.op, Sum) and 0 in n.op.axes for n in op.members)
        self.parallel = parallel and (self.blocked or not down)

    def index(self, shape: tuple, idx: Sequence[str] | None = None) -> str:
        """The index of an operand of `shape` at the loop's index `idx` (by default its own)."""
        idx = self.idx if idx is None else idx
        d = len(self.op.space)
        padded = (1,) * (d - len(shape)) + tuple(shape)
        return ", ".join("0" if n == 1 and self.op.space[a] != 1 else idx[a] for a, n in enumerate(padded))

    def text(self) -> str:
        results = [f"r{k}" for k in range(len(self.op.results))]
        lines = [
            "import math",
            "import numba",
            "import numpy as np",
            "",
            "from stablegrad.backends.numba_backend.kernels import (",
            "    add, column_logsumexp, column_max, column_softmax, column_terms, exp, softmax_factors,",
            ")",
            "",
            "",
            f'@numba.njit(cache=True, nogil=True, error_model="numpy"{", parallel=True" if self.parallel else ""})',
            f"def loop({', '.join(self.args + results)}):",
        ]
        if self.speculate:
            lines.append("    unexplained = False")
        lines += self.blocked_body() if self.blocked else self.plain_body()
        if self.speculate:
            lines.append("    return unexplained")
        return "\n".join(lines) + "\n"

    # -- plain ---------------------------------------------------------------------------------
    def plain_body(self) -> list[str]:
        lines, indent = [], "    "
        for a, n in enumerate(self.op.space):
            loop = "numba.prange" if a == 0 and self.parallel else "range"
            lines.append(f"{indent}for i{a} in {loop}({n}):")
            indent += "    "
        body = self.statements(self.op.members, sums="direct")
        return lines + [indent + line for line in body]

    # -- blocked -------------------------------------------------------------------------------
    def blocked_body(self) -> list[str]:
        rows = self.op.space[0]
        row = self.row
        before, after = self.stages()
        sums = [self.result_of[m.outputs[0].id] for m in self.op.members if _down_the_rows(m)]
        blocks = -(-rows // BLOCK)
        out = []
        if self.parallel:  # a partial sum per block, and scratch per block (each thread its own)
            out += [f"    p{k} = np.zeros(({blocks}, {self.op.space[1]}))" for k in sums]
            out.append(f"    for blk in numba.prange({blocks}):")
            out.append(f"        b0 = blk * {BLOCK}")
            out += ["        " + line for line in self.scratch()]
        else:
            out += ["    " + line for line in self.scratch()]
            out.append(f"    for b0 in range(0, {rows}, {BLOCK}):")
        out.append(f"        nb = min({BLOCK}, {rows} - b0)")
        stage1 = self.statements(before, sums="local")
        if row is not None:
            x = row.inputs[0]
            if x.id in self.loads and self.loads[x.id] not in stage1:  # an operand read straight in
                stage1.insert(0, self.loads[x.id])
            stage1.append(f"block[i1, b] = {self.names[x.id]}")
        out += self.block_loop(stage1, before)
        if row is not None:
            out += ["        " + line for line in self.row_stage(row)]
            softmax = row_softmax(row)
            if softmax is not None:
                self.names[softmax.id] = cast("block[i1, b]", self.block_dtype(), softmax.dtype, force=True)
                if softmax.id in self.result_of:
                    after = [row, *after]  # (the row op's line in a stage stores its softmax)
            if after:
                out += self.block_loop(self.statements(after, sums="local"), after, rows_outer=True)
        if self.parallel:  # the partials in block order: the serial kernel's sums exactly
            for k in sums:
                out += [f"    for blk in range({blocks}):", f"        for i1 in range({self.op.space[1]}):"]
                out.append(f"            r{k}[0, i1] += p{k}[blk, i1]")
        return out

    def stages(self) -> tuple[list[Apply], list[Apply]]:
        """Members before the row op (all, without one) and after it, each with what it needs."""
        row = self.row
        if row is None:
            return list(self.op.members), []
        late: set[int] = set()
        for node in self.op.members:
            if node is row or any(v.owner is not None and id(v.owner) in late for v in node.inputs):
                late.add(id(node))
        needed: set[int] = set()  # early members a late one reads, computed again after
        for node in reversed(self.op.members):
            if node is not row and (id(node) in late or id(node) in needed):
                needed.update(id(v.owner) for v in node.inputs if v.owner is not None)
        before = [m for m in self.op.members if id(m) not in late]
        after = [m for m in self.op.members if m is not row and (id(m) in late or id(m) in needed)]
        return before, after

    def block_dtype(self) -> np.dtype:
        """The scratch block's dtype: float32 for a float32 row op (its terms then take float32
        lanes, twice as many, `kernels.column_terms`), else float64."""
        assert self.row is not None
        return np.dtype(np.float32 if self.row.inputs[0].dtype == np.float32 else np.float64)

    def scratch(self) -> list[str]:
        n = self.op.space[1]
        lines = []
        if self.row is not None:
            lines += [
                f"block = np.empty(({n}, {BLOCK}), dtype={_NUMBA_TYPE[self.block_dtype().name]})",
                f"m = np.empty({BLOCK})",
                f"rest = np.empty({BLOCK})",
                f"ties = np.empty({BLOCK})",
                f"lse = np.empty({BLOCK})",
                f"has_nan = np.empty({BLOCK}, dtype=np.bool_)",
                f"row_scale = np.empty({BLOCK})",
            ]
        return lines

    def block_loop(self, body: list[str], members: list[Apply], rows_outer: bool = False) -> list[str]:
        """`body` at every point of the block: down its columns (a sum down the rows adds into a
        local), or with `rows_outer` and no such sum, along its rows, so that the stores into
        C-ordered results are contiguous (the softmax of 10⁴ rows of 10: 3 % quicker in float32,
        8 % in float64)."""
        sums = [self.result_of[m.outputs[0].id] for m in members if _down_the_rows(m)]
        if rows_outer and not sums:
            lines = [
                "        for b in range(nb):",
                "            i0 = b0 + b",
                f"            for i1 in range({self.op.space[1]}):",
            ]
            return lines + ["                " + line for line in body]
        lines = ["        for i1 in range(" + str(self.op.space[1]) + "):"]
        lines += [f"            s{k} = 0.0" for k in sums]
        lines += ["            for b in range(nb):", "                i0 = b0 + b"]
        lines += ["                " + line for line in body]
        total = "p{k}[blk, i1]" if self.parallel else "r{k}[0, i1]"
        lines += [f"            {total.format(k=k)} += s{k}" for k in sums]
        return lines

    def row_stage(self, row: Apply) -> list[str]:
        """The row op over the block: the kernels' column passes, then each row's logsumexp."""
        n = self.op.space[1]
        scale = self.scale_of(row)
        lines = [
            "for b in range(nb):",
            "    m[b] = -np.inf",
            "    rest[b] = 0.0",
            "    ties[b] = 0.0",
            "    has_nan[b] = False",
            f"for i1 in range({n}):",
            "    column_max(block[i1, :nb], m[:nb], has_nan[:nb])",
            "for b in range(nb):",
            "    m[b] = np.nan if has_nan[b] else m[b]",
            f"for i1 in range({n}):",
            "    column_terms(block[i1, :nb], m[:nb], rest[:nb], ties[:nb])",
            # each row's logsumexp, and rest becomes its total
            "column_logsumexp(m[:nb], rest[:nb], ties[:nb], lse[:nb])",
        ]
        lse = row_lse(row)
        if lse is not None and lse.id in self.result_of:  # (a gradient may need only the softmax)
            lines += ["for b in range(nb):", f"    r{self.result_of[lse.id]}[b0 + b] = lse[b]"]
        softmax = row_softmax(row)
        if softmax is not None:
            lines += ["for b in range(nb):", "    i0 = b0 + b", f"    row_scale[b] = {scale}"]
            lines += ["softmax_factors(rest[:nb], m[:nb], row_scale[:nb])"]
            lines += [f"for i1 in range({n}):", "    column_softmax(block[i1, :nb], row_scale[:nb])"]
        return lines

    def scale_of(self, row: Apply) -> str:
        if len(row.inputs) < 2:
            return "1.0"
        scale = row.inputs[1]
        if scale.id not in self.arrays:  # a literal
            return self.names[scale.id]
        return f"{self.arrays[scale.id]}[{self.index(scale.type.shape, ['i0', '0'])}]"  # one factor per row

    # -- members as statements -----------------------------------------------------------------
    def statements(self, members: Sequence[Apply], sums: str) -> list[str]:
        """Loads, then a line per member (and per stored result), for one point of the space."""
        lines: list[str] = []
        loaded: set[int] = set()
        for node in members:
            if row_op(node) is not None:
                continue  # (its operands were read before the row stage)
            for v in node.inputs:
                if v.id in self.loads and v.id not in loaded:
                    loaded.add(v.id)
                    lines.append(self.loads[v.id])
        d = len(self.op.space)
        for node in members:
            out = node.outputs[-1]
            if row_op(node) is not None:  # its softmax, from the block (a stored result)
                lines.append(f"r{self.result_of[out.id]}[i0, i1] = {self.names[out.id]}")
                continue
            if isinstance(node.op, Sum):
                k, value = self.result_of[out.id], self.names[node.inputs[0].id]
                if sums == "local" and _down_the_rows(node):
                    lines.append(f"s{k} = add(s{k}, {value})")
                else:
                    keep = ", ".join("0" if a in node.op.axes else self.idx[a] for a in range(d))
                    lines.append(f"r{k}[{keep}] += {value}")
                continue
            name = f"m{self.number[id(node)]}"
            if self.speculate and isinstance(node.op, Monomial):
                operands = [self.names[v.id] for v in node.inputs]
                lines.append(f"{name} = {scalar_expression(node, operands, monomial_written(node.op.tree))}")
                test = scalar_expression(node, operands, monomial_unexplained(node.op.tree), result=name)
                lines.append(f"unexplained = unexplained | {test}")
            else:
                lines.append(f"{name} = {self.expression(node)}")
            self.names[out.id] = name
            if out.id in self.result_of:
                lines.append(f"r{self.result_of[out.id]}[{', '.join(self.idx)}] = {name}")
        return lines

    def expression(self, node: Apply) -> str:
        return scalar_expression(node, [self.names[v.id] for v in node.inputs])


def scalar_expression(node: Apply, operands: Sequence[str], form: str | None = None, result: str = "") -> str:
    """An elementwise node's scalar form (by default `scalar_form`'s) over the operands'
    expressions: operands cast to NumPy's common dtype, the result to the node's own.  With
    `result` (the name of the node's value), the form is a truth value about it."""
    values = list(zip(operands, node.inputs))
    condition = values.pop(0)[0] if isinstance(node.op, Where) else None  # read as a truth value
    common = np.result_type(*(v.dtype for _, v in values))
    texts = [cast(text, v.dtype, common) for text, v in values]
    if condition is not None:
        texts.insert(0, condition)
    form = scalar_form(node.op) if form is None else form
    assert form is not None
    limits = np.finfo(common) if is_floating(common) else None  # (a monomial's range)
    text = (
        form.format(*texts, tiny=repr(float(limits.tiny)), huge=repr(float(limits.max)), r=result)
        if limits
        else form.format(*texts)
    )
    if result:
        return text
    return cast("(" + text + ")", common, node.outputs[0].dtype, force=True)


def _down_the_rows(node: Apply) -> bool:
    """A sum over the rows of a blocked loop: it adds into a local down each block column."""
    return isinstance(node.op, Sum) and node.op.axes == (0,)


def cast(expr: str, have: np.dtype, want: np.dtype, force: bool = False) -> str:
    """`expr` (of dtype `have`) as dtype `want`, in Numba source."""
    if have == want and not force:
        return expr
    if want == np.bool_:
        return f"bool({expr})"
    return f"{_NUMBA_TYPE.get(want.name, 'np.' + want.name)}({expr})"


def _literal(v: Variable) -> str | None:
    """A one-entry constant as source text (so LLVM sees the number), else None."""
    if not isinstance(v, Constant) or np.size(v.data) != 1:
        return None
    return literal_text(np.asarray(v.data))


def literal_text(data: np.ndarray) -> str:
    """The one entry of `data` as Numba source of its dtype."""
    value = data.reshape(()).item()
    if data.dtype == np.bool_:
        return "True" if value else "False"
    if is_floating(data.dtype) and not math.isfinite(value):
        text = "math.nan" if value != value else ("math.inf" if value > 0 else "-math.inf")
        return cast(text, np.dtype(float), data.dtype, force=True)
    return cast(repr(value), np.dtype(float) if is_floating(data.dtype) else np.dtype(int), data.dtype)


# -- running it ---------------------------------------------------------------------------------
def warn_unsupported(what: str, exc: Exception) -> None:
    """One line: a generated kernel did not compile, so its nodes run as on the NumPy backend."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    warnings.warn(f"backend='numba': {what} did not compile ({first}); it runs as on the NumPy backend", stacklevel=2)


def kernel(op: Loop, compiled: Callable[[str, str], Callable], threads: int = 1) -> Callable:
    """The loop as a function of its leaves, compiled by `compiled(source, name)`, on `threads`.
    A loop with monomials runs speculatively first (serially: a flag across threads would be a
    reduction), and again with the exact kernel, compiled then, where that returns True."""
    speculative = speculates(op) and threads == 1
    fn = compiled(source(op, threads > 1, speculate=speculative), "loop")
    exact: Callable | None = None
    d = len(op.space)
    arrays_at = [i for i, v in enumerate(op.leaves) if _literal(v) is None]
    layouts = []  # per result: (kernel buffer shape, its dtype, the shape returned, from an accumulator)
    for v in op.results:
        shape = tuple(v.type.shape)
        if v.owner is not None and isinstance(v.owner.op, Sum):
            kept = tuple(1 if a in v.owner.op.axes else n for a, n in enumerate(op.space))
            layouts.append((kept, np.float64 if v.dtype == np.float32 else v.dtype, shape, True))
        elif v.owner is not None and row_op(v.owner) is not None and v is row_lse(v.owner):  # one per row
            layouts.append(((op.space[0],), v.dtype, shape, False))
        else:
            layouts.append((op.space, v.dtype, shape, False))

    def new_buffers() -> list[np.ndarray]:
        return [(np.zeros if acc else np.empty)(layout, dtype) for layout, dtype, _, acc in layouts]

    def run(*values):
        nonlocal fn, exact
        arrays = []
        for i in arrays_at:
            a = np.asarray(values[i])
            arrays.append(a.reshape((1,) * (d - a.ndim) + a.shape))
        buffers = new_buffers()
        if fn is None:
            return op.perform(*values)
        if threads > 1:
            numba.set_num_threads(threads)  # (Numba's pool is shared: each call sets its own)
        try:
            if fn(*arrays, *buffers):  # a monomial left the range: its sums are spoilt too
                exact = exact or compiled(source(op), "loop")
                buffers = new_buffers()
                exact(*arrays, *buffers)
        except numba.core.errors.NumbaError as exc:  # a gap in the code generator, not the user's error
            warn_unsupported(op.name, exc)
            fn = None
            return op.perform(*values)
        out = []
        for b, (_, _, shape, _), v in zip(buffers, layouts, op.results):
            out.append(b.reshape(shape).astype(v.dtype, copy=False))
        return out[0] if len(out) == 1 else out

    return run
