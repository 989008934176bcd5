"""Issue 10, 5b and 5c: a long job end to end, the real `flower-batch` command and the real CLI
in a container, against the scripted gateway (bench/soakjob.py).

5b  a `--persistent` job (`flower-batch run`) that loops a Bash tool call for `--leg-turns`
    model turns, hands off to a fresh session on the way (a small `--window`, given to the job
    as `--env FLOWER_WINDOW=…`; the context fills at count `--handoff-at`), and is woken twice
    (`flower-batch wake`): by default 3 legs of 100 turns, so 300+ model turns.
5c  `--kills` times (default 5) during that job, spread over its legs: `docker kill` of its
    gateway container. Each kill must be recovered from (the supervisor starts the gateway
    again and the same session goes on: served again, within seconds), the job must finish,
    and its metered cost must equal the usage the scripted model sent, computed from the
    scenario and the gateway's request log (soakjob.expected_usage: a request whose log line
    the kill lost is found in the next one of its session), nothing counted twice.

pause  (issue 20) a `--persistent` job of `--pause-turns` turns with `--budget-usd
    --pause-budget`: it must end `paused` at the request that crossed the cap (exit 4); then
    `wake --budget-usd +N` with the gateway `docker kill`ed once during the wake: it must
    continue the same session and pass, and the cost metered over the pause and the wake must
    equal what the scripted model sent, nothing counted twice (`--pause-turns 0`: skipped).

Prints the figures measured in this one run; exit 0 when 5b passed, every 5c try recovered
with its cost exact and nothing counted twice, and the pause leg met all of the above. Sizes
are flags.

    .venv/bin/python bench/soak_e2e.py [--quick] [--leg-turns N] [--kills N] [--pause-turns N] [--image REF]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import soakjob  # noqa: E402

from flower_batch.labels import BATCH, LEASE, ROLE  # noqa: E402

FLOWER_BATCH = REPO / ".venv" / "bin" / "flower-batch"
GATEWAY_ROLE = {ROLE: "gateway", BATCH: "adhoc"}


def fb(home: Path, *args: str | Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FLOWER_BATCH), *map(str, args), "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def fb_start(home: Path, log: Path, *args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(FLOWER_BATCH), *map(str, args), "--home", str(home)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


@dataclass
class JobFiles:
    home: Path
    job: str

    @property
    def root(self) -> Path:
        return self.home / "adhoc" / self.job

    def record(self) -> dict:
        try:
            return json.loads((self.root / "record.json").read_text())
        except (OSError, ValueError):
            return {}

    def log(self) -> list[dict]:
        """The request log, every request rebuilt whole (what finding a lost line needs)."""
        from flower.scripted import read_request_log

        path = self.root / "logs" / "gateway.jsonl"
        return list(read_request_log(path)) if path.exists() else []

    def served(self) -> int:
        """Answers metered so far (meter.json: small, rewritten after each answer)."""
        return int(self.meter().get("exchanges") or 0)

    def metered_after(self, t: float) -> float | None:
        """When the first usage after `t` was metered (a killed gateway writes none: this is the
        next life's first answer), or None yet."""
        stamps = [
            float(line["t"])
            for line in soakjob.read_jsonl(self.root / "logs" / "meter.jsonl")
            if line.get("kind") == "usage" and float(line.get("t") or 0) > t
        ]
        return min(stamps, default=None)

    def meter(self) -> dict:
        try:
            return json.loads((self.root / "logs" / "meter.json").read_text())
        except (OSError, ValueError):
            return {}


@dataclass
class Check:
    """The job's meter against what the scripted model sent (soakjob's accounts). `deaths`: the
    gateway's, each of which may have cut an answer the log never saw (counted at its start)."""

    expected: soakjob.Expected
    meter: dict
    deaths: int = 0

    @property
    def exact(self) -> bool:
        return self.expected.accepts(self.meter, unlogged_starts=self.deaths)

    @property
    def counted_twice(self) -> int:
        """Exchanges metered beyond the answers the model began to send (0: none twice)."""
        began = self.expected.complete + self.expected.cut + self.deaths
        return max(0, int(self.meter.get("exchanges") or 0) - began)

    def line(self) -> str:
        e, m = self.expected, self.meter
        cut = f" + {e.cut} cut by the kill" if e.cut else ""
        return (
            f"cost metered ${float(m.get('cost_usd') or 0):.6f} vs expected ${e.cost_usd:.6f}{cut} · "
            f"exchanges metered {m.get('exchanges')} ({m.get('incomplete')} cut) vs answers sent "
            f"{e.complete}{cut} · exact: {'yes' if self.exact else 'NO'}"
        )


def check(job: JobFiles, scenario: Path, deaths: int = 0) -> Check:
    return Check(expected=soakjob.expected_usage(scenario, job.log()), meter=job.meter(), deaths=deaths)


class MemorySampler:
    """The largest memory use of the job's gateway containers, sampled every 2 s."""

    def __init__(self, job: JobFiles) -> None:
        self.job = job
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        import docker

        client = docker.from_env()
        try:
            while not self._stop.wait(2.0):
                for c in gateways(client, self.job):
                    try:
                        usage = c.stats(stream=False).get("memory_stats", {}).get("usage") or 0
                    except Exception:  # the container went away between list and stats
                        continue
                    self.peak = max(self.peak, int(usage))
        finally:
            client.close()


def gateways(client, job: JobFiles) -> list:  # type: ignore[no-untyped-def]
    session = job.record().get("session")
    if not session:
        return []
    labels = [f"{k}={v}" for k, v in {**GATEWAY_ROLE, LEASE: session}.items()]
    return client.containers.list(ignore_removed=True, filters={"label": labels})


# -- 5b ------------------------------------------------------------------------------------------
@dataclass
class Leg:
    command: str
    exit_code: int
    seconds: float
    status: str


@dataclass
class SoakResult:
    legs: list[Leg] = field(default_factory=list)
    turns: int = 0
    handoffs: int = 0
    sessions: int = 0
    peak_memory: int = 0
    check: Check | None = None
    kills: list[Kill] = field(default_factory=list)
    wanted_turns: int = 0

    @property
    def ok(self) -> bool:
        return (
            bool(self.legs)
            and all(leg.status == "passed" for leg in self.legs)
            and bool(self.check and self.check.exact)
            and self.handoffs >= 1
            and self.turns >= self.wanted_turns
            and all(k.recovered for k in self.kills)
        )


def soak(
    home: Path,
    image: str,
    root: Path,
    *,
    legs: int,
    leg_turns: int,
    handoff_at: int,
    window: int,
    kills: int = 0,
) -> SoakResult:
    files = soakjob.write_project(root, leg=leg_turns, handoff_at=handoff_at, window=window)
    job = JobFiles(home, "soak")
    result = SoakResult(wanted_turns=legs * leg_turns)
    total = legs * leg_turns  # about: one answer per count, plus a few per leg and the handoff
    # The window reaches flower in the container through the job's env (kept for its wakes).
    commands = [
        [
            "run",
            files["workspace"],
            "-f",
            f"{files['flows']}:main",
            "--prompt",
            soakjob.PROMPT,
            "--scenario",
            files["scenario"],
            "--persistent",
            "--name",
            job.job,
            "--image",
            image,
            "--timeout",
            "4h",
            "--env",
            f"FLOWER_WINDOW={window}",
        ]
    ]
    commands += [["wake", job.job, soakjob.WAKE_WORDS, "--timeout", "4h"] for _ in range(legs - 1)]
    with (
        MemorySampler(job) as memory,
        Killer(job, [int((i + 0.5) * total / kills) for i in range(kills)]) as killer,
    ):
        for cmd in commands:
            t0 = time.monotonic()
            proc = fb(home, *cmd, timeout=4 * 3600)
            leg = Leg(str(cmd[0]), proc.returncode, time.monotonic() - t0, job.record().get("status", "?"))
            result.legs.append(leg)
            print(
                f"  5b {leg.command}: {leg.status} (exit {leg.exit_code}) in {leg.seconds:.1f} s", flush=True
            )
            if proc.returncode != 0:
                print("     " + (proc.stderr.strip().splitlines() or ["(no output)"])[-1], flush=True)
                break
    log = job.log()
    served = [r for r in log if r.get("endpoint") == "messages" and r.get("status") == 200]
    result.turns = len(served)
    result.handoffs = sum(1 for r in served if r.get("rule") == "handoff: document")
    result.sessions = len({r.get("session") for r in served})
    result.peak_memory = memory.peak
    result.kills = killer.kills
    for kill in result.kills:
        kill.judge(log)
    result.check = check(job, files["scenario"], deaths=len(result.kills))
    return result


# -- pause: a budget pauses the job, a wake with a raised cap continues it ----------------------------
@dataclass
class PauseResult:
    paused_exit: int = -1
    paused_status: str = "?"
    paused_reason: str = ""
    crossed_at_cap: bool = False  # the answers before the refused request were under the cap, with it over
    woken_exit: int = -1
    woken_status: str = "?"
    same_session: bool = False
    history: list[str] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    check: Check | None = None

    @property
    def ok(self) -> bool:
        return (
            self.paused_exit == 4
            and self.paused_status == "paused"
            and self.crossed_at_cap
            and self.woken_exit == 0
            and self.woken_status == "passed"
            and self.same_session
            and self.history == ["paused", "passed"]
            and all(k.recovered for k in self.kills)
            and bool(self.check and self.check.exact and self.check.counted_twice == 0)
        )

    def line(self) -> str:
        return (
            f"pause  run: {self.paused_status} (exit {self.paused_exit}, crossed at the cap: "
            f"{'yes' if self.crossed_at_cap else 'NO'}) · wake: {self.woken_status} (exit {self.woken_exit}, "
            f"same session: {'yes' if self.same_session else 'NO'}, gateway kills {len(self.kills)}, recovered "
            f"{sum(k.recovered for k in self.kills)}) · history {self.history}"
        )


def pause_leg(home: Path, image: str, root: Path, *, turns: int, budget: float) -> PauseResult:
    """The issue 20 leg: see the module docstring."""
    from flower_batch.gateway.prices import cost_usd

    files = soakjob.write_project(root, leg=turns, handoff_at=None)
    job = JobFiles(home, "pause")
    result = PauseResult()
    proc = fb(
        home, "run", files["workspace"], "-f", f"{files['flows']}:main", "--prompt", soakjob.PROMPT,
        "--scenario", files["scenario"], "--persistent", "--name", job.job, "--image", image,
        "--timeout", "1h", "--budget-usd", str(budget), timeout=3600,
    )  # fmt: skip
    record = job.record()
    result.paused_exit, result.paused_status = proc.returncode, record.get("status", "?")
    result.paused_reason = str(record.get("reason") or "")
    before = [r for r in job.log() if r.get("endpoint") == "messages"]
    usages = soakjob.rule_usages(files["scenario"])
    costs = [
        cost_usd(str(r["model"]), usages[str(r["rule"])]) or 0.0 for r in before if r.get("status") == 200
    ]
    result.crossed_at_cap = (
        bool(before) and before[-1].get("status") == 402 and sum(costs[:-1]) < budget <= sum(costs)
    )
    print(f"  pause run: {result.paused_status} (exit {proc.returncode}): {result.paused_reason}", flush=True)
    # the wake: enough for the rest of the leg, and one kill of its gateway a few answers in
    more = f"+{max(1.0, 0.02 * turns):.2f}"
    with Killer(job, [job.served() + 3]) as killer:
        proc = fb(home, "wake", job.job, "--budget-usd", more, "--timeout", "1h", timeout=3600)
    record = job.record()
    result.woken_exit, result.woken_status = proc.returncode, record.get("status", "?")
    if proc.returncode != 0:
        print("     " + (proc.stderr.strip().splitlines() or ["(no output)"])[-1], flush=True)
    log = job.log()
    after = [r for r in log if r.get("endpoint") == "messages"][len(before) :]
    result.same_session = bool(before and after) and after[0].get("session") == before[-1].get("session")
    result.history = [str(e.get("status")) for e in record.get("budget_history") or []]
    result.kills = killer.kills
    for kill in result.kills:
        kill.judge(log)
    result.check = check(job, files["scenario"], deaths=len(result.kills))
    return result


# -- 5c ------------------------------------------------------------------------------------------
@dataclass
class Kill:
    """One `docker kill` of the job's gateway: when, at how many metered answers, and after it."""

    at_answers: int
    at_time: float
    served_again_after: float | None = None  # seconds until the gateway's next life metered an answer
    same_session: bool = False  # the first request after it went on in the session of the last before

    @property
    def recovered(self) -> bool:
        return self.served_again_after is not None and self.same_session

    def judge(self, log: list[dict]) -> None:
        """Same session: from the request log, the last request before the kill and the first after."""
        messages = [
            r for r in log if r.get("endpoint") == "messages" and isinstance(r.get("time"), int | float)
        ]
        before = [r for r in messages if r["time"] < self.at_time]
        after = [r for r in messages if r["time"] >= self.at_time]
        self.same_session = bool(before and after) and after[0].get("session") == before[-1].get("session")


class Killer:
    """Kills the job's gateway container once its meter reaches each of `points` answers, and
    times how long until an answer is metered again (the supervisor's restart, the CLI's retry)."""

    def __init__(self, job: JobFiles, points: list[int]) -> None:
        self.job = job
        self.points = sorted(points)
        self.kills: list[Kill] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Killer:
        if self.points:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        import docker

        client = docker.from_env()
        try:
            for point in self.points:
                while self.job.served() < point:
                    if self._stop.wait(0.2):
                        return
                found = gateways(client, self.job)
                if not found:
                    continue  # between legs: no gateway to kill at this point
                served = self.job.served()
                for c in found:
                    c.kill()
                kill = Kill(at_answers=served, at_time=time.time())
                self.kills.append(kill)
                print(f"  5c kill {len(self.kills)}: the gateway at {served} metered answers", flush=True)
                while (again := self.job.metered_after(kill.at_time)) is None:
                    if self._stop.wait(0.1):
                        return
                kill.served_again_after = again - kill.at_time
        finally:
            client.close()


def build_image(tag: str) -> str:
    from flower_batch.running.image import build_image as build

    return build(tag=tag, log=lambda line: None).id


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 legs of 20 turns, 2 kills")
    parser.add_argument(
        "--legs", type=int, default=3, help="the run plus this many minus one wakes (default 3)"
    )
    parser.add_argument("--leg-turns", type=int, help="model turns per leg (default 100; --quick 20)")
    parser.add_argument(
        "--handoff-at", type=int, help="the count whose answer fills the context (default 1.5 legs)"
    )
    parser.add_argument(
        "--window",
        type=int,
        default=60_000,
        help="the 5b job's context window (FLOWER_WINDOW), small so a handoff comes (default 60000)",
    )
    parser.add_argument(
        "--kills", type=int, help="5c: gateway kills during the job (default 5; --quick 2; 0: none)"
    )
    parser.add_argument(
        "--pause-turns",
        type=int,
        help="the pause leg's job: turns of its one leg (default 40; --quick 20; 0: skip)",
    )
    parser.add_argument("--only-pause", action="store_true", help="run the pause leg alone (no 5b/5c)")
    parser.add_argument(
        "--pause-budget",
        type=float,
        default=0.05,
        help="the pause leg's first cap in US dollars (default 0.05)",
    )
    parser.add_argument(
        "--image", help="runtime image (default: built from these sources as flower-batch-runtime:soak)"
    )
    parser.add_argument(
        "--home", type=Path, help="where the jobs go (default: a temporary folder, removed after)"
    )
    args = parser.parse_args(argv)
    quick = {"leg_turns": 20, "kills": 2, "pause_turns": 20}
    full = {"leg_turns": 100, "kills": 5, "pause_turns": 40}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:  # an explicit flag wins over --quick
            setattr(args, key, value)
    if min(args.legs, args.leg_turns) < 2 or args.kills < 0:
        parser.error("--legs and --leg-turns need at least 2; --kills at least 0")
    handoff_at = args.handoff_at or args.leg_turns + args.leg_turns // 2 + 1
    if handoff_at % args.leg_turns == 0 or handoff_at > args.legs * args.leg_turns:
        parser.error(f"--handoff-at {handoff_at}: pick a count inside the job that does not end a leg")
    image = args.image or build_image("flower-batch-runtime:soak")
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        home = args.home or Path(scratch) / "home"
        ok = True
        if not args.only_pause:
            print(
                f"5b: {args.legs} legs × {args.leg_turns} turns, window {args.window} (handoff at count "
                f"{handoff_at}), image {image[:19]}; 5c: {args.kills} gateway kills during it",
                flush=True,
            )
            t0 = time.monotonic()
            r = soak(
                home,
                image,
                Path(scratch) / "soak",
                legs=args.legs,
                leg_turns=args.leg_turns,
                handoff_at=handoff_at,
                window=args.window,
                kills=args.kills,
            )
            wall = time.monotonic() - t0
            assert r.check is not None
            print(
                f"5b  model turns {r.turns} (wanted ≥ {r.wanted_turns}) · handoffs {r.handoffs} · sessions "
                f"{r.sessions} · wall {wall:.1f} s ("
                + ", ".join(f"{leg.command} {leg.seconds:.1f}" for leg in r.legs)
                + ")"
                + f" · gateway memory peak {r.peak_memory / 2**20:.0f} MiB"
            )
            for i, k in enumerate(r.kills, 1):
                again = (
                    f"served again after {k.served_again_after:.1f} s"
                    if k.served_again_after is not None
                    else "never served again"
                )
                print(
                    f"5c  kill {i} at {k.at_answers} answers: {again} · same session: {'yes' if k.same_session else 'no'}"
                )
            recovered = sum(k.recovered for k in r.kills)
            print(
                f"5c  recovered {recovered}/{len(r.kills)} of {args.kills} kills · requests counted twice: "
                f"{r.check.counted_twice or 'none'}"
            )
            print(
                f"5b/5c  {r.check.line()} · {'OK' if r.ok and len(r.kills) == args.kills else 'NOT MET'}",
                flush=True,
            )
            ok = r.ok and len(r.kills) == args.kills and r.check.counted_twice == 0
        if args.pause_turns:
            p = pause_leg(
                home, image, Path(scratch) / "pause", turns=args.pause_turns, budget=args.pause_budget
            )
            assert p.check is not None
            print(p.line())
            print(f"pause  {p.check.line()} · {'OK' if p.ok else 'NOT MET'}", flush=True)
            ok = ok and p.ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
