"""Retrieval integrity audit (SPEC §6): coverage, noise and a PASS/FAIL score per query."""
