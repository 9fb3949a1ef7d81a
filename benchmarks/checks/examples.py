"""README's transcript: re-rendered by ragray's console code from the kept run's tables."""

from __future__ import annotations

from collections.abc import Iterator

from benchmarks.verify import Figure, check, compare_block


@check("readme_example")
def readme_example() -> Iterator[Figure]:
    from benchmarks.readme_example import BEGIN, END, README, block

    yield from compare_block("README.md#readme-example", README, BEGIN, END, block())
