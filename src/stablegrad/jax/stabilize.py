"""`stabilize(fn)`: existing JAX code with stable values and gradients, the code left untouched.

    stable = stabilize(loglik)        # or @stabilize, or stabilize(f, static_argnums=(1,))
    stable(theta, x)                  # finite where loglik overflows
    jax.grad(stable)(theta, x)        # our gradient of the recognised formula

For each signature of its arguments (pytree structure, shapes, dtypes, static
values — as `jax.jit` keys its cache) `fn` is traced once with `jax.make_jaxpr`, the
jaxpr is imported into our graph (`importer`), naive formulas in it are recognised,
and the result runs as JAX code with our VJP (`lowered.LoweredGraph`).  So the wrapper
composes with `jax.jit`, `jax.vmap`, `jax.grad` and `jax.hessian` like any JAX function.

A primitive we have no op for stays a JAX call in the graph (`opaque.JaxCall`): JAX
computes and differentiates it, and `explain` lists it.  Only a function whose values
our graph cannot hold (PRNG keys, tokens) is not stabilised: the wrapper warns once,
naming the primitive and its line, and calls `fn` itself.

>>> import jax, jax.numpy as jnp
>>> naive = lambda x: jnp.log(jnp.sum(jnp.exp(x)))
>>> round(float(stabilize(naive)(jnp.array([1000.0, 1000.0]))), 3)
1000.693
>>> [float(g) for g in jax.grad(stabilize(naive))(jnp.array([1000.0, 1000.0]))]
[0.5, 0.5]
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ..errors import StableGradError, format_location
from ..graph.basic import Variable, toposort
from ..graph.inputs import tensor
from ..rewrite.engine import ChangeLog, Kind
from .importer import import_jaxpr
from .lowered import LoweredGraph
from .opaque import JaxCall

#: the rules that rebuild an op around its recognised body (named by the body's rewrites instead)
BODY_RULES = frozenset(["scan_body_recognised", "composite_body_recognised"])


class StabilizeError(TypeError):
    """The arguments of a stabilized function cannot be traced (the message names the argument)."""


@dataclass
class Traced:
    """What one signature compiled to: the lowered graph and the output tree, or why there is none."""

    graph: LoweredGraph | None
    out_tree: Any
    unsupported: StableGradError | None
    #: values of an outer trace that `fn` closes over: the graph's last inputs (then never cached)
    closure: tuple = ()

    def explanation(self) -> str:
        if self.unsupported is not None:
            where = format_location(self.unsupported.location)
            return f"{where}  not stabilised: {self.unsupported.message}; the function runs as written\n"
        assert self.graph is not None
        return explain_changes(self.graph.log) + "".join(line + "\n" for line in kept_as_jax(self.graph.recognised))


class Stabilized:
    """`fn` with stable values and gradients (see the module docstring); made by `stabilize`."""

    def __init__(self, fn: Callable, static_argnums: int | Sequence[int] = (), explain: bool = False):
        self.fn = fn
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.print_explanation = explain
        self._signature = _signature_or_none(fn)
        self._traced: dict[Hashable, Traced] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        traced, leaves = self._for(args, kwargs)
        if traced.graph is None:
            return self.fn(*args, **kwargs)
        return jax.tree_util.tree_unflatten(traced.out_tree, traced.graph(*leaves, *traced.closure))

    def explain(self, *args, **kwargs) -> str:
        """Which recognitions fire for these arguments, each with the user's source line."""
        return self._for(args, kwargs)[0].explanation()

    # -- tracing, once per signature ---------------------------------------------------------------------------
    def _for(self, args: tuple, kwargs: dict) -> tuple[Traced, list]:
        self._check_arity(args, kwargs)
        static = {i: args[i] for i in self._static_positions(len(args))}
        dynamic = [a for i, a in enumerate(args) if i not in static]
        leaves, tree = jax.tree_util.tree_flatten((dynamic, kwargs))
        avals = [_aval(leaf) for leaf in leaves]
        if None in avals:
            names = self._leaf_names(tree, [i for i in range(len(args)) if i not in static])
            k = avals.index(None)
            raise StabilizeError(
                f"stabilize({_name(self.fn)}): argument {names[k]} is a {type(leaves[k]).__name__}, not an array; "
                "pass arrays, or name its position in static_argnums"
            )
        key = (tree, tuple(avals), _hashable_static(static, self.fn))
        traced = self._traced.get(key)
        if traced is None:
            names = self._leaf_names(tree, [i for i in range(len(args)) if i not in static])
            traced = self._trace(static, len(args), tree, avals, names)
            if not traced.closure:  # (a tracer closed over belongs to this one trace of the caller's)
                self._traced[key] = traced
            if self.print_explanation:
                sys.stdout.write(f"stabilize({_name(self.fn)}):\n{traced.explanation()}")
        return traced, leaves

    def _trace(self, static: dict, n_args: int, tree, avals: list, names: list[str]) -> Traced:
        def flat_fn(*leaves):
            dynamic, kwargs = jax.tree_util.tree_unflatten(tree, leaves)
            dynamic_args = iter(dynamic)
            args = [static[i] if i in static else next(dynamic_args) for i in range(n_args)]
            return self.fn(*args, **kwargs)

        specs = [jax.ShapeDtypeStruct(shape, dtype, weak_type=weak) for shape, dtype, weak in avals]
        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*specs)
        out_tree = jax.tree_util.tree_structure(out_shape)
        inputs = [tensor(name, shape=shape, dtype=np.dtype(dtype)) for name, (shape, dtype, _) in zip(names, avals)]
        log = ChangeLog()
        # a tracer of an enclosing jit/grad/vmap that fn closes over is an input, not a constant
        closure = {k: c for k, c in enumerate(closed.consts) if isinstance(c, jax.core.Tracer)}
        closure_inputs = {
            k: tensor(f"closure{k}", shape=np.shape(c), dtype=np.dtype(c.dtype)) for k, c in closure.items()
        }
        try:
            outputs = import_jaxpr(closed, inputs, closure_inputs)
            graph = LoweredGraph([*inputs, *closure_inputs.values()], outputs, log)
        except StableGradError as exc:  # a primitive we lack, or a construct our graph cannot express
            where = format_location(exc.location)
            warnings.warn(
                f"stabilize({_name(self.fn)}): not stabilised, {exc.message} (at {where}); running it as written",
                stacklevel=4,
            )
            return Traced(None, out_tree, exc)
        return Traced(graph, out_tree, None, tuple(closure.values()))

    # -- argument checks ---------------------------------------------------------------------------------------
    def _check_arity(self, args: tuple, kwargs: dict) -> None:
        if self._signature is None:
            return
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise StabilizeError(f"stabilize({_name(self.fn)}): {exc}") from None

    def _static_positions(self, n_args: int) -> set[int]:
        positions = set()
        for i in self.static_argnums:
            if not -n_args <= i < n_args:
                raise StabilizeError(
                    f"stabilize({_name(self.fn)}): static_argnums names argument {i}, but it got {n_args} arguments"
                )
            positions.add(i % n_args)
        return positions

    def _leaf_names(self, tree, dynamic_positions: list[int]) -> list[str]:
        """Each leaf as the user wrote it: its parameter and its path inside, e.g. `params['w']`."""
        parameters = list(self._signature.parameters) if self._signature is not None else []
        skeleton = jax.tree_util.tree_unflatten(tree, range(tree.num_leaves))
        names = []
        for path, _ in jax.tree_util.tree_flatten_with_path(skeleton)[0]:
            group, *rest = path
            if group.idx == 1:  # keyword arguments: the first key is the name
                names.append(f"{rest[0].key}{jax.tree_util.keystr(tuple(rest[1:]))}")
                continue
            position = dynamic_positions[rest[0].idx]
            base = parameters[position] if position < len(parameters) else f"args[{position}]"
            names.append(f"{base}{jax.tree_util.keystr(tuple(rest[1:]))}")
        return names


