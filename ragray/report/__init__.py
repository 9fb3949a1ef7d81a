"""Reports: the self-contained ``report.html`` of a run directory, and its SVG charts."""

from ragray.report.report import render_report, write_report
from ragray.report.rundata import RunData, load_run

__all__ = ["RunData", "load_run", "render_report", "write_report"]
