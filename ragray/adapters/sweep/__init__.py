"""Configuration sweeps on Ray Tune: spec, trials, step-level metrics, score and leaderboard."""
