import os

import numpy as np
from hypothesis import settings

# the suite's draws are the same on every run and machine: a fresh draw is for a soak, not a
# gate (`STABLEGRAD_FRESH_DRAWS=1` asks for one)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=25, deadline=None)
# another backend (below): each compiled function is an XLA compilation, the numerics are the NumPy run's
settings.register_profile("backend", max_examples=5, deadline=None, derandomize=True)
if os.environ.get("STABLEGRAD_TEST_BACKEND"):
    settings.load_profile("backend")
else:
    settings.load_profile("dev" if os.environ.get("STABLEGRAD_FRESH_DRAWS") else "ci")


def pytest_addoption(parser):
    parser.addoption(
        "--soak",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="run the rewrite fuzzer (tests/rewrite/test_fuzz.py) in fresh rounds for this long",
    )


def pytest_configure(config):
    """`STABLEGRAD_TEST_BACKEND=jax pytest tests/ops`: the op suite with `backend="jax"` as every function's default.

    Each compiled function is an XLA compilation, so this mode draws fewer hypothesis
    examples (the "backend" profile here, `_examples` in tests/ops/helpers.py): about three
    minutes.  XLA flushes subnormal numbers to zero on CPU, so closeness checks here
    forgive differences below the smallest normal number (as the stability yardstick does).
    """
    backend = os.environ.get("STABLEGRAD_TEST_BACKEND")
    if not backend:
        return
    import stablegrad
    import stablegrad.compile.function as compiled
    import stablegrad.testing

    original = compiled.function

    def function(inputs, outputs, backend=backend, **options):
        return original(inputs, outputs, backend=backend, **options)

    for module in (compiled, stablegrad, stablegrad.testing):
        module.function = function
    np.testing.assert_allclose = _forgiving_subnormals(np.testing.assert_allclose)


def _forgiving_subnormals(assert_allclose):
    def check(actual, desired, rtol=1e-7, atol=0.0, **options):
        dtype = np.asarray(actual).dtype
        tiny = float(np.finfo(dtype).tiny) if dtype.kind == "f" else 0.0
        assert_allclose(actual, desired, rtol=rtol, atol=atol + tiny, **options)

    return check
