"""Helpers of :mod:`ragray.data.chunking`: text units (words, sentences, tokens, sections)."""
