"""`flower-batch gc --attempts [--keep N] [--batch B] [--dry-run]`: the only way kept attempts go."""

from __future__ import annotations

from flower_batch.commands.common import err, fail, out
from flower_batch.layout import Home
from flower_batch.running.attempts import prunable
from flower_batch.untrusted_files import remove_tree


def gc_attempts(home: Home, *, keep: int, batch: str | None, dry_run: bool) -> None:
    if keep < 0:
        fail(f"--keep {keep}: give how many earlier attempts of each job to keep (0 or more)")
    if batch is not None and not home.batch_dir(batch).is_dir():
        fail(f"no batch {batch} under {home.root} (see `flower-batch ls`)")
    verb = "would remove" if dry_run else "removed"
    count = 0
    for jd in home.jobs(batch):
        for folder in prunable(jd, keep):
            if not dry_run:
                remove_tree(folder)  # a job's tree: any depth
            out.print(
                f"{verb} {jd.batch}/{jd.job} attempt {folder.name}  ({folder})", markup=False, highlight=False
            )
            count += 1
    kept = f", keeping each job's newest {keep}" if keep else ""
    err.print(f"{verb} {count} earlier attempt(s){kept}", markup=False, highlight=False)
