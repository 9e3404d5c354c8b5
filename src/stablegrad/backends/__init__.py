"""Backends: where a prepared graph runs.  NumPy is the default; the core never imports JAX."""
