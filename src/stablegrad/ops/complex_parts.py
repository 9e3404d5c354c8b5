"""The parts of a complex number: `real`, `imag`, `conj`, `angle` (NumPy's names), with their gradients.

Gradients of complex values follow JAX's convention (docs/stability.md, "Complex inputs"): a
pullback is the transpose of the derivative as a real-linear map, with complex numbers paired
by Re(a·b) (no conjugate).  So a holomorphic f pulls a cotangent c back to c·f'(z) — what
`exp`, `log`, `*` and `sum` already do — and the gradient of a real cost C of z = x + iy is
∂C/∂x - i·∂C/∂y: `sg.grad(real(z) ** 2 + imag(z) ** 2, z)` is 2·conj(z), as `jax.grad` gives.
Functions that are not holomorphic (these four, and `abs` of a complex number) are not their
own transposes, so their forward-mode rules are written out (an elementwise op's default
reads the tangent map off its pullback, which holds only for holomorphic ones).

>>> import numpy as np, stablegrad as sg
>>> z = sg.vector("z", dtype="complex128")
>>> cost = sg.sum(sg.real(z) ** 2 + sg.imag(z) ** 2)
>>> sg.function([z], sg.grad(cost, z))(np.array([3 + 4j]))
array([6.-8.j])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

import numpy as np

from ..graph.basic import READS_NOTHING, Reads
from .base import Elementwise, as_operands, astype, zero_grad
from .elementwise import equal, where


def _complex(x) -> bool:
    return x.dtype.kind == "c"


def _as_complex(g, z):
    """A real cotangent as a complex one of z's dtype."""
    return astype(g, z.dtype)


@final
@dataclass(frozen=True)
class Real(Elementwise):
    """Re z (x itself for real x).  Pullback: the real cotangent, as a complex number."""

    reads = READS_NOTHING

    def perform(self, x):
        return np.real(x)

    def pullback(self, inputs, outputs, grads):
        (z,), (g,) = inputs, grads
        return [_as_complex(g, z) if _complex(z) else g]

    def pushforward(self, inputs, outputs, tangents):
        return [None if tangents[0] is None else real(tangents[0])]


@final
@dataclass(frozen=True)
class Imag(Elementwise):
    """Im z (0 for real x).  Pullback: -i times the real cotangent (Im z = Re(-i·z))."""

    reads = READS_NOTHING

    def perform(self, x):
        return np.imag(x)

    def pullback(self, inputs, outputs, grads):
        (z,), (g,) = inputs, grads
        return [_as_complex(g, z) * -1j if _complex(z) else zero_grad(z)]

    def pushforward(self, inputs, outputs, tangents):
        (z,), (t,) = inputs, tangents
        return [None if t is None or not _complex(z) else Imag()(t)]


@final
@dataclass(frozen=True)
class Conj(Elementwise):
    """The complex conjugate (x itself for real x).  Pullback: the conjugate of the cotangent."""

    reads = READS_NOTHING

    def perform(self, x):
        return np.conjugate(x)

    def pullback(self, inputs, outputs, grads):
        return [Conj()(grads[0])]


@final
@dataclass(frozen=True)
class Angle(Elementwise):
    """The argument of z in (-π, π] (0 or π for real x).

    Pullback: c·(-i/z) for a real cotangent c (θ = atan2(y, x): ∂θ/∂x - i∂θ/∂y = -i/z);
    0 at z = 0, where the angle jumps (as `abs`'s gradient at 0 is 0).
    """

    reads = Reads(inputs=(0,))

    def perform(self, x):
        return np.angle(x)

    def pullback(self, inputs, outputs, grads):
        (z,), (g,) = inputs, grads
        if not _complex(z):
            return [zero_grad(z)]
        zero = equal(z, 0)
        return [where(zero, 0, _as_complex(g, z) * -1j / where(zero, 1, z))]

    def pushforward(self, inputs, outputs, tangents):
        """dθ = Im(dz / z)."""
        (z,), (t,) = inputs, tangents
        if t is None or not _complex(z):
            return [None]
        zero = equal(z, 0)
        return [where(zero, 0, Imag()(t / where(zero, 1, z)))]


def real(x):
    """The real part (numpy.real): real for complex x, x itself otherwise.

    >>> import stablegrad as sg
    >>> sg.real(sg.constant([1 + 2j, 3 - 4j])).eval()
    array([1., 3.])
    """
    (x,) = as_operands(x)
    return Real()(x) if _complex(x) else x


def imag(x):
    """The imaginary part (numpy.imag): zeros of x's dtype for real x."""
    (x,) = as_operands(x)
    return Imag()(x)


def conj(x):
    """The complex conjugate (numpy.conj); x itself for real x."""
    (x,) = as_operands(x)
    return Conj()(x) if _complex(x) else x


conjugate = conj


def angle(z):
    """The argument in radians, in (-π, π] (numpy.angle, without `deg`).

    >>> import stablegrad as sg
    >>> sg.angle(sg.constant([1j, -1.0])).eval()
    array([1.57079633, 3.14159265])
    """
    (z,) = as_operands(z)
    return Angle()(z)
