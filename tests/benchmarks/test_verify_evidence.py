"""benchmarks/checks/evidence.py: a changed published value of the evidence benchmark is reported as
one (that every check recomputes its figures with no difference is test_verify's one run of them all)."""

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
