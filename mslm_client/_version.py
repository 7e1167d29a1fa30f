"""The client's version (its own module: the transport reads it without importing the package)."""

__version__ = "0.1.0"