def stabilize(fn: Callable | None = None, *, static_argnums: int | Sequence[int] = (), explain: bool = False) -> Any:
    """`fn` with stable values and gradients; a decorator too (`@stabilize`, `@stabilize(explain=True)`).

    `static_argnums`: positions of arguments that are not arrays (a config, a flag); each
    value gets its own trace, as with `jax.jit`.  `explain=True` prints, on the first call
    for each signature, which recognitions fired, with the user's source lines.
    """
    if fn is None:
        return lambda f: Stabilized(f, static_argnums, explain)
    return Stabilized(fn, static_argnums, explain)


def explain_changes(log: ChangeLog) -> str:
    """The recognitions of a log, one line each (`sg.explain`'s format), without repeats."""
    # (a loop or composite with a recognised body is listed by the body's own rewrites, with their lines)
    lines = [str(c) for c in log.changes if c.kind not in (Kind.INLINING, Kind.GUARD) and c.rule not in BODY_RULES]
    lines = list(dict.fromkeys(lines)) or ["no rewrites changed the formulas as written"]
    return "\n".join(lines) + "\n"


def kept_as_jax(outputs: Sequence[Variable]) -> list[str]:
    """A line for each primitive kept as a JAX call (`opaque.JaxCall`), loop bodies included."""
    lines = []
    for node in toposort(list(outputs)):
        if isinstance(node.op, JaxCall):
            lines.append(
                f"{format_location(node.location)}  {node.op.primitive.name}: no stablegrad op, kept as a JAX call "
                "(computed and differentiated by JAX; nothing is recognised through it)"
            )
        inner = getattr(node.op, "inner", None)  # a loop's body
        if inner is not None:
            lines += kept_as_jax(inner.outputs)
    return list(dict.fromkeys(lines))


def _aval(leaf) -> tuple | None:
    """(shape, dtype, weak_type) of an array leaf (or a tracer of one); None for anything else."""
    if isinstance(leaf, jax.Array | np.ndarray | np.generic) or hasattr(leaf, "aval"):
        aval = getattr(leaf, "aval", None)
        weak = bool(getattr(aval, "weak_type", False))
        return tuple(np.shape(leaf)), np.dtype(leaf.dtype), weak
    if isinstance(leaf, bool | int | float | complex):  # Python scalars: weakly typed, as JAX takes them
        return (), np.dtype(jax.numpy.asarray(leaf).dtype), True
    return None


def _hashable_static(static: dict, fn: Callable) -> tuple:
    try:
        key = tuple(sorted(static.items()))
        hash(key)
    except TypeError:
        raise StabilizeError(
            f"stabilize({_name(fn)}): static arguments must be hashable (like jax.jit's), got "
            + ", ".join(f"argument {i}: {type(v).__name__}" for i, v in static.items())
        ) from None
    return key


def _signature_or_none(fn: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some callables have none: JAX's trace will complain
        return None


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)
