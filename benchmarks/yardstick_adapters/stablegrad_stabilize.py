"""Yardstick adapter: the cases written in jax.numpy and wrapped in `stablegrad.jax.stabilize`.

    python path/to/stability/run.py --system stablegrad_stabilize --adapters-dir benchmarks/yardstick_adapters
    STABILIZE=0 ... the same cases in plain JAX (no stabilize), for comparison

Value: `stabilize(f)(*inputs)`; gradient: `jax.grad` of `stabilize(sum(w · f))`; second
order: `jax.grad` of <that gradient, v> (reverse over reverse: forward mode cannot enter the
custom_vjp that `stabilize` returns).  float64 runs inside `jax.enable_x64`.
"""

import os
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from stablegrad.jax import stabilize

STABILIZE = os.environ.get("STABILIZE", "1") != "0"
wrap = stabilize if STABILIZE else (lambda fn: fn)


def _reduction(fn):
    return lambda x, axis=None, keepdims=False: fn(x, axis=axis, keepdims=keepdims)


VOCABULARY = dict(
    exp=jnp.exp, log=jnp.log, log1p=jnp.log1p, expm1=jnp.expm1, sqrt=jnp.sqrt, abs=jnp.abs, tanh=jnp.tanh,
    sum=_reduction(jnp.sum), max=_reduction(jnp.max), mean=_reduction(jnp.mean),
    maximum=jnp.maximum, where=jnp.where, matmul=jnp.matmul,
    logsumexp=lambda x, axis=None, keepdims=False: jax.nn.logsumexp(x, axis=axis, keepdims=keepdims),
    softmax=lambda x, axis=-1: jax.nn.softmax(x, axis=axis),
    log_softmax=lambda x, axis=-1: jax.nn.log_softmax(x, axis=axis),
    logaddexp=jnp.logaddexp, softplus=jax.nn.softplus, sigmoid=jax.nn.sigmoid, log_sigmoid=jax.nn.log_sigmoid,
    log1mexp=lambda x: jnp.log(-jnp.expm1(x)), xlogy=jax.scipy.special.xlogy,
    composite=lambda fn: fn,
)  # fmt: skip


def version():
    return f"stablegrad.jax.stabilize on jax {jax.__version__}" if STABILIZE else f"jax {jax.__version__}"


def namespace(dtype=None):
    return types.SimpleNamespace(name="stablegrad_stabilize", **VOCABULARY)


def evaluate(case, inputs, w, v):
    m = namespace()
    wrt = tuple(case.wrt_indices(len(inputs)))
    res = {}
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xs = [jnp.asarray(a) for a in inputs]
        weights = jnp.asarray(w)
        try:
            res["value"] = np.asarray(wrap(lambda *a: case.fn(m, *a))(*xs))
        except Exception as exc:  # (the check fails)
            res["value"] = exc
        weighted = wrap(lambda *a: jnp.sum(weights * case.fn(m, *a)))
        gradient = jax.grad(weighted, argnums=wrt)
        if "grad" in case.checks:
            try:
                res["grad"] = [np.asarray(g) for g in gradient(*xs)]
            except Exception as exc:
                res["grad"] = exc
        if "hvp" in case.checks:
            vs = [jnp.asarray(a) for a in v]

            def along_v(*a):
                return sum(jnp.sum(g * vj) for g, vj in zip(gradient(*a), vs))

            try:
                res["hvp"] = [np.asarray(h) for h in jax.grad(along_v, argnums=wrt)(*xs)]
            except Exception as exc:
                res["hvp"] = exc
    return res
