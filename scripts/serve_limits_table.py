"""Write the table of the caps on a client's settings into docs/serve.md, from ragray.config.limits.CAPS.

    python scripts/serve_limits_table.py

tests/architecture/test_generated_blocks.py fails while the page's table differs from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from ragray.config.limits import CAPS, DOCS_BEGIN, DOCS_END, limits_table

PAGE = Path(__file__).resolve().parents[1] / "docs" / "serve.md"


def publish(page: Path = PAGE) -> None:
    text = page.read_text(encoding="utf-8")
    head, rest = text.split(DOCS_BEGIN, 1)
    _, tail = rest.split(DOCS_END, 1)
    page.write_text(f"{head}{DOCS_BEGIN}\n{limits_table(CAPS)}\n{DOCS_END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    publish()
