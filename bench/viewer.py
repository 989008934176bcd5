"""The trajectory viewer and report.html on a 5,000-job batch (issue 14), against the targets:

    view: the job list endpoint served in < 2 s (cold: every record parsed), and the page
          showing the list in headless Chromium in < 2 s
    report.html: < 20 MB, opens in headless Chromium (loaded, its script run) in < 5 s

    .venv/bin/python bench/viewer.py [--jobs 5000] [--quick] [--keep DIR]

The batch is synthetic but shaped like a real one: 50 tasks x 5 variants x 20 repeats, records
written by the matrix's own code (spec, outcome, steps, check output), a container.log per job,
a workspace copy per job (a few files changed against its task's source), and, for a sample of
jobs, a manifest.json and a sessions.db (written through flower's SQLiteSessionStore) with
judge rounds, tool calls and a subagent. `--quick` samples fewer sessions and keeps workspaces
smaller; the job count stays 5,000. Timings are the best of `--repeat` runs (the worst in
brackets: a shared machine's load shows there), each cold where it says so; all are measured in
this one run and printed with PASS/FAIL; the exit status is 1 if a target was missed.

    --keep DIR --reuse   measure an already-built batch in DIR again (no rebuild)
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flower.context.store import SQLiteSessionStore  # noqa: E402
from flower_batch.jobmodel.outcome import JobOutcome, StepSummary  # noqa: E402
from flower_batch.jobmodel.record import load_records, new_record, write_record  # noqa: E402
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec  # noqa: E402
from flower_batch.jobmodel.status import Status  # noqa: E402
from flower_batch.layout import Home  # noqa: E402
from flower_batch.reports import results_from_records, write_reports  # noqa: E402
from flower_batch.view.server import ViewServer  # noqa: E402
from tests.cdp import Browser  # noqa: E402 — the tests' DevTools client: no websocket dependency

BATCH = "bench-5000"
IMAGE = "sha256:" + "b" * 64
VARIANTS = ("opus-careful", "opus-quick", "sonnet-careful", "sonnet-quick", "haiku")
STEPS = ("确认需求", "设定目标", "干活", "干活·判定#1", "干活#round2", "干活·判定#2")
RATES = {"opus-careful": 0.85, "opus-quick": 0.7, "sonnet-careful": 0.75, "sonnet-quick": 0.55, "haiku": 0.35}


def make_sources(root: Path, tasks: int, files: int) -> list[Path]:
    out = []
    for t in range(tasks):
        src = root / f"task-{t:02d}"
        (src / "src").mkdir(parents=True)
        for f in range(files):
            (src / "src" / f"mod_{f}.py").write_text(
                "".join(f"def f{i}():\n    return {i}\n" for i in range(40))
            )
        (src / "README.md").write_text(f"# task {t}\n\nMake the tests pass.\n")
        out.append(src)
    return out


def job_spec(job_id: str, task: int, variant: str, repeat: int, source: Path) -> JobSpec:
    return JobSpec(
        id=job_id,
        task=f"task-{task:02d}",
        variant=variant,
        repeat=repeat,
        matrix={"model": variant.split("-")[0], "style": variant.split("-")[-1]},
        prompt=f"Fix the failing tests of task {task}; keep the public API.",
        workflow="examples.workflows:careful",
        workspace=source,
        check="pytest -q",
        gateway=GatewaySpec(mode="scripted"),
        budget_usd=2.0,
    )


def outcome_for(job_id: str, variant: str, rng: random.Random) -> JobOutcome:
    roll = rng.random()
    status = (
        Status.PASSED
        if roll < RATES[variant]
        else Status.FAILED
        if roll < 0.95
        else rng.choice([Status.TIMEOUT, Status.ERROR, Status.BUDGET])
    )
    steps = tuple(
        StepSummary(
            name,
            ok=True,
            cost_usd=round(rng.uniform(0.005, 0.08), 4),
            num_turns=rng.randint(1, 9),
            duration_s=round(rng.uniform(2, 90), 1),
            verdict=("achieved" if status is Status.PASSED else "not_yet") if "判定" in name else None,
        )
        for name in STEPS
    )
    check = "".join(
        f"tests/test_mod.py::test_{i} {'PASSED' if status is Status.PASSED or i % 3 else 'FAILED'}\n"
        for i in range(30)
    )
    return JobOutcome(
        job_id,
        status,
        workflow_ok=status is not Status.ERROR,
        check_exit=0 if status is Status.PASSED else 1,
        cost_usd=round(sum(s.cost_usd or 0 for s in steps), 4),
        num_turns=sum(s.num_turns or 0 for s in steps),
        duration_s=round(sum(s.duration_s or 0 for s in steps), 1),
        steps=steps,
        gateway_mode="scripted",
        reason=None if status is Status.PASSED else f"check exited 1 ({status.value})",
        check_output=check,
    )


def transcript(n_turns: int, rng: random.Random) -> tuple[list[dict], list[dict]]:
    """A main session with tool calls and one Agent call, and its subagent's transcript."""
    main: list[dict] = []
    t0 = 1_700_000_000

    def add(into: list[dict], kind: str, message: dict, **extra) -> None:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0 + len(into))) + ".000Z"
        into.append({"type": kind, "uuid": str(uuid.uuid4()), "timestamp": ts, "message": message, **extra})

    add(main, "user", {"role": "user", "content": "Fix the failing tests; keep the public API."})
    for i in range(n_turns):
        mid, tid = f"msg_{uuid.uuid4().hex[:12]}", f"toolu_{uuid.uuid4().hex[:12]}"
        usage = {"input_tokens": 1500 + 40 * i, "cache_read_input_tokens": 12_000, "output_tokens": 200}
        add(
            main,
            "assistant",
            {
                "id": mid,
                "role": "assistant",
                "model": "claude",
                "usage": usage,
                "content": [{"type": "text", "text": f"Looking at module {i}."}],
            },
        )
        name = "Agent" if i == 2 else rng.choice(["Read", "Bash", "Edit"])
        tool_input = (
            {"description": "run the tests", "subagent_type": "coder", "prompt": "run pytest"}
            if name == "Agent"
            else {"file_path": f"/workspace/src/mod_{i}.py"}
        )
        add(
            main,
            "assistant",
            {
                "id": mid,
                "role": "assistant",
                "model": "claude",
                "usage": usage,
                "content": [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}],
            },
        )
        result = "\n".join(f"{n}\tdef f{n}(): return {n}" for n in range(rng.randint(5, 120)))
        add(
            main,
            "user",
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": result}]},
        )
        if name == "Agent":
            agent_tool = tid
    sub: list[dict] = [
        {
            "type": "agent_metadata",
            "agentType": "coder",
            "description": "run the tests",
            "toolUseId": agent_tool,
            "finished": True,
        }
    ]
    add(sub, "user", {"role": "user", "content": "run pytest"}, isSidechain=True)
    add(
        sub,
        "assistant",
        {
            "id": "msg_sub",
            "role": "assistant",
            "model": "claude",
            "usage": {"input_tokens": 900},
            "content": [{"type": "text", "text": "30 passed"}],
        },
        isSidechain=True,
    )
    return main, sub


