"""The stability audit: sweep a model over hard inputs, compare with mpmath, name the line that breaks."""

from ..backends.provenance import Finding
from .core import audit
from .model import AuditError, parse_spec
from .report import AuditReport, Cell, Row
from .scenarios import InputSpec, Scenario, scenarios_for

__all__ = [
    "AuditError",
    "AuditReport",
    "Cell",
    "Finding",
    "InputSpec",
    "Row",
    "Scenario",
    "audit",
    "parse_spec",
    "scenarios_for",
]
