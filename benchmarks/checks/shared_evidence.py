"""The shared-evidence benchmark: ``benchmarks/results/shared_evidence.json`` and its docs/trust.md
block, recomputed from ``benchmarks/results/records/shared_evidence/`` (and the evidence exports
for the LDS rows)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from benchmarks.verify import Figure, check, compare_block, compare_json


@check("shared_evidence", covers=("shared_evidence.json",), slow=True)
def shared_evidence() -> Iterator[Figure]:
    from benchmarks.shared_evidence_docs import DOCS, DOCS_BEGIN, DOCS_END, docs_block
    from benchmarks.shared_evidence_report import RESULT, compute

    published = json.loads(RESULT.read_text(encoding="utf-8"))
    fresh = compute()
    yield from compare_json("shared_evidence.json", published, fresh)
    yield from compare_block("docs/trust.md#shared-evidence", DOCS, DOCS_BEGIN, DOCS_END, docs_block(fresh))
