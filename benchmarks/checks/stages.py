"""The stage verdict's measured check: ``benchmarks/results/stages.json`` recomputed from
``benchmarks/results/records/stages/`` (the protocol's commit and test reads are provenance: the
check compares them with the protocol files, not with the records)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from benchmarks.verify import Figure, check, compare_block, compare_json


@check("stages", covers=("stages.json",))
def stages() -> Iterator[Figure]:
    from benchmarks.bench_stages import DOCS, DOCS_BEGIN, DOCS_END, RESULT, docs_block, load_records, result

    published = json.loads(RESULT.read_text(encoding="utf-8"))
    fresh = result(load_records())
    yield from compare_json("stages.json", published, fresh, skip=("machine",))
    yield from compare_block("docs/trust.md#stages", DOCS, DOCS_BEGIN, DOCS_END, docs_block(fresh))
