"""The CLI's parts outside :mod:`ragray.adapters.cli`: its argument parser and help pages
(:mod:`~ragray.adapters.commands.parser`, :mod:`~ragray.adapters.commands.help_text`), and what it prints for
``ragray sweep`` and the run-history commands (the work itself is in :mod:`ragray.pipeline`,
:mod:`ragray.adapters.sweep` and :mod:`ragray.store`)."""
