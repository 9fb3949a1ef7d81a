"""What the CLI prints for ``ragray sweep`` and the run-history commands (the work itself is in
:mod:`ragray.pipeline`, :mod:`ragray.sweep` and :mod:`ragray.store`)."""
