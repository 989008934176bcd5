"""flower-batch: run flower workflows in pinned containers — one job, a matrix, a reproduction."""

__version__ = "0.1.0"
