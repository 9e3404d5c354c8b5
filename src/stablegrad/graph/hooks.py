"""Services the lower layers use and the higher layers provide: the package's only upward calls.

The layers import downward only (errors → graph → ops → rewrite → autodiff → backends →
compile → audit → api → cli; a test in tests/ reads every import to hold them to it).  A few
things a lower layer does need a higher one by nature:

| hook | used by | for | provided by |
|---|---|---|---|
| `tensor_functions` | `graph.basic.Variable` | operators and methods: `x + y`, `x[i]`, `x.sum()`, `x @ y` | `ops` (its `__init__`) |
| `function` | `Variable.eval`, `ops.composite` | compiling a graph: `.eval()`, a composite's `perform` | `compile.function` |
| `vjp` | `ops.composite`, `ops.scan` | a composite's and a loop's pullback, derived from the body | `autodiff` |
| `run_loop` | `ops.scan.Scan.perform` | running a loop with NumPy (its body compiled for the NumPy backend) | `backends.numpy_loops` |
| `public_api` | `backends.provenance` | naming the `sg.` function that fixes a formula, in NaN reports | `stablegrad` (`__init__`) |

Each provider registers itself when its module is imported, and `import stablegrad` imports
them all, so by the time user code runs every hook is filled.  A hook called before that says
which module provides it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Generic, Protocol, TypeVar

from ..errors import StableGradError

T = TypeVar("T")


class Hook(Generic[T]):
    """One service: `provide(impl)` once, from the layer that owns it; `get()` wherever it is used."""

    __slots__ = ("_impl", "provider", "service")

    def __init__(self, service: str, provider: str):
        self.service = service
        self.provider = provider
        self._impl: T | None = None

    def provide(self, impl: T) -> T:
        """Register the implementation (returned, so this also works as a decorator)."""
        self._impl = impl
        return impl

    def get(self) -> T:
        impl = self._impl
        if impl is None:
            raise StableGradError(
                f"{self.service} is provided by {self.provider}, which has not been imported; import stablegrad first"
            )
        return impl

    def __repr__(self) -> str:
        state = "provided" if self._impl is not None else "not provided"
        return f"Hook({self.service!r} from {self.provider}: {state})"


class TensorFunctions(Protocol):
    """What `Variable`'s operators and methods call: the ops layer's functions of the same names."""

    def add(self, x: Any, y: Any, /) -> Any: ...
    def subtract(self, x: Any, y: Any, /) -> Any: ...
    def multiply(self, x: Any, y: Any, /) -> Any: ...
    def divide(self, x: Any, y: Any, /) -> Any: ...
    def floor_divide(self, x: Any, y: Any, /) -> Any: ...
    def mod(self, x: Any, y: Any, /) -> Any: ...
    def power(self, x: Any, y: Any, /) -> Any: ...
    def matmul(self, x: Any, y: Any, /) -> Any: ...
    def negative(self, x: Any, /) -> Any: ...
    def abs(self, x: Any, /) -> Any: ...
    def invert(self, x: Any, /) -> Any: ...
    def logical_not(self, x: Any, /) -> Any: ...
    def logical_and(self, x: Any, y: Any, /) -> Any: ...
    def logical_or(self, x: Any, y: Any, /) -> Any: ...
    def equal(self, x: Any, y: Any, /) -> Any: ...
    def not_equal(self, x: Any, y: Any, /) -> Any: ...
    def less(self, x: Any, y: Any, /) -> Any: ...
    def less_equal(self, x: Any, y: Any, /) -> Any: ...
    def greater(self, x: Any, y: Any, /) -> Any: ...
    def greater_equal(self, x: Any, y: Any, /) -> Any: ...
    def getitem(self, x: Any, index: Any, /) -> Any: ...
    def at(self, x: Any, /) -> Any: ...
    def transpose(self, x: Any, axes: Any = None, /) -> Any: ...
    def reshape(self, x: Any, shape: Any, /) -> Any: ...
    def astype(self, x: Any, dtype: Any, /) -> Any: ...
    def shape_tuple(self, x: Any, /) -> tuple: ...
    def size(self, x: Any, /) -> Any: ...
    def sum(self, x: Any, /, axis: Any = None, keepdims: bool = False) -> Any: ...
    def mean(self, x: Any, /, axis: Any = None, keepdims: bool = False) -> Any: ...
    def max(self, x: Any, /, axis: Any = None, keepdims: bool = False) -> Any: ...
    def min(self, x: Any, /, axis: Any = None, keepdims: bool = False) -> Any: ...
    def prod(self, x: Any, /, axis: Any = None, keepdims: bool = False) -> Any: ...


#: a compiled function of `inputs` (what `sg.function(inputs, outputs, recognition=...)` returns)
CompileFunction = Callable[..., Callable[..., Any]]
#: cotangents of `wrt` given the outputs and their cotangents (what `autodiff.vjp` computes)
VJP = Callable[[Sequence[Any], Sequence[Any], Sequence[Any]], list]
#: a loop's outputs from its op and argument arrays: `run_loop(op, arrays, store_history)`
RunLoop = Callable[[Any, Sequence[Any], bool], tuple]

tensor_functions: Hook[TensorFunctions] = Hook("Variable's operators and methods", "stablegrad.ops")
function: Hook[CompileFunction] = Hook(
    "compiling a graph (.eval(), a composite's perform)", "stablegrad.compile.function"
)
vjp: Hook[VJP] = Hook("differentiating a body (composite and loop pullbacks)", "stablegrad.autodiff")
run_loop: Hook[RunLoop] = Hook("running a loop with NumPy", "stablegrad.backends.numpy_loops")
public_api: Hook[ModuleType] = Hook("the public namespace (sg.*), for fix hints", "stablegrad")
