"""helpers: the thin package behind the kit's notebooks (see README.md and docs/)."""

__version__ = "0.1.0"
