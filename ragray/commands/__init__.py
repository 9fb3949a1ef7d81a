"""Library entry points behind the CLI commands (also called by Serve, Tune and jobs)."""
