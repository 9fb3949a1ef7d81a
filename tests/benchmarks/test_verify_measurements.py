"""``benchmarks/verify.py``'s measurement and README checks: every figure they cover agrees with its
records, and a published number changed by hand (or a record changed under it) is caught."""

from __future__ import annotations

import copy
import json

import pytest

from benchmarks import verify
from benchmarks.checks import measurements, readme
from benchmarks.checks.measurements import MEASUREMENT_CHECKS

CHECKS = [*MEASUREMENT_CHECKS, "readme"]


def _run(capsys, *names: str) -> tuple[int, str]:
    code = verify.main(["--quiet", "--jobs", "1", "--only", *names])  # in this process: RESULTS may be patched
    return code, capsys.readouterr().out


def test_every_measurement_and_readme_figure_agrees_with_its_records(capsys) -> None:
    code, out = _run(capsys, *CHECKS)
    assert code == 0, out
    assert "CANNOT RECOMPUTE" not in out
    for name in CHECKS:
        assert f"== {name}: " in out  # every check ran
    assert "; 0 differ;" in out


def test_the_measurement_checks_cover_the_measurement_files() -> None:
    verify.load_checks()
    covered = {c for name in MEASUREMENT_CHECKS for c in verify.CHECKS[name].covers}
    for rel in ("gpu_8b.json", "default_cost.json", "generation.json", "throughput.json", "gpu_8b_ab_fair.json"):
        assert rel in covered and (verify.RESULTS / rel).is_file()


def _tampered(monkeypatch, rel: str, change) -> None:
    """``read_json`` as the measurement checks see it, with ``rel`` changed by ``change``."""
    real = measurements.read_json

    def fake(name: str):
        data = real(name)
        if name == rel:
            data = copy.deepcopy(data)
            change(data)
        return data

    monkeypatch.setattr(measurements, "read_json", fake)


def test_a_published_rate_changed_by_hand_is_caught(capsys, monkeypatch) -> None:
    _tampered(monkeypatch, "gpu_8b.json", lambda d: d["ragray"].__setitem__("calls_per_s", 33.12))
    code, out = _run(capsys, "bench_gpu")
    assert code == 1
    assert "gpu_8b.json:ragray.calls_per_s: 33.12 = 32.12   <-- DIFFERS" in out


def test_a_record_changed_under_its_figures_is_caught(capsys, monkeypatch) -> None:
    """A run's seconds changed: the rate, the speed-ups and the shares derived from it all differ."""
    _tampered(monkeypatch, "default_cost.json", lambda d: d["runs"]["work"][0].__setitem__("wall_s", 300.0))
    code, out = _run(capsys, "default_cost")
    assert code == 1
    assert "default_cost.json:mean_wall_s.work: 221.43 = " in out and "ratio_work_over_base" in out


def test_a_derived_statistic_changed_by_hand_is_caught(capsys, monkeypatch) -> None:
    _tampered(monkeypatch, "gpu_8b_ab_fair.json", lambda d: d["fair_ab"].__setitem__("change_pct_mean", -0.9))
    code, out = _run(capsys, "gpu_8b_ab_fair")
    assert code == 1
    assert "gpu_8b_ab_fair.json:fair_ab.change_pct_mean: -0.9 = -1.39   <-- DIFFERS" in out


@pytest.mark.parametrize("old, new, figure", [
    ("7.7% padding", "7.8% padding", "README:H200 padding: '7.8' = '7.7'"),
    ("ragray did 32.1 calls/s", "ragray did 34.6 calls/s", "README:H200 calls/s first run: '34.6' = '32.1'"),
    ("0.82, 0.82 and 0.76", "0.85, 0.82 and 0.76", "README:test split LDS: '0.85, 0.82 and 0.76' = '0.82, 0.82 and 0.76'"),
])
def test_a_readme_number_that_disagrees_with_its_record_is_caught(capsys, monkeypatch, tmp_path, old, new, figure) -> None:
    text = readme.README.read_text(encoding="utf-8")
    assert old in text
    page = tmp_path / "README.md"
    page.write_text(text.replace(old, new), encoding="utf-8")
    monkeypatch.setattr(readme, "README", page)
    code, out = _run(capsys, "readme")
    assert code == 1
    assert f"{figure}   <-- DIFFERS" in out


def test_each_archived_file_says_why_it_is_not_rechecked() -> None:
    archive = verify.RESULTS / "archive"
    notes = (archive / "README.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in archive.glob("*.json"))
    assert files
    for name in files:
        assert f"`{name}`" in notes
        json.loads((archive / name).read_text(encoding="utf-8"))  # kept whole
