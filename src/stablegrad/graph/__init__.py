"""The graph: types, variables, nodes and walks."""
