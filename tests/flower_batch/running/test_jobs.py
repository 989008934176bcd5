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


def test_run_check_exclude_and_limit_are_job_fields_checked_before_anything(tmp_path: Path) -> None:
    from flower_batch.errors import FlowerBatchError

    spec = _adhoc(tmp_path, check="test -f out.txt", exclude=("*.bin",), workspace_limit="1g")
    assert spec.check == "test -f out.txt" and spec.exclude == ("*.bin",) and spec.workspace_limit == 1 << 30
    assert _adhoc(tmp_path, workspace_limit="none").workspace_limit == 0
    with pytest.raises(FlowerBatchError, match=r"^--workspace-limit 'lots': expected a size like"):
        _adhoc(tmp_path, workspace_limit="lots")
    with pytest.raises(FlowerBatchError, match=r"^--check is empty"):
        _adhoc(tmp_path, check=" ")


def test_the_run_hash_leaves_out_the_home_and_what_is_excluded(tmp_path: Path) -> None:
    before = _adhoc(tmp_path).workspace_hash
    home = tmp_path / "ws" / "volumes"
    (home / "adhoc" / "old").mkdir(parents=True)
    (home / "adhoc" / "old" / "record.json").write_text("{}")
    assert _adhoc(tmp_path, home=home).workspace_hash == before  # the default ./volumes under `run .`
    (tmp_path / "ws" / "model.bin").write_bytes(b"0")
    assert _adhoc(tmp_path, home=home, exclude=("*.bin",)).workspace_hash == before
