"""adhoc_spec, the job `flower-batch run` makes: its input hashes, and its refusals before anything exists."""

from __future__ import annotations

from pathlib import Path

import pytest


def _adhoc(tmp_path: Path, **kw):
    from flower_batch.running.jobs import adhoc_spec

    ws = tmp_path / "ws"
    if not ws.exists():
        ws.mkdir()
        (ws / "a.txt").write_text("one\n")
    args = dict(
        workspace=ws,
        task="say hi",
        workflow=None,
        prompt=None,
        name="j1",
        timeout="10m",
        cpus=None,
        memory=None,
        env={},
        secrets_=[],
        scenario=None,
        environ={},
    )
    args.update(kw)
    return adhoc_spec(**args)


def test_run_spec_hashes_workspace_and_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("# empty\n")
    spec = _adhoc(tmp_path, scenario=scenario)
    assert spec.workspace_hash and spec.workspace_hash.startswith("sha256:")
    assert spec.gateway.scenario_hash and spec.gateway.scenario_hash.startswith("sha256:")
    before = spec.inputs_hash("sha256:img")
    (tmp_path / "ws" / "a.txt").write_text("two\n")
    assert _adhoc(tmp_path, scenario=scenario).inputs_hash("sha256:img") != before


def test_run_refuses_unset_secret_and_bad_cpus_before_anything_exists(tmp_path: Path) -> None:
    from flower_batch.errors import FlowerBatchError

    with pytest.raises(FlowerBatchError, match="NOPE_X"):
        _adhoc(tmp_path, secrets_=["NOPE_X"], environ={})
    assert _adhoc(tmp_path, secrets_=["NOPE_X"], environ={"NOPE_X": "v"}).secrets == ("NOPE_X",)
    for cpus in (-1.0, 0.0):
        with pytest.raises(FlowerBatchError, match="--cpus"):
            _adhoc(tmp_path, cpus=cpus)
    with pytest.raises(FlowerBatchError, match="ANTHROPIC_API_KEY"):
        _adhoc(tmp_path, secrets_=["ANTHROPIC_API_KEY"], environ={"ANTHROPIC_API_KEY": "sk"})
