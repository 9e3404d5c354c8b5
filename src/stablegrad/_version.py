"""The package version: the one source that pyproject.toml (setuptools' dynamic version) and `sg.__version__` read."""

__version__ = "0.1.0"
