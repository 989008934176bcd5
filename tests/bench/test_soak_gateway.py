"""bench/soak_gateway.py runs (--quick): the real gateway subprocess in both modes, its figures
printed next to the targets. Only that it runs and reports is checked here: performance claims
are the bench's, never a timed test's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "soak_gateway.py"


def load():
    spec = importlib.util.spec_from_file_location("soak_gateway", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak_gateway"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_soak_bench_runs_quick_in_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    soak = load()
    code = soak.main(
        [
            "--quick",
            "--requests",
            "12",
            "--parallel-requests",
            "4",
            "--latency-requests",
            "4",
            "--latency-body",
            "200000",
            "--gap",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert code in (0, 1)  # 1: a target missed (latency on a loaded machine); the figures are printed
    for mode in ("[scripted]", "[anthropic]"):
        assert f"{mode} long: 12 requests" in out and f"{mode} parallel:" in out and f"{mode} latency:" in out
    assert out.count("gateway RSS after") >= 4 and "target <= 100 MiB" in out
    # the disk figures are exact, not timings: they must pass
    log_lines = [line for line in out.splitlines() if "request log: worst bytes/request" in line]
    assert len(log_lines) == 2 and all(" PASS " in line for line in log_lines)
    assert (code == 0) == ("all targets met" in out)
