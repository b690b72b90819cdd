"""switch: a local routing proxy and cost dashboard for AI coding harnesses."""

__version__ = "0.1.0"