def write_sessions(root: Path, job: JobSpec, outcome: JobOutcome, rng: random.Random, turns: int) -> None:
    runs = root / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    store = SQLiteSessionStore(runs / "sessions.db")
    rows = []
    try:
        for step in outcome.steps:
            sid = str(uuid.uuid4())
            main, sub = transcript(turns, rng)
            store._append_sync({"project_key": "-workspace", "session_id": sid}, main)  # type: ignore[arg-type,typeddict-item]  # noqa: SLF001
            store._append_sync(
                {
                    "project_key": "-workspace",
                    "session_id": sid,  # noqa: SLF001
                    "subpath": "subagents/agent-a1",
                },
                sub,
            )  # type: ignore[arg-type,typeddict-item]
            rows.append(
                {
                    "step": step.name,
                    "session_id": sid,
                    "ok": step.ok,
                    "cost_usd": step.cost_usd,
                    "num_turns": step.num_turns,
                    "duration_s": step.duration_s,
                    "retired": [],
                    "started_at": "2023-11-14T22:13:20+00:00",
                    "ended_at": "2023-11-14T22:20:00+00:00",
                    "run": "20231114-221320-abcdef",
                    "text": "done",
                    "errors": [],
                    "tool_calls": [],
                }
            )
    finally:
        store.close()
    (runs / "manifest.json").write_text(json.dumps(rows, ensure_ascii=False, indent=2))


