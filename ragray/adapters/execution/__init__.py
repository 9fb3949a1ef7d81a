"""Executors for the per-question work of ``ragray run`` and ``ragray interpret``."""
