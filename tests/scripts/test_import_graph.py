"""scripts/import_graph.py: docs/architecture.md's import graph is the one the code has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "import_graph.py"


def test_the_documented_import_graph_is_up_to_date() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_graph_lists_each_node_after_what_it_imports() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import runpy; g = runpy.run_path({str(SCRIPT)!r});"
            " e = g['edges']('flower_batch'); o = g['ordered'](e);"
            " print(all(o.index(d) < o.index(n) for n in e for d in e[n]));"
            " print('flower_batch.jobmodel' in e['flower_batch.running'])",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert done.stdout.split() == ["True", "True"]