def make_batch(home: Path, n_jobs: int, quick: bool, rng: random.Random) -> float:
    t0 = time.monotonic()
    sources = make_sources(home.parent / "sources", 50, 2 if quick else 6)
    sample = set(rng.sample(range(n_jobs), 10 if quick else 50))
    for i in range(n_jobs):
        task, variant, repeat = i % 50, VARIANTS[(i // 50) % 5], i // 250 + 1
        job = job_spec(f"task-{task:02d}.{variant}.r{repeat}", task, variant, repeat, sources[task])
        root = home / BATCH / job.id
        outcome = outcome_for(job.id, variant, rng)
        record = new_record(job, batch=BATCH, image_id=IMAGE, status="running")
        record = replace(
            record.with_outcome(outcome, finished_at="2023-11-14T22:20:00+00:00", exit_code=0),
            started_at="2023-11-14T22:13:20+00:00",
        )
        (root / "logs").mkdir(parents=True)
        write_record(root / "record.json", record)
        (root / "logs" / "container.log").write_text(
            "".join(f"22:13:{s:02d} step {s % 6} ok\n" for s in range(300))
        )
        shutil.copytree(sources[task], root / "workspace")
        edited = root / "workspace" / "src" / "mod_0.py"
        edited.write_text(edited.read_text().replace("return 3\n", "return 3  # fixed\n"))
        (root / "workspace" / "NOTES.md").write_text("what I changed\n")
        if i in sample:
            write_sessions(root, job, outcome, rng, turns=20 if quick else 60)
    return time.monotonic() - t0


def fetch(port: int, path: str) -> tuple[float, int, bytes]:
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return time.monotonic() - t0, resp.status, body


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} s [{max(values):.2f}]" if len(values) > 1 else f"{values[0]:.2f} s"


def line(label: str, value: str, target: str, ok: bool | None) -> bool:
    verdict = "" if ok is None else ("PASS" if ok else "FAIL")
    print(f"  {label:<46} {value:>16}   {target:<8} {verdict}", flush=True)
    return ok is not False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="fewer sampled sessions, smaller workspaces")
    parser.add_argument("--repeat", type=int, default=3, help="timings are the best of this many runs")
    parser.add_argument("--keep", type=Path, help="build the batch here and keep it (default: a temp dir)")
    parser.add_argument(
        "--reuse", action="store_true", help="with --keep: measure the batch already built there"
    )
    args = parser.parse_args(argv)
    rng = random.Random(14)
    tmp = Path(tempfile.mkdtemp(prefix="fb-bench-viewer-")) if args.keep is None else args.keep
    home = tmp / "home"
    ok = True
    browser = None
    try:
        if args.reuse and (home / BATCH).is_dir():
            print(f"reusing the batch under {home}", flush=True)
        else:
            built = make_batch(home, args.jobs, args.quick, rng)
            print(f"{args.jobs} jobs built in {built:.1f} s under {home}", flush=True)
        sampled = next(p.parent.parent.name for p in sorted((home / BATCH).glob("*/runs/sessions.db")))

        print(f"view (flower-batch view's server, in this process; best of {args.repeat}, worst in brackets)")
        server = ViewServer(Home(home), 0)
        server.start_in_thread()
        colds = []
        for _ in range(args.repeat):
            server.index = type(server.index)(home)  # cold: every record read and parsed again
            took, status, body = fetch(server.port, f"/api/jobs?batch={BATCH}&limit=200")
            assert status == 200 and json.loads(body)["total"] == args.jobs, body[:200]
            colds.append(took)
        ok &= line("job list endpoint, cold (all records parsed)", spread(colds), "< 2 s", min(colds) < 2)
        warm = [fetch(server.port, f"/api/jobs?batch={BATCH}&limit=200")[0] for _ in range(args.repeat)]
        ok &= line("job list endpoint, warm (a 2-s poll)", spread(warm), "< 2 s", min(warm) < 2)
        filt = [
            fetch(server.port, f"/api/jobs?batch={BATCH}&status=failed&q=haiku&limit=200")[0]
            for _ in range(args.repeat)
        ]
        ok &= line("job list endpoint, filtered", spread(filt), "< 2 s", min(filt) < 2)
        line("batch list endpoint", spread([fetch(server.port, "/api/batches")[0]]), "", None)
        detail, status, body = fetch(server.port, f"/api/job?batch={BATCH}&job={sampled}")
        msgs = sum(
            len(s["messages"]) for st in json.loads(body)["trajectory"]["steps"] for s in st["sessions"]
        )
        line(f"one job's trajectory ({msgs} messages)", f"{detail:.3f} s", "", None)
        wsdiff = fetch(server.port, f"/api/diff?batch={BATCH}&job={sampled}")[0]
        line("one job's workspace diff", f"{wsdiff:.3f} s", "", None)

        browser = Browser()
        pages = []
        for _ in range(args.repeat):
            server.index = type(server.index)(home)  # the page's first list is a cold one too
            browser.goto("about:blank")
            t0 = time.monotonic()
            browser.goto(f"{server.url}#batch={BATCH}")
            browser.wait_for("document.querySelectorAll('tr.job').length === 200", timeout=60)
            pages.append(time.monotonic() - t0)
        ok &= line("page shows the job list in Chromium (cold)", spread(pages), "< 2 s", min(pages) < 2)
        server.shutdown()
        server.server_close()

        print("report.html")
        t0 = time.monotonic()
        records = {k: v for k, v in load_records(home / BATCH).items() if not isinstance(v, Exception)}
        tails = {j: (home / BATCH / j / "logs" / "container.log").read_text()[-4000:] for j in records}
        results = results_from_records(
            records,
            batch=BATCH,
            image_id=IMAGE,
            log_tails=tails,  # type: ignore[arg-type]
            batch_dir=home / BATCH,
        )
        paths = write_reports(results, tmp / "report")
        made = time.monotonic() - t0
        line("records -> results.json, junit.xml, report.html", f"{made:.1f} s", "", None)
        size = paths.html.stat().st_size / 1e6
        ok &= line("report.html size", f"{size:.1f} MB", "< 20 MB", size < 20)
        opens = []
        for _ in range(args.repeat):
            browser.goto("about:blank")
            t0 = time.monotonic()
            browser.goto(paths.html.as_uri())
            browser.wait_for(
                "document.getElementById('filter-info').textContent.indexOf('jobs') >= 0", timeout=120
            )
            opens.append(time.monotonic() - t0)
        ok &= line(
            "report.html opens in Chromium (loaded, script run)", spread(opens), "< 5 s", min(opens) < 5
        )
        plots = browser.evaluate("document.querySelectorAll('svg.plot g.variant').length")
        line("plot points/bars rendered", str(plots), "", None)
    finally:
        if browser is not None:
            browser.close()
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    print("all targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
