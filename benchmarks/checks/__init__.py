"""Checks of ``benchmarks/verify.py``: one module per publication, each recomputing its figures
from per-item records and registering itself with :func:`benchmarks.verify.check`."""
