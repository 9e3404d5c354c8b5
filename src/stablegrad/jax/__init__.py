"""Stable values and gradients for existing JAX code: `stabilize(fn)` (needs the `jax` extra).

>>> import jax.numpy as jnp
>>> from stablegrad.jax import stabilize
>>> round(float(stabilize(lambda x: jnp.log(jnp.sum(jnp.exp(x))))(jnp.array([1000.0, 1000.0]))), 3)
1000.693
"""

from .stabilize import Stabilized, StabilizeError, stabilize

__all__ = ["StabilizeError", "Stabilized", "stabilize"]
