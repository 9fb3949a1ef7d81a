"""The CLI's parts outside :mod:`ragray.cli`: its argument parser and help pages
(:mod:`~ragray.commands.parser`, :mod:`~ragray.commands.help_text`), and what it prints for
``ragray sweep`` and the run-history commands (the work itself is in :mod:`ragray.pipeline`,
:mod:`ragray.sweep` and :mod:`ragray.store`)."""
