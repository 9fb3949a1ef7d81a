"""Whether bf16 is faster on this CPU (what bench_dtype records), and generation.dtype auto on a CPU:
fp32 wherever bf16 is faster, bf16 only where RAGRAY_CPU_BF16=1 asks."""

import pytest

from ragray.generation.transformers import cpu_features as cpu

AMX = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f amx_bf16 amx_tile\n"
EPYC = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n"  # no AMX


@pytest.mark.parametrize(("cpuinfo", "native"), [(AMX, True), (EPYC, False)])
def test_native_bf16_follows_the_cpu_flags(tmp_path, monkeypatch, cpuinfo, native):
    monkeypatch.delenv("RAGRAY_CPU_BF16", raising=False)
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    flags = cpu.cpu_flags(str(tmp_path / "cpuinfo"))
    monkeypatch.setattr(cpu, "cpu_flags", lambda: flags)
    monkeypatch.setattr(cpu, "bf16_faster_by_timing", lambda: pytest.fail("flags were there: no timing"))
    assert cpu.native_bf16() is native


@pytest.mark.parametrize(("fp32_s", "bf16_s", "native"), [(2.6, 1.0, True), (1.0, 5.0, False), (1.2, 1.0, False)])
@pytest.mark.parametrize("cpuinfo", ["", AVX512_BF16])
def test_without_flags_or_amx_a_tiny_timing_decides(tmp_path, monkeypatch, fp32_s, bf16_s, native, cpuinfo):
    """No /proc/cpuinfo (not Linux), or bf16 instructions without AMX (measured 1.5x slower than
    fp32 on such a Xeon): bf16 only when a matrix product is 1.3x faster in it."""
    monkeypatch.delenv("RAGRAY_CPU_BF16", raising=False)
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    flags = cpu.cpu_flags.__wrapped__(str(tmp_path / "cpuinfo"))
    monkeypatch.setattr(cpu, "cpu_flags", lambda: flags)
    times = {"float32": fp32_s, "bfloat16": bf16_s}
    decide = cpu.bf16_faster_by_timing.__wrapped__  # uncached, with fake timings
    monkeypatch.setattr(cpu, "bf16_faster_by_timing", lambda: decide(times.get))
    assert cpu.native_bf16() is native


def test_the_timing_runs_real_matrix_products():
    pytest.importorskip("torch")
    assert 0 < cpu._matmul_seconds("float32", size=64, repeats=2) < 5
    assert 0 < cpu._matmul_seconds("bfloat16", size=64, repeats=2) < 5


def test_auto_is_float32_on_every_cpu_unless_the_environment_asks(monkeypatch):
    """bf16 changed 4 and 5 of 20 verdicts against fp32 on two CPUs where it is faster, so auto
    does not follow the CPU: an AMX Xeon gets fp32 like an AVX2 EPYC; RAGRAY_CPU_BF16=1 opts in."""
    torch = pytest.importorskip("torch")
    from ragray.generation.transformers import backend as tb

    monkeypatch.setattr(cpu, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    assert cpu.native_bf16() is True  # bf16 is faster here ...
    for forced in (None, "", "0"):
        if forced is None:
            monkeypatch.delenv("RAGRAY_CPU_BF16", raising=False)
        else:
            monkeypatch.setenv("RAGRAY_CPU_BF16", forced)
        assert tb._torch_dtype(torch, "auto", "cpu") == torch.float32  # ... and auto still takes fp32
    monkeypatch.setenv("RAGRAY_CPU_BF16", "1")
    assert tb._torch_dtype(torch, "auto", "cpu") == torch.bfloat16
    assert tb._torch_dtype(torch, "float32", "cpu") == torch.float32
    monkeypatch.setenv("RAGRAY_CPU_BF16", "0")
    assert tb._torch_dtype(torch, "bfloat16", "cpu") == torch.bfloat16  # asked for by name
    assert tb._torch_dtype(torch, "auto", "cuda:0") == torch.bfloat16
    assert tb._torch_dtype(torch, "float32", "cuda:0") == torch.float32


def test_no_cpuinfo_means_no_flags(tmp_path):
    assert cpu.cpu_flags(str(tmp_path / "missing")) == frozenset()
