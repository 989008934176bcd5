"""The bad-input campaign of issue 11, as tests: the real `flower-batch` command against a home
that already holds finished results (a 2-job batch that passed, a persistent job).

Every case asserts its exit code, one stderr line per problem (each naming what to fix), no
traceback, and the home byte-for-byte unchanged. Cases that need the container import check
share one container: their targets are tasks of one jobs.toml.

The attempt cases assert the opposite side: a re-run changes the home only by the new attempt,
and the previous one is in `<job>/attempts/<n>/` byte for byte.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.batch_fixtures.campaign import (
    BAD_MODULES,
    BAD_SCENARIOS,
    SEED_JOBS,
    changed,
    fingerprint,
    huge_jobs,
    problem_lines,
    write_files,
)
from tests.batch_fixtures.rig import (
    fb,
    labelled,
    project_copy,
    remove_leftovers,
    remove_resources,
    runtime_image,
    sessions_of,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BATCH = "i11-campaign"  # unique: teardown removes what carries this batch label
PERSISTENT = "keep-me"


@dataclass
class Seed:
    project: Path
    home: Path
    image: str


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seed]:
    """Finished results worth losing: batch `campaign` (alpha, beta passed) and a persistent job."""
    root = tmp_path_factory.mktemp("campaign")
    project = project_copy(root / "project")
    (project / "jobs.toml").write_text(SEED_JOBS.format(name=BATCH))
    write_files(project, {**BAD_MODULES, **BAD_SCENARIOS})
    home = root / "home"
    home.mkdir()
    image = runtime_image()
    ran = fb("matrix", "jobs.toml", "--image", image, home=home, cwd=project, timeout=240)
    assert ran.returncode == 0, ran.stderr
    alone = fb(
        "run",
        "tasks/alpha",
        "-f",
        "flows.py:solo",
        "--scenario",
        "scenarios/quick.toml",
        "--persistent",
        "--name",
        PERSISTENT,
        "--image",
        image,
        home=home,
        cwd=project,
        timeout=240,
    )
    assert alone.returncode == 0, alone.stderr
    shutil.rmtree(home / ".sessions", ignore_errors=True)  # clean exits leave an empty folder
    adhoc_sessions = sessions_of(home, "adhoc")  # only our own `run`'s leftovers, never another test's
    seen = sessions_of(home, BATCH)
    yield Seed(project, home, image)
    remove_leftovers(home, BATCH, seen)
    if adhoc_sessions:
        remove_resources(labelled("adhoc", adhoc_sessions))


@dataclass
class Copy:
    project: Path
    home: Path
    image: str

    def edit_jobs(self, fn: Callable[[str], str]) -> None:
        path = self.project / "jobs.toml"
        path.write_text(fn(path.read_text()))


@pytest.fixture
def copy(seed: Seed, tmp_path: Path) -> Copy:
    """A private copy of the seeded project and home."""
    shutil.copytree(seed.project, tmp_path / "project")
    shutil.copytree(seed.home, tmp_path / "home", symlinks=True)
    return Copy(tmp_path / "project", tmp_path / "home", seed.image)


@dataclass
class Case:
    name: str
    args: list[str]  # "{image}" is replaced by the test image
    expect: list[list[str]]  # one entry per stderr line: words that line must contain
    edit: Callable[[Copy], None] = lambda c: None
    code: int = 2
    stdout: Callable[[str], bool] = field(default=lambda out: True)


def _retarget(task: str, target: str) -> Callable[[Copy], None]:
    def edit(c: Copy) -> None:
        c.edit_jobs(lambda t: t.replace(f"[tasks.{task}]\n", f'[tasks.{task}]\nworkflow = "{target}"\n'))

    return edit


def _many_bad_targets(c: Copy) -> None:
    """One container for four cases: import raising, missing attribute, not a Workflow, os._exit."""
    c.edit_jobs(
        lambda t: (
            t
            + "".join(
                f'\n[tasks.{name}]\nworkspace = "tasks/alpha"\nworkflow = "{target}"\n'
                for name, target in (
                    ("boom", "boom.py:main"),
                    ("noattr", "flows.py:nope"),
                    ("notwf", "notwf.py:main"),
                    ("exits", "exits.py:main"),
                )
            )
        )
    )


def _scenario(name: str) -> Callable[[Copy], None]:
    return lambda c: c.edit_jobs(lambda t: t.replace("scenarios/quick.toml", name))


def _limits(field_line: str) -> Callable[[Copy], None]:
    return lambda c: c.edit_jobs(lambda t: t.replace("[tasks.alpha]\n", f"[tasks.alpha]\n{field_line}\n"))


def _misspelt_include(c: Copy) -> None:
    c.edit_jobs(
        lambda t: t + '\n[matrix]\nvariant = ["solo"]\ninclude = [{ varient = "solo", timeout = "90s" }]\n'
    )


def _huge(sizes: tuple[int, ...]) -> Callable[[Copy], None]:
    return lambda c: (c.project / "jobs.toml").write_text(huge_jobs(BATCH, sizes))


def _wake_target_removed(c: Copy) -> None:
    (c.home / "adhoc" / PERSISTENT / "flows" / "flows.py").write_text(
        'raise ImportError("flows copy broken")\n'
    )


CASES = [
    # -- matrix: the typo that wiped finished results (Why 1) ---------------------------------
    Case(
        "matrix-typo-target",
        ["matrix", "jobs.toml", "--image", "{image}"],
        [['workflow "flow.py:solo"', "task alpha", "flow.py not found", "did you mean flows.py?"]],
        edit=_retarget("alpha", "flow.py:solo"),
    ),
    Case(
        "matrix-import-failures-one-container",
        ["matrix", "jobs.toml", "--image", "{image}"],
        [
            ['"boom.py:main"', "importing boom.py failed: RuntimeError: boom at import"],
            ['"flows.py:nope"', "has no attribute 'nope'"],
            ['"notwf.py:main"', "expected a flower.Workflow, got int"],
            ['"exits.py:main"', "ended the Python process (exit code 3)"],
        ],
        edit=_many_bad_targets,
    ),
    Case(
        "matrix-unknown-rule-field",
        ["matrix", "jobs.toml", "--image", "{image}"],
        [["typo.toml", "rule #1 'hello'", "'repyl'", "unknown rule field", "did you mean 'reply'?"]],
        edit=_scenario("scenarios/typo.toml"),
    ),
    Case(
        "matrix-scenario-markup-kept",
        ["matrix", "jobs.toml", "--image", "{image}"],
        [["norules.toml", "'rules'", "[[rules]] reply"]],
        edit=_scenario("scenarios/norules.toml"),
    ),
    # -- limits (Why 5) ------------------------------------------------------------------------
    Case(
        "matrix-cpus-over-host",
        ["matrix", "jobs.toml", "--image", "{image}"],
        [['cpus "1000"', "task alpha", "CPU(s) the Docker host has"]],
        edit=_limits("cpus = 1000"),
    ),
    Case(
        "matrix-memory-over-host-warns",
        ["matrix", "jobs.toml", "--image", "{image}", "--dry-run"],
        [
            ["warning:", 'memory "', "more than the Docker host has", "limits nothing"],
            ["batch i11-campaign:"],
            ["1 finished job run again", "inputs changed: memory_bytes"],  # the seed's alpha
        ],
        edit=_limits('memory = "64t"'),
        code=0,
    ),
    Case(
        "matrix-memory-below-docker",
        ["matrix", "jobs.toml", "--image", "{image}"],
        [["tasks.alpha.memory", "below Docker's minimum of 6m"]],
        edit=_limits('memory = "1m"'),
    ),
    Case(
        "run-memory-1m",
        [
            "run",
            "tasks/alpha",
            "hi",
            "--memory",
            "1m",
            "--scenario",
            "scenarios/quick.toml",
            "--image",
            "{image}",
        ],
        [["--memory 1m", "below Docker's minimum of 6m"]],
    ),
    Case(
        "run-cpus-1000",
        [
            "run",
            "tasks/alpha",
            "hi",
            "--cpus",
            "1000",
            "--scenario",
            "scenarios/quick.toml",
            "--image",
            "{image}",
        ],
        [["--cpus 1000", "CPU(s) the Docker host has"]],
    ),
    # -- run: the checks it had to have up front ------------------------------------------------
    Case(
        "run-import-raising",
        [
            "run",
            "tasks/alpha",
            "-f",
            "boom.py:main",
            "--scenario",
            "scenarios/quick.toml",
            "--image",
            "{image}",
        ],
        [["--workflow boom.py:main", "importing boom.py failed: RuntimeError: boom at import"]],
    ),
    Case(
        "run-unknown-rule-field",
        ["run", "tasks/alpha", "hi", "--scenario", "scenarios/typo.toml", "--image", "{image}"],
        [["typo.toml", "unknown rule field", "did you mean 'reply'?"]],
    ),
    Case(
        "run-missing-file",
        ["run", "tasks/alpha", "-f", "nope.py:main", "--image", "{image}"],
        [["nope.py", "not found"]],
    ),
    # -- wake and repro ---------------------------------------------------------------------------
    Case(
        "wake-bad-scenario",
        ["wake", PERSISTENT, "more", "--scenario", "scenarios/typo.toml"],
        [["typo.toml", "unknown rule field"]],
    ),
    Case(
        "wake-broken-flows-copy",
        ["wake", PERSISTENT, "more"],
        [[f"job adhoc/{PERSISTENT}", "workflow flows.py:solo", "ImportError: flows copy broken"]],
        edit=_wake_target_removed,
    ),
    Case(
        "wake-budget-not-an-amount",
        ["wake", PERSISTENT, "--budget-usd", "+ten"],
        [["--budget-usd +ten", "like 0.50, or +0.20 to add to the cap"]],
    ),
    Case(
        "wake-budget-below-the-spend",
        ["wake", PERSISTENT, "--budget-usd", "0.000001"],
        [[f"job {PERSISTENT} has spent $", "give a cap above that"]],
    ),
    Case(
        "matrix-budget-negative",
        ["matrix", "jobs.toml", "--image", "{image}", "--budget-usd", "-1"],
        [["--budget-usd -1", "expected a positive amount of US dollars"]],
    ),
    Case(
        "repro-typo-workflow",
        ["repro", f"{BATCH}/alpha.r1", "-f", "flow.py:solo"],
        [["reproduction of i11-campaign/alpha.r1", "flow.py not found", "did you mean flows.py?"]],
    ),
    # -- the matrix itself -------------------------------------------------------------------------
    Case(
        "matrix-misspelt-include-key",
        ["matrix", "jobs.toml", "--image", "{image}", "--dry-run"],
        [
            ["warning:", "matrix.include[0].varient", "did you mean `variant`?"],
            ["batch i11-campaign:", "jobs"],
        ],
        edit=_misspelt_include,
        code=0,
    ),
    Case(
        "matrix-huge",
        ["matrix", "jobs.toml", "--image", "{image}"],
        [["makes 200,000 jobs", "a 100 × b 100 × c 20", "--allow-large"]],
        edit=_huge((100, 100, 20)),
    ),
    Case(
        "matrix-huge-dry-run",
        ["matrix", "jobs.toml", "--image", "{image}", "--dry-run"],
        [["makes 200,000 jobs", "--allow-large"]],
        edit=_huge((100, 100, 20)),
    ),
    Case(
        "matrix-large-dry-run-summarised",
        ["matrix", "jobs.toml", "--image", "{image}", "--dry-run", "--allow-large"],
        [["batch i11-campaign:", "12,000 jobs"]],
        edit=_huge((100, 120)),
        code=0,
        stdout=lambda out: (
            len(out.splitlines()) <= 40 and "12,000 jobs" in out and "axis a: 100 values" in out
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_each_and_changes_nothing(case: Case, copy: Copy) -> None:
    case.edit(copy)
    before = fingerprint(copy.home)
    args = [a.replace("{image}", copy.image) for a in case.args]
    t0 = time.monotonic()
    proc = fb(*args, home=copy.home, cwd=copy.project, timeout=120)
    took = time.monotonic() - t0
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    assert proc.returncode == case.code, f"exit {proc.returncode}: {text}"
    lines = problem_lines(proc.stderr)
    assert len(lines) == len(case.expect), f"expected {len(case.expect)} line(s), got:\n" + "\n".join(lines)
    for words in case.expect:
        hits = [line for line in lines if all(w in line for w in words)]
        assert len(hits) == 1, f"no single line with {words} in:\n" + "\n".join(lines)
    assert case.stdout(proc.stdout), proc.stdout[-3000:]
    assert changed(before, fingerprint(copy.home)) == [], f"the home changed ({took:.1f}s)"


# -- attempts are kept ---------------------------------------------------------------------------
def _job_tree(home: Path, job: str) -> dict[str, str]:
    return {p: d for p, d in fingerprint(home / BATCH / job).items() if not p.startswith("attempts")}


def _assert_kept(before: dict[str, str], home: Path, job: str, n: int) -> None:
    kept = fingerprint(home / BATCH / job / "attempts" / str(n))
    assert kept == before, f"attempt {n} of {job} differs from the folder it was: {changed(before, kept)}"


@pytest.mark.parametrize(
    "flags", [["--fresh"], ["--retry-failed"], []], ids=["fresh", "retry-failed", "default"]
)
def test_a_rerun_keeps_the_previous_attempt_byte_for_byte(flags: list[str], copy: Copy) -> None:
    # beta's verdict becomes `failed` (for --retry-failed) or `error` (the default re-runs it).
    record_path = copy.home / BATCH / "beta.r1" / "record.json"
    record = json.loads(record_path.read_text())
    if flags == ["--retry-failed"]:
        record.update(status="failed", reason="the check exited 1")
    elif not flags:
        record.update(status="error", reason="the container could not start")
    record_path.write_text(json.dumps(record, indent=2))
    rerun = ["alpha.r1", "beta.r1"] if flags == ["--fresh"] else ["beta.r1"]
    old = {job: _job_tree(copy.home, job) for job in ("alpha.r1", "beta.r1")}
    whole = fingerprint(copy.home)

    proc = fb(
        "matrix", "jobs.toml", "--image", copy.image, *flags, home=copy.home, cwd=copy.project, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    for job in ("alpha.r1", "beta.r1"):
        if job in rerun:
            _assert_kept(old[job], copy.home, job, 1)
            assert json.loads((copy.home / BATCH / job / "record.json").read_text())["attempt"] == 2
        else:
            assert _job_tree(copy.home, job) == old[job]
            assert not (copy.home / BATCH / job / "attempts").exists()
    # Everything else changed only where a batch run writes: its jobs, report, batch.json, gateways.
    allowed = "|".join(re.escape(j) for j in [*rerun, "report", ".gateway"])
    outside = [
        p
        for p in changed(whole, fingerprint(copy.home))
        if not re.match(rf"({BATCH}/({allowed})/|{BATCH}/batch\.json$|\.sessions/)", p)
    ]
    assert outside == []
    # Results come from the latest attempt.
    results = {
        j["id"]: j for j in json.loads((copy.home / BATCH / "report" / "results.json").read_text())["jobs"]
    }
    for job in rerun:
        latest = json.loads((copy.home / BATCH / job / "record.json").read_text())
        assert results[job]["status"] == latest["status"] == "passed"
        assert results[job]["outcome"]["duration_s"] == latest["duration_s"]
    shown = json.loads(fb("show", f"{BATCH}/beta.r1", "--json", home=copy.home).stdout)
    assert [a["attempt"] for a in shown["attempts"]] == [1]
    assert shown["attempts"][0]["status"] == {"--fresh": "passed", "--retry-failed": "failed"}.get(
        flags[0] if flags else "", "error"
    )
    assert shown["record"]["attempt"] == 2


def test_a_failed_preflight_on_rerun_keeps_the_old_attempt_in_place(copy: Copy) -> None:
    """--fresh with a typo: nothing moves to attempts/, nothing is replaced."""
    _retarget("alpha", "flow.py:solo")(copy)
    before = fingerprint(copy.home)
    proc = fb("matrix", "jobs.toml", "--image", copy.image, "--fresh", home=copy.home, cwd=copy.project)
    assert proc.returncode == 2, proc.stderr
    assert changed(before, fingerprint(copy.home)) == []


def test_repro_of_an_earlier_attempt_and_gc_attempts(copy: Copy) -> None:
    proc = fb(
        "matrix", "jobs.toml", "--image", copy.image, "--fresh", home=copy.home, cwd=copy.project, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    repro = fb("repro", f"{BATCH}/alpha.r1", "--attempt", "1", home=copy.home, cwd=copy.project, timeout=240)
    assert repro.returncode == 0, repro.stdout + repro.stderr
    assert "reproduction identical" in repro.stdout
    missing = fb("repro", f"{BATCH}/alpha.r1", "--attempt", "7", home=copy.home, cwd=copy.project)
    assert missing.returncode == 2 and "no earlier attempt 7 (attempts: 1" in missing.stderr

    dry = fb("gc", "--attempts", "--dry-run", home=copy.home)
    assert dry.returncode == 0 and (copy.home / BATCH / "alpha.r1" / "attempts" / "1").is_dir()
    assert "would remove 2 earlier attempt(s)" in dry.stderr
    pruned = fb("gc", "--attempts", "--batch", BATCH, home=copy.home)
    assert pruned.returncode == 0, pruned.stderr
    assert not (copy.home / BATCH / "alpha.r1" / "attempts" / "1").exists()
    assert (copy.home / BATCH / "alpha.r1" / "record.json").is_file()
