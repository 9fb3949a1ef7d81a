"""benchmarks/checks/evidence.py: the evidence benchmark's published results (and the ContextCite
comparison) are recomputed from the committed records with no difference, and a changed published
value is reported as one."""

import json
import re

import pytest

from benchmarks import verify
from benchmarks.machine import SHARED_DATA

NEEDS_DATA = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                reason=f"{SHARED_DATA} is absent: the evidence and tracing rebuilds need the data sets")


def _run(names: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, tuple[int, int]], str]:
    code = verify.main(["--quiet", "--jobs", "1", "--only", *names])  # in this process: RESULTS may be patched
    out = capsys.readouterr().out
    counts = {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^== (\S+): (\d+) figures recomputed, (\d+) differ$",
                                                                 out, re.M)}
    return code, counts, out


@pytest.mark.parametrize("names", [
    pytest.param(["evidence_test", "evidence_validity"], marks=NEEDS_DATA, id="test-split"),
    pytest.param(["evidence_tune", "evidence_pilot"], marks=NEEDS_DATA, id="tune-split"),
    pytest.param(["tracing"], marks=NEEDS_DATA, id="tracing"),
    pytest.param(["used_rule", "evidence_gpu_vs_cpu", "contextcite"], id="from-records-only"),
])
@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_the_published_figures_are_the_recomputed_ones(names, capsys):
    code, counts, out = _run(names, capsys)
    assert code == 0, out
    assert set(counts) == set(names), out
    assert all(n > 0 and bad == 0 for n, bad in counts.values()), counts


def _tamper(data: dict, path: list) -> tuple[object, object]:
    *head, last = path
    for key in head:
        data = data[key]
    before = data[last]
    data[last] = before + 1 if isinstance(before, (int, float)) and not isinstance(before, bool) else "tampered"
    return before, data[last]


@pytest.mark.parametrize("name, file, path", [
    ("evidence_gpu_vs_cpu", "evidence_gpu_vs_cpu.json", ["comparisons", 0, "max_abs_difference", "subset.logprob"]),
    pytest.param("evidence_pilot", "evidence_pilot.json",
                 ["variants", "short_full", "pooled", "subsets", "all", "metrics", "lds", "measures", "jsd", "mean"],
                 marks=NEEDS_DATA, id="evidence_pilot"),
])
@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_a_changed_published_value_is_reported(name, file, path, tmp_path, monkeypatch, capsys):
    data = json.loads((verify.RESULTS / file).read_text(encoding="utf-8"))
    before, after = _tamper(data, path)
    (tmp_path / file).write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(verify, "RESULTS", tmp_path)
    code, counts, out = _run([name], capsys)
    assert code == 1
    assert counts[name][1] == 1, out
    assert f"{after!r} = {before!r}   <-- DIFFERS" in out
