"""Products: matmul (`@`), einsum, and dot/outer/tensordot expressed through them."""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import final

import numpy as np

from ..errors import GradientError, ShapeError
from ..graph.basic import Op
from ..graph.types import TensorType, broadcast_shapes
from .base import as_operands
from .shape import broadcast_to, expand_dims, reduce_to, reshape, shape_tuple, squeeze, swapaxes


@final
@dataclass(frozen=True)
class Matmul(Op):
    """Matrix product with NumPy's `@` semantics (1-D operands, broadcast batch axes)."""

    def infer(self, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul: operands must not be scalars, got shapes {a.type.shape} and {b.type.shape}")
        sa = a.type.shape if a.ndim > 1 else (1, *a.type.shape)
        sb = b.type.shape if b.ndim > 1 else (*b.type.shape, 1)
        k1, k2 = sa[-1], sb[-2]
        if k1 is not None and k2 is not None and k1 != k2:
            raise ShapeError(
                f"matmul: inner dimensions differ: shapes {a.type.shape} and {b.type.shape} ({k1} != {k2})"
            )
        batch = broadcast_shapes(sa[:-2], sb[:-2], op="matmul")
        shape = (*batch, *((sa[-2],) if a.ndim > 1 else ()), *((sb[-1],) if b.ndim > 1 else ()))
        return [TensorType(np.result_type(a.dtype, b.dtype), shape)]

    def perform(self, a, b):
        return np.matmul(a, b)

    def pushforward(self, inputs, outputs, tangents):
        """ȧ b + a ḃ (bilinear)."""
        (a, b), (ta, tb) = inputs, tangents
        terms = [self(ta, b) if ta is not None else None, self(a, tb) if tb is not None else None]
        present = [t for t in terms if t is not None]
        return [present[0] if len(present) == 1 else present[0] + present[1]]

    def pullback(self, inputs, outputs, grads):
        (a, b), (g,) = inputs, grads
        a2 = a if a.ndim > 1 else expand_dims(a, 0)
        b2 = b if b.ndim > 1 else expand_dims(b, -1)
        g2 = g
        if a.ndim == 1:
            g2 = expand_dims(g2, -1 if b.ndim == 1 else -2)
        if b.ndim == 1:
            g2 = expand_dims(g2, -1)
        ga = matmul(g2, swapaxes(b2, -1, -2))
        gb = matmul(swapaxes(a2, -1, -2), g2)
        if a.ndim == 1:
            ga = reshape(ga, (-1,)) if ga.ndim == 2 else squeeze(ga, -2)
        if b.ndim == 1:
            gb = reshape(gb, (-1,)) if gb.ndim == 2 else squeeze(gb, -1)
        return [reduce_to(ga, shape_tuple(a)), reduce_to(gb, shape_tuple(b))]


def matmul(a, b):
    """Matrix product (the `@` operator, numpy.matmul)."""
    a, b = as_operands(a, b)
    return Matmul()(a, b)


@final
@dataclass(frozen=True)
class Einsum(Op):
    """Einstein summation with explicit output letters (no '...'), run by numpy.einsum.

    The pullback for operand i is another einsum of the cotangent with the other
    operands; letters that only operand i sums away come back by broadcasting.
    """

    subscripts: str = ""

    def _parts(self) -> tuple[list[str], str]:
        ins, out = self.subscripts.split("->")
        return ins.split(","), out

    def infer(self, *xs):
        ins, out = self._parts()
        if len(ins) != len(xs):
            raise ShapeError(f"einsum: {self.subscripts!r} names {len(ins)} operands, got {len(xs)}")
        sizes: dict[str, int | None] = {}
        for term, x in zip(ins, xs):
            if len(term) != x.ndim:
                raise ShapeError(f"einsum: operand {term!r} has {x.ndim} dimensions (shape {x.type.shape})")
            for letter, n in zip(term, x.type.shape):
                known = sizes.get(letter)
                if known is not None and n is not None and known != n and 1 not in (known, n):
                    raise ShapeError(f"einsum: letter {letter!r} has sizes {known} and {n}")
                if known is None or known == 1:
                    sizes[letter] = n
        dtype = np.result_type(*(x.dtype for x in xs))
        return [TensorType(dtype, tuple(sizes[c] for c in out))]

    def perform(self, *xs):
        return np.einsum(self.subscripts, *xs, optimize=len(xs) > 2)

    def pullback(self, inputs, outputs, grads):
        ins, out = self._parts()
        g = grads[0]
        result = []
        for i, (term, x) in enumerate(zip(ins, inputs)):
            if len(set(term)) != len(term):
                raise GradientError(f"einsum: no gradient for the repeated index in {term!r} (a diagonal)")
            others = [(t, v) for j, (t, v) in enumerate(zip(ins, inputs)) if j != i]
            available = set(out).union(*(set(t) for t, _ in others))
            kept = "".join(c for c in term if c in available)
            spec = ",".join([out, *(t for t, _ in others)]) + "->" + kept
            gi = Einsum(spec)(g, *(v for _, v in others))
            if kept != term:
                for axis, c in enumerate(term):
                    if c not in available:
                        gi = expand_dims(gi, axis)
                gi = broadcast_to(gi, shape_tuple(x))
            result.append(reduce_to(gi, shape_tuple(x)))
        return result


def einsum(subscripts: str, *operands):
    """Einstein summation (numpy.einsum); '...' is expanded from the operands' ranks."""
    xs = as_operands(*operands)
    subscripts = subscripts.replace(" ", "")
    if "->" not in subscripts:
        ins = subscripts.split(",")
        letters = [c for term in ins for c in term if c != "."]
        implicit = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        subscripts = f"{subscripts}->{'...' if '...' in subscripts else ''}{implicit}"
    if "..." in subscripts:
        subscripts = _expand_ellipsis(subscripts, xs)
    return Einsum(subscripts)(*xs)


def _expand_ellipsis(subscripts: str, xs) -> str:
    ins, out = subscripts.split("->")
    used = set(subscripts)
    free = [c for c in string.ascii_letters if c not in used]
    terms = ins.split(",")
    widest = max(x.ndim - (len(t) - 3) for t, x in zip(terms, xs) if "..." in t)
    batch = "".join(free[:widest])
    new_terms = [
        t.replace("...", batch[widest - (x.ndim - (len(t) - 3)) :]) if "..." in t else t for t, x in zip(terms, xs)
    ]
    return ",".join(new_terms) + "->" + out.replace("...", batch)


def dot(a, b):
    """numpy.dot: inner product of vectors, matrix product, or sum over a's last and b's second-to-last axis."""
    a, b = as_operands(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim <= 2 and b.ndim <= 2:
        return matmul(a, b)
    letters = string.ascii_letters
    ta = letters[: a.ndim]
    if b.ndim == 1:  # contract a's last axis with b's only one
        return Einsum(f"{ta},{ta[-1]}->{ta[:-1]}")(a, b)
    tb = letters[a.ndim : a.ndim + b.ndim - 2] + ta[-1] + letters[a.ndim + b.ndim - 2]
    out = ta[:-1] + tb[:-2] + tb[-1]
    return Einsum(f"{ta},{tb}->{out}")(a, b)


def outer(a, b):
    """Outer product of the flattened operands."""
    a, b = as_operands(a, b)
    return expand_dims(reshape(a, (-1,)), 1) * expand_dims(reshape(b, (-1,)), 0)


def tensordot(a, b, axes=2):
    """numpy.tensordot: sum products over the given axes."""
    a, b = as_operands(a, b)
    if isinstance(axes, int):
        axes_a, axes_b = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        axes_a, axes_b = (
            ([axes[0]] if isinstance(axes[0], int) else list(axes[0])),
            ([axes[1]] if isinstance(axes[1], int) else list(axes[1])),
        )
    axes_a = [x % a.ndim for x in axes_a]
    axes_b = [x % b.ndim for x in axes_b]
    letters = iter(string.ascii_letters)
    ta = [next(letters) for _ in range(a.ndim)]
    tb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(axes_a, axes_b):
        tb[j] = ta[i]
    out = [c for i, c in enumerate(ta) if i not in axes_a] + [c for j, c in enumerate(tb) if j not in axes_b]
    return Einsum(f"{''.join(ta)},{''.join(tb)}->{''.join(out)}")(a, b)
