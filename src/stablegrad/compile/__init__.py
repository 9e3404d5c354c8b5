"""Compilation: from symbolic inputs and outputs to a callable."""
