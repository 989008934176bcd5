"""Child process for the manifest stress test: one run appending rows one at a time.

usage: python helpers_manifest_writer.py MANIFEST WRITER_INDEX N_ROWS GO_FILE
Waits for GO_FILE so all writers start together, then after each new row writes the run's
growing row list, the way a Runtime does after every step attempt. Prints its run id.
"""

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from flower.runtime.manifest import Manifest, new_run_id


def main() -> None:
    path, writer, n_rows, go_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    run_id = f"{new_run_id()}-w{writer}"
    print(run_id, flush=True)
    manifest = Manifest(path, run_id)
    while not go_file.exists():
        time.sleep(0.01)
    rows: list[dict] = []
    for i in range(n_rows):
        rows.append({"step": f"w{writer}-step{i}", "ok": True, "ended_at": datetime.now(UTC)})
        manifest.write(rows)


if __name__ == "__main__":
    main()
