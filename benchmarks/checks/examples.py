"""README's transcript: re-rendered by ragray's console code from the kept run's tables."""

from __future__ import annotations

from collections.abc import Iterator

from benchmarks.verify import Figure, check, compare_block


@check("readme_example")
def readme_example() -> Iterator[Figure]:
    from benchmarks.readme_example import BEGIN, END, README, block

    yield from compare_block("README.md#readme-example", README, BEGIN, END, block())


@check("serve_limits")
def serve_limits() -> Iterator[Figure]:
    """docs/serve.md's caps table: written from the caps in the code (no measurement behind it)."""
    from benchmarks.verify import REPO
    from ragray.config import limits

    yield from compare_block("docs/serve.md#serve-limits", REPO / "docs" / "serve.md", limits.DOCS_BEGIN, limits.DOCS_END,
                             limits.limits_table(limits.CAPS))
