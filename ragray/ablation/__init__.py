"""Ablation plans (which passages each call sees) and the loop that runs them."""
