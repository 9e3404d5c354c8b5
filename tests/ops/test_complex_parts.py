"""real, imag, conj, angle and complex abs: values as NumPy's, gradients in JAX's convention.

For a real cost C of complex z = x + iy the gradient is ∂C/∂x - i·∂C/∂y (what jax.grad returns);
each is checked against central differences along both directions and against jax.grad itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stablegrad as sg
from stablegrad.ops.complex_parts import Angle, Conj, Imag, Real


def x64():
    """JAX in double precision for a block, as the jax backend runs (not switched on globally)."""
    enable = getattr(jax, "enable_x64", None)
    if enable is None:  # JAX before the top-level context manager
        from jax.experimental import enable_x64 as enable
    return enable(True)


COVERED = {Real, Imag, Conj, Angle}

Z = np.array([3 + 4j, -1 + 0.5j, -2 - 1e-3j, 0.25j])
WEIGHTS = np.array([1.0, -0.5, 2.0, 0.75])  # so that each entry's cost differs

# (name, stablegrad function, jax function): each applied entrywise, then a weighted real cost
PARTS = [
    ("real", sg.real, jnp.real),
    ("imag", sg.imag, jnp.imag),
    ("angle", sg.angle, jnp.angle),
    ("abs", sg.abs, jnp.abs),
    ("conj", lambda z: sg.imag(sg.conj(z) * (1 + 2j)), lambda z: jnp.imag(jnp.conj(z) * (1 + 2j))),
]


def central_gradient(f, v: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """∂f/∂x - i·∂f/∂y, entry by entry, by central differences."""
    out = np.zeros_like(v)
    for i in np.ndindex(v.shape):
        e = np.zeros_like(v)
        e[i] = h
        dx = (f(v + e) - f(v - e)) / (2 * h)
        dy = (f(v + 1j * e) - f(v - 1j * e)) / (2 * h)
        out[i] = dx - 1j * dy
    return out


@pytest.mark.parametrize(("name", "part", "jax_part"), PARTS, ids=[p[0] for p in PARTS])
def test_values_and_gradients_in_jax_convention(name, part, jax_part):
    z = sg.vector("z", dtype="complex128")
    cost = sg.sum(part(z) * WEIGHTS)
    value = sg.function([z], cost)
    grad = sg.function([z], sg.grad(cost, z))(Z)
    with x64():
        expected = np.sum(np.asarray(jax_part(jnp.asarray(Z))) * WEIGHTS)
        jax_grad = jax.grad(lambda w: jnp.sum(jax_part(w) * WEIGHTS))(jnp.asarray(Z))
    assert value(Z) == pytest.approx(float(expected), rel=1e-15)
    assert grad.dtype == np.complex128
    np.testing.assert_allclose(grad, central_gradient(value, Z), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(grad, np.asarray(jax_grad), rtol=1e-14, atol=1e-15)


def test_the_squared_modulus_has_gradient_twice_the_conjugate():
    z = sg.vector("z", dtype="complex128")
    cost = sg.sum(sg.real(z) ** 2 + sg.imag(z) ** 2)
    assert sg.function([z], sg.grad(cost, z))(Z).tolist() == (2 * np.conj(Z)).tolist()


def test_output_dtypes_and_real_operands():
    z, x = sg.vector("z", dtype="complex64"), sg.vector("x", dtype="float32")
    assert sg.real(z).dtype == sg.imag(z).dtype == sg.angle(z).dtype == sg.abs(z).dtype == np.float32
    assert sg.conj(z).dtype == np.complex64
    assert sg.real(x) is x and sg.conj(x) is x  # as NumPy: a real array is its own real part and conjugate
    v = np.array([-2.0, 0.0, 3.0], np.float32)
    got_imag, got_angle = sg.function([x], [sg.imag(x), sg.angle(x)])(v)
    assert got_imag.tolist() == [0.0, 0.0, 0.0] and got_angle.tolist() == np.angle(v).tolist()
    gx = sg.function([x], sg.grad(sg.sum(sg.angle(x) + sg.imag(x)), x))(v)
    assert gx.tolist() == [0.0, 0.0, 0.0]  # piecewise constant on the real line


def test_gradients_at_zero_are_zero():
    z = sg.vector("z", dtype="complex128")
    g = sg.function([z], sg.grad(sg.sum(sg.abs(z) + sg.angle(z)), z))(np.array([0j, 1j]))
    assert g[0] == 0 and g[1] == pytest.approx(-1j + -1)  # at i: conj(i)/|i| = -i, and -i/i = -1


def test_a_real_input_cast_to_complex_gets_the_real_part_of_the_gradient():
    x = sg.vector("x")
    cost = sg.sum(sg.imag(sg.exp(sg.astype(x, "complex128") * 1j)))  # Σ sin x
    v = np.array([0.3, -1.2])
    g = sg.function([x], sg.grad(cost, x))(v)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, np.cos(v), rtol=1e-15)


def test_numpy_names():
    assert sg.conjugate is sg.conj
    z = sg.vector("z", dtype="complex128")
    got = sg.function([z], [np.real(z), np.imag(z), np.conj(z), np.angle(z)])(Z)
    for a, b in zip(got, (np.real(Z), np.imag(Z), np.conj(Z), np.angle(Z))):
        assert a.tolist() == b.tolist()
