"""Where results go: run directories (Parquet primary, CSV/JSON exports)."""
