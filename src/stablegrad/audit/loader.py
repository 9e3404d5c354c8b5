"""Finding the model a command line names: `path/to/model.py:function` or `package.module:function`."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable

from .model import AuditError, parse_spec


def load_function(reference: str) -> Callable:
    """The function `reference` names; an AuditError with a one-line reason when it cannot be found."""
    module_part, sep, name = reference.rpartition(":")
    if not sep or not module_part or not name:
        raise AuditError(f"cannot read {reference!r}: name a model as path/to/model.py:function")
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        module = _import_file(module_part)
    else:
        module = _import_module(module_part)
    if not hasattr(module, name):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        listed = ", ".join(defined[:12]) or "no functions"
        raise AuditError(f"{module_part} has no function {name!r} (it defines: {listed})")
    fn = getattr(module, name)
    if not callable(fn):
        raise AuditError(f"{module_part}:{name} is a {type(fn).__name__}, not a function that builds a graph")
    return fn


def _import_file(path: str):
    if not os.path.isfile(path):
        raise AuditError(f"no such model file: {path}")
    directory = os.path.dirname(os.path.abspath(path))
    module_name = "_stablegrad_model_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise AuditError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, directory)  # so the model can import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise AuditError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(directory)
    return module


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise AuditError(f"no module named {exc.name!r} (name a file as path/to/model.py:function)") from exc
    except Exception as exc:
        raise AuditError(f"importing {name} failed: {type(exc).__name__}: {exc}") from exc


def parse_input(text: str) -> tuple[str, object]:
    """`x=float64[3,5]` → ("x", TensorType)."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise AuditError(f"cannot read --input {text!r}; write it as NAME=DTYPE[SHAPE], e.g. x=float64[3,5]")
    return name, parse_spec(spec)
