"""PLACEHOLDER"""

from __future__ import annotations

RULES: tuple = ()
