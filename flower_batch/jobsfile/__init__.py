"""jobs.toml -> JobsFile: parse, validate every field (all problems at once), render `${{ }}`,
expand the matrix. Nothing here touches Docker or a job's files. `[tasksets.NAME]` sections read
Harbor task folders as tasks (flower_batch/harbor); `include`/`exclude` globs (matrix -i/-x)
narrow any file by task name.

    load_jobs_file(path) -> JobsFile     parse_jobs_text(text, ...) for text already read
    Template / RenderContext             `${{ }}` templating     combinations(...) the matrix's rows
    value_label(axis, value)             a matrix value's label in job ids

The format is documented in docs/jobs-toml.md and schemas/jobs.schema.json; a problem is a
FieldError (flower_batch/errors.py), all of them one MatrixFileError.
"""

from ._combos import combinations
from ._fields import JOB_FIELDS
from ._ids import slugify, value_label
from ._keypath import KeyPath, format_path
from ._load import load_jobs_file, parse_jobs_text
from ._locate import KeyLines
from ._size import MAX_JOBS
from ._templating import RenderContext, Template

__all__ = [
    "JOB_FIELDS",
    "MAX_JOBS",
    "KeyLines",
    "KeyPath",
    "RenderContext",
    "Template",
    "combinations",
    "format_path",
    "load_jobs_file",
    "parse_jobs_text",
    "slugify",
    "value_label",
]
