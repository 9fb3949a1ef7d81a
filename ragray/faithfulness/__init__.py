"""Explanation faithfulness: deletion experiments, their cases and statistics."""
