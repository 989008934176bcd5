"""The pure-logic half of `flower-batch matrix`, in one import: jobs.toml -> jobs -> results.

    load_jobs_file(path) -> JobsFile            parse, validate (all errors), expand
    JobSpec.inputs_hash(image_id)               decides re-runs on resume
    plan_resume(jobs, image_id, records, ...)   keep / run per job
    BatchResults(...) + comparison_table / write_reports   the four outputs

The names live in three packages: jobsfile/ (parsing jobs.toml), jobmodel/ (specs, records,
outcomes, resume) and reports/; this package gathers the ones callers use, so
`from flower_batch.matrix import JobSpec` keeps working. Nothing here touches Docker. The file
format is documented in docs/jobs-toml.md and schemas/jobs.schema.json.
"""

from flower_batch.errors import FieldError, MatrixFileError, RecordError
from flower_batch.jobmodel.outcome import JobOutcome, StepSummary, decide_status, steps_from_manifest
from flower_batch.jobmodel.record import (
    RECORD_FORMAT,
    JobRecord,
    load_records,
    new_record,
    read_record,
    record_path,
    write_record,
)
from flower_batch.jobmodel.resume import Action, Decision, ResumePlan, plan_resume
from flower_batch.jobmodel.spec import GatewaySpec, JobsFile, JobSpec, gateway_label
from flower_batch.jobmodel.status import Status
from flower_batch.jobmodel.units import format_duration, parse_duration, parse_memory
from flower_batch.jobsfile import (
    JOB_FIELDS,
    MAX_JOBS,
    PLACEMENT,
    KeyLines,
    KeyPath,
    format_path,
    load_jobs_file,
    parse_jobs_text,
    slugify,
)
from flower_batch.reports import (
    RESULTS_FORMAT,
    BatchResults,
    Cell,
    Comparison,
    ReportPaths,
    compare,
    comparison_table,
    html_report,
    junit_xml,
    results_from_records,
    summary_line,
    wilson_interval,
    write_html,
    write_junit,
    write_reports,
    write_results_json,
)

__all__ = [
    "JOB_FIELDS",
    "MAX_JOBS",
    "PLACEMENT",
    "KeyLines",
    "KeyPath",
    "format_path",
    "RECORD_FORMAT",
    "RESULTS_FORMAT",
    "Action",
    "BatchResults",
    "Cell",
    "Comparison",
    "Decision",
    "FieldError",
    "GatewaySpec",
    "JobOutcome",
    "JobRecord",
    "JobSpec",
    "JobsFile",
    "MatrixFileError",
    "RecordError",
    "ReportPaths",
    "ResumePlan",
    "Status",
    "StepSummary",
    "compare",
    "comparison_table",
    "decide_status",
    "format_duration",
    "gateway_label",
    "html_report",
    "junit_xml",
    "load_jobs_file",
    "load_records",
    "new_record",
    "parse_duration",
    "parse_jobs_text",
    "parse_memory",
    "plan_resume",
    "read_record",
    "record_path",
    "results_from_records",
    "slugify",
    "steps_from_manifest",
    "summary_line",
    "wilson_interval",
    "write_html",
    "write_junit",
    "write_record",
    "write_reports",
    "write_results_json",
]
