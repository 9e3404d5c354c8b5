import os

from hypothesis import settings

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config):
    """`STABLEGRAD_TEST_BACKEND=jax pytest tests/ops`: the op suite with `backend="jax"` as every function's default.

    Opt-in (each compiled function is one XLA compilation, so the op suite takes tens of
    minutes); CI's parity check for the JAX backend is tests/backends/test_jax.py.
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
