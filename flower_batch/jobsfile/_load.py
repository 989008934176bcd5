"""Read a jobs.toml: parse, validate everything, expand. Raises one `MatrixFileError`."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path

from flower_batch.errors import FieldError, MatrixFileError, MatrixTooLarge
from flower_batch.jobmodel.spec import JobsFile

from ._expand import Expander
from ._ids import slugify
from ._locate import KeyLines
from ._parse import Parser
from ._problems import Problems
from ._size import breakdown, count_jobs
from ._tasksets import Narrowing

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column \d+\)$")


def load_jobs_file(
    path: str | Path,
    *,
    max_jobs: int | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> JobsFile:
    """Parse, validate and expand the jobs file at `path`.

    With `max_jobs`, a file making more jobs than that is refused before it is expanded.
    `include`/`exclude` (matrix -i/-x) are globs on task names: only the tasks they select.

    Raises:
        MatrixFileError: the file is missing, unreadable or invalid; `.errors` lists every
            problem as one `file:line: field: fix` line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise MatrixFileError(
            [FieldError(str(path), None, "", f"cannot read the jobs file: {reason}")]
        ) from exc
    return parse_jobs_text(text, path=path, max_jobs=max_jobs, include=include, exclude=exclude)


def parse_jobs_text(
    text: str,
    *,
    path: Path,
    label: str | None = None,
    max_jobs: int | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> JobsFile:
    """Like `load_jobs_file` for text already read; relative paths resolve against `path`'s folder."""
    label = label or str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_POSITION.search(message)
        line = int(found.group(1)) if found else None
        message = _TOML_POSITION.sub("", message)
        raise MatrixFileError([FieldError(label, line, "", f"not valid TOML: {message}")]) from None
    problems = Problems(label, KeyLines(text))
    base_dir = path.resolve().parent
    parsed = Parser(problems, base_dir, Narrowing(tuple(include), tuple(exclude))).parse(data)
    if max_jobs is not None and (count := count_jobs(parsed)) > max_jobs:
        problems.add(
            ("matrix",),
            f"makes {count:,} jobs ({breakdown(parsed)}), more than {max_jobs:,}; pass "
            "--allow-large to run (or --dry-run) that many, or shrink an axis",
        )
        raise MatrixTooLarge(problems.errors())  # with the file's other problems: all before any expansion
    jobs = Expander(parsed, base_dir, problems).expand()
    problems.raise_if_any()
    tasks = tuple(dict.fromkeys(job.task for job in jobs))
    ordered_tasks = tuple(t for t in parsed.tasks if t in tasks)
    return JobsFile(
        path=path.resolve(),
        name=parsed.batch_name or slugify(path.stem) or "batch",
        image=parsed.image,
        budget_usd=parsed.budget_usd,
        backend=parsed.backend,
        tasks=ordered_tasks,
        variants=tuple(dict.fromkeys(job.variant for job in jobs)),
        axes=tuple(parsed.axes),
        repeat=parsed.repeat,
        jobs=tuple(jobs),
        descriptions={t: d for t, d in parsed.descriptions.items() if t in tasks},
    )
