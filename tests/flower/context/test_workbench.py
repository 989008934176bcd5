"""Workbench: layout, INDEX.md, prompt block, idempotence."""

from __future__ import annotations

import os

from flower.context.trim import spill
from flower.context.workbench import ARTIFACT_THRESHOLD, Workbench, describe


def test_default_layout_under_dot_flower(tmp_path):
    wb = Workbench(tmp_path).ensure()
    assert wb.root == tmp_path.resolve() / ".flower"
    for sub in ("scripts", "artifacts", "notes"):
        assert (wb.root / sub).is_dir()
    assert wb.index.is_file()
    assert "(还没有文件)" in wb.index.read_text(encoding="utf-8")


def test_custom_dirname_and_fspath(tmp_path):
    wb = Workbench(tmp_path, dirname="workbench")
    assert os.fspath(wb) == str(tmp_path.resolve() / "workbench")
    assert not wb.root.exists()  # constructing touches nothing
    wb.ensure()
    assert wb.notes.is_dir()


def test_ensure_is_idempotent_and_keeps_files(tmp_path):
    wb = Workbench(tmp_path).ensure()
    (wb.notes / "需求.md").write_text("# 需求确认书\n", encoding="utf-8")
    first = wb.index.read_text(encoding="utf-8")
    mtime = wb.index.stat().st_mtime_ns
    assert wb.ensure() is wb
    assert (wb.notes / "需求.md").read_text(encoding="utf-8") == "# 需求确认书\n"
    second = wb.index.read_text(encoding="utf-8")
    assert "notes/需求.md" in second and "notes/需求.md" not in first
    mtime2 = wb.index.stat().st_mtime_ns
    wb.refresh()
    assert wb.index.stat().st_mtime_ns == mtime2  # unchanged content is not rewritten
    assert mtime2 >= mtime


def test_index_lists_files_with_one_line_descriptions(tmp_path):
    wb = Workbench(tmp_path).ensure()
    (wb.scripts / "count.py").write_text(
        '#!/usr/bin/env python\n"""Count lines in logs."""\n', encoding="utf-8"
    )
    (wb.artifacts / "report.md").write_text("\n\n## Test report\nall green\n", encoding="utf-8")
    (wb.artifacts / "blob.bin").write_bytes(b"\x00\x01\x02")
    (wb.notes / "empty.txt").write_text("", encoding="utf-8")
    (wb.notes / ".hidden").write_text("secret-ish", encoding="utf-8")
    (wb.notes / "long.txt").write_text("x" * 300, encoding="utf-8")
    index = wb.refresh().read_text(encoding="utf-8")
    assert "- `scripts/count.py` — Count lines in logs." in index
    assert "- `artifacts/report.md` — Test report" in index
    assert "- `artifacts/blob.bin` — 二进制, 3 字节" in index
    assert "- `notes/empty.txt` — (空文件)" in index
    assert ".hidden" not in index and "INDEX.md`" not in index
    long_line = next(line for line in index.splitlines() if "long.txt" in line)
    assert long_line.endswith("…") and len(long_line) < 120
    # sorted: artifacts before notes before scripts
    assert (
        index.index("artifacts/blob.bin") < index.index("notes/empty.txt") < index.index("scripts/count.py")
    )


def test_index_counts_spill_and_worktrees_instead_of_listing_them(tmp_path):
    wb = Workbench(tmp_path).ensure()
    pointer = spill("y" * 5000, wb)  # the spill helper accepts the Workbench object itself
    assert pointer is not None and str(wb.root / "spill") in pointer
    (wb.root / "worktrees" / "coder" / "src").mkdir(parents=True)
    (wb.root / "worktrees" / "coder" / "src" / "main.py").write_text("print()\n", encoding="utf-8")
    index = wb.refresh().read_text(encoding="utf-8")
    assert "`spill/` — 被截出的长工具结果 (1 项)" in index
    assert "`worktrees/`" in index and "main.py" not in index


def test_index_is_capped(tmp_path, monkeypatch):
    import flower.context.workbench as mod

    monkeypatch.setattr(mod, "INDEX_LIMIT", 3)
    wb = Workbench(tmp_path).ensure()
    for i in range(5):
        (wb.artifacts / f"a{i}.txt").write_text(f"artifact {i}\n", encoding="utf-8")
    index = wb.refresh().read_text(encoding="utf-8")
    assert "a2.txt" in index and "a3.txt" not in index
    assert "另有 2 个文件未列出" in index


def test_prompt_block_names_places_and_the_artifact_rule(tmp_path):
    wb = Workbench(tmp_path)
    block = wb.prompt_block()
    for part in (".flower/INDEX.md", ".flower/scripts/", ".flower/artifacts/", ".flower/notes/"):
        assert part in block
    assert str(ARTIFACT_THRESHOLD) in block
    assert len(block) < 600  # it rides along in every prompt: keep it short


def test_prompt_block_outside_workspace_uses_absolute_path(tmp_path):
    wb = Workbench(tmp_path / "ws", dirname="../elsewhere")
    assert wb.root == (tmp_path / "elsewhere").resolve()
    assert f"`{wb.root}/INDEX.md`" in wb.prompt_block()


def test_equality_by_root(tmp_path):
    assert Workbench(tmp_path) == Workbench(str(tmp_path))
    assert Workbench(tmp_path) != Workbench(tmp_path, dirname="other")
    assert len({Workbench(tmp_path), Workbench(tmp_path)}) == 1


def test_describe_skips_rules_and_handles_missing(tmp_path):
    f = tmp_path / "a.md"
    f.write_text("-----\n===\n\n# Title here\n", encoding="utf-8")
    assert describe(f) == "Title here"
    assert describe(tmp_path / "missing.txt") == ""
