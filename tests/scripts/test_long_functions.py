"""scripts/long_functions.py: no function in flower/ or flower_batch/ is over 60 lines unless it
says why (a `# long:` comment on its def line or the line above), and none is over 80."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "long_functions.py"


def test_every_function_over_60_lines_says_why() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_long_function_is_found_and_its_reason_read(tmp_path: Path) -> None:
    script = runpy.run_path(str(SCRIPT))
    body = "".join(f"    x{i} = {i}\n" for i in range(61))
    (tmp_path / "flower").mkdir()
    (tmp_path / "flower_batch").mkdir()
    (tmp_path / "flower" / "a.py").write_text(
        f"def short():\n    pass\n\ndef bare():\n{body}\n# long: one table\ndef said():\n{body}\n"
    )
    (tmp_path / "flower_batch" / "b.py").write_text(
        f"@staticmethod\ndef inline():  # long: a state machine\n{body}"
    )
    found = {f.name: f for f in script["long_functions"](tmp_path)}
    assert set(found) == {"bare", "said", "inline"}
    assert found["bare"].reason is None and found["bare"].lines == 62
    assert found["said"].reason == "one table" and found["inline"].reason == "a state machine"


def test_over_80_lines_fails_the_check_whatever_it_says(tmp_path: Path, monkeypatch) -> None:
    script = runpy.run_path(str(SCRIPT))
    body = "".join(f"    x{i} = {i}\n" for i in range(81))
    (tmp_path / "flower").mkdir()
    (tmp_path / "flower_batch").mkdir()
    (tmp_path / "flower" / "a.py").write_text(f"# long: a good reason\ndef said():\n{body}")
    main = script["main"]
    monkeypatch.setitem(main.__globals__, "long_functions", lambda: script["long_functions"](tmp_path))
    assert main(["--check"]) == 1
    assert main([]) == 0
