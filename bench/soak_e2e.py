"""Issue 10, 5b and 5c: a long job end to end, the real `flower-batch` command and the real CLI
in a container, against the scripted gateway (bench/soakjob.py).

5b  a `--persistent` job (`flower-batch run`) that loops a Bash tool call for `--leg-turns`
    model turns, hands off to a fresh session on the way (a small `--window`, given to the job
    as `--env FLOWER_WINDOW=…`; the context fills at count `--handoff-at`), and is woken twice
    (`flower-batch wake`): by default 3 legs of 100 turns, so 300+ model turns.
5c  `--kills` times (default 5): a job of `--kill-turns` turns whose gateway container is
    `docker kill`ed when half its turns are served. The job must finish (the supervisor starts
    the gateway again, flower resumes the same session), and its metered cost must equal the
    usage the scripted model sent, computed from the scenario and the gateway's request log.

Prints the figures measured in this one run; exit 0 when 5b passed and every 5c try recovered
with its cost exact and nothing counted twice. Sizes are flags: the gateway's memory grows with
the conversation until its bounded log lands (issue 10, items 1-2), so the defaults stay where
the current gateway holds (its 512 MB limit).

    .venv/bin/python bench/soak_e2e.py [--quick] [--leg-turns N] [--kills N] [--image REF]
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

FLOWER_BATCH = REPO / ".venv" / "bin" / "flower-batch"
GATEWAY_ROLE = {"org.flower-batch.role": "gateway", "org.flower-batch.batch": "adhoc"}
SESSION_LABEL = "org.flower-batch.session"


def fb(home: Path, *args: str | Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FLOWER_BATCH), *map(str, args), "--home", str(home)], capture_output=True,
                          text=True, timeout=timeout)


def fb_start(home: Path, log: Path, *args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen([str(FLOWER_BATCH), *map(str, args), "--home", str(home)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)


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
        return soakjob.read_jsonl(self.root / "logs" / "gateway.jsonl")

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
        return (f"cost metered ${float(m.get('cost_usd') or 0):.6f} vs expected ${e.cost_usd:.6f}{cut} · "
                f"exchanges metered {m.get('exchanges')} ({m.get('incomplete')} cut) vs answers sent "
                f"{e.complete}{cut} · exact: {'yes' if self.exact else 'NO'}")


def check(job: JobFiles, scenario: Path) -> Check:
    return Check(expected=soakjob.expected_usage(scenario, job.log()), meter=job.meter())


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
    labels = [f"{k}={v}" for k, v in {**GATEWAY_ROLE, SESSION_LABEL: session}.items()]
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

    @property
    def ok(self) -> bool:
        return bool(self.legs) and all(leg.status == "passed" for leg in self.legs) and bool(
            self.check and self.check.exact) and self.handoffs >= 1


def soak(home: Path, image: str, root: Path, *, legs: int, leg_turns: int, handoff_at: int,
         window: int) -> SoakResult:
    files = soakjob.write_project(root, leg=leg_turns, handoff_at=handoff_at, window=window)
    job = JobFiles(home, "soak")
    result = SoakResult()
    # The window reaches flower in the container through the job's env (kept for its wakes).
    commands = [["run", files["workspace"], "-f", f"{files['flows']}:main", "--prompt", soakjob.PROMPT,
                 "--scenario", files["scenario"], "--persistent", "--name", job.job, "--image", image,
                 "--timeout", "4h", "--env", f"FLOWER_WINDOW={window}"]]
    commands += [["wake", job.job, soakjob.WAKE_WORDS, "--timeout", "4h"] for _ in range(legs - 1)]
    with MemorySampler(job) as memory:
        for cmd in commands:
            t0 = time.monotonic()
            proc = fb(home, *cmd, timeout=4 * 3600)
            leg = Leg(str(cmd[0]), proc.returncode, time.monotonic() - t0, job.record().get("status", "?"))
            result.legs.append(leg)
            print(f"  5b {leg.command}: {leg.status} (exit {leg.exit_code}) in {leg.seconds:.1f} s", flush=True)
            if proc.returncode != 0:
                print("     " + (proc.stderr.strip().splitlines() or ["(no output)"])[-1], flush=True)
                break
    log = job.log()
    served = [r for r in log if r.get("endpoint") == "messages" and r.get("status") == 200]
    result.turns = len(served)
    result.handoffs = sum(1 for r in served if r.get("rule") == "handoff: document")
    result.sessions = len({r.get("session") for r in served})
    result.peak_memory = memory.peak
    result.check = check(job, files["scenario"])
    return result


# -- 5c ------------------------------------------------------------------------------------------
@dataclass
class KillTry:
    status: str
    seconds: float
    killed_at: int
    restarts: int
    same_session: bool
    check: Check

    @property
    def recovered(self) -> bool:
        return self.status == "passed" and self.restarts >= 1 and self.same_session


def kill_once(home: Path, image: str, root: Path, index: int, turns: int) -> KillTry:
    import docker

    files = soakjob.write_project(root, leg=turns, handoff_at=None)
    job = JobFiles(home, f"kill-{index}")
    t0 = time.monotonic()
    proc = fb_start(home, root / "run.out", "run", files["workspace"], "-f", f"{files['flows']}:main",
                    "--prompt", soakjob.PROMPT, "--scenario", files["scenario"], "--persistent", "--name", job.job,
                    "--image", image, "--timeout", "1h")
    killed_at = 0
    client = docker.from_env()
    try:
        while proc.poll() is None:
            served = sum(1 for r in job.log() if r.get("endpoint") == "messages" and r.get("status") == 200)
            if served >= turns // 2:
                for c in gateways(client, job):
                    c.kill()
                    killed_at = served
                break
            time.sleep(0.2)
        proc.wait(timeout=3600)
    finally:
        client.close()
    rec = job.record()
    sessions = {r.get("session") for r in job.log() if r.get("endpoint") == "messages"}
    health = rec.get("gateway_health") or {}
    # its complete answers from the workspace's count, not the log: the killed gateway may not
    # have logged the answer it had just sent (soakjob.expected_of_one_leg)
    expected = soakjob.expected_of_one_leg(files["scenario"], job.log(), turns)
    return KillTry(status=str(rec.get("status")), seconds=time.monotonic() - t0, killed_at=killed_at,
                   restarts=int(health.get("restarts") or 0), same_session=len(sessions) == 1,
                   check=Check(expected=expected, meter=job.meter(), deaths=len(health.get("deaths") or [])))


def build_image(tag: str) -> str:
    from flower_batch.running.image import build_image as build

    return build(tag=tag, log=lambda line: None).id


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 legs of 20 turns, 2 kill tries of 20 turns")
    parser.add_argument("--legs", type=int, default=3, help="the run plus this many minus one wakes (default 3)")
    parser.add_argument("--leg-turns", type=int, help="model turns per leg (default 100; --quick 20)")
    parser.add_argument("--handoff-at", type=int, help="the count whose answer fills the context (default 1.5 legs)")
    parser.add_argument("--window", type=int, default=60_000,
                        help="the 5b job's context window (FLOWER_WINDOW), small so a handoff comes (default 60000)")
    parser.add_argument("--kills", type=int, help="5c tries (default 5; --quick 2; 0 skips 5c)")
    parser.add_argument("--kill-turns", type=int, help="model turns of each 5c job (default 60; --quick 20)")
    parser.add_argument("--image", help="runtime image (default: built from these sources as flower-batch-runtime:soak)")
    parser.add_argument("--home", type=Path, help="where the jobs go (default: a temporary folder, removed after)")
    parser.add_argument("--skip-soak", action="store_true", help="only 5c")
    args = parser.parse_args(argv)
    quick = {"leg_turns": 20, "kills": 2, "kill_turns": 20}
    full = {"leg_turns": 100, "kills": 5, "kill_turns": 60}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:  # an explicit flag wins over --quick
            setattr(args, key, value)
    if min(args.legs, args.leg_turns, args.kill_turns) < 2 or args.kills < 0:
        parser.error("--legs, --leg-turns and --kill-turns need at least 2; --kills at least 0")
    handoff_at = args.handoff_at or args.leg_turns + args.leg_turns // 2 + 1
    if handoff_at % args.leg_turns == 0 or handoff_at > args.legs * args.leg_turns:
        parser.error(f"--handoff-at {handoff_at}: pick a count inside the job that does not end a leg")
    image = args.image or build_image("flower-batch-runtime:soak")
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        home = args.home or Path(scratch) / "home"
        ok = True
        if not args.skip_soak:
            print(f"5b: {args.legs} legs × {args.leg_turns} turns, window {args.window} (handoff at count "
                  f"{handoff_at}), image {image[:19]}", flush=True)
            t0 = time.monotonic()
            r = soak(home, image, Path(scratch) / "soak", legs=args.legs, leg_turns=args.leg_turns,
                     handoff_at=handoff_at, window=args.window)
            wall = time.monotonic() - t0
            assert r.check is not None
            print(f"5b  model turns {r.turns} · handoffs {r.handoffs} · sessions {r.sessions} · wall {wall:.1f} s ("
                  + ", ".join(f"{leg.command} {leg.seconds:.1f}" for leg in r.legs) + ")"
                  + f" · gateway memory peak {r.peak_memory / 2**20:.0f} MiB")
            print(f"5b  {r.check.line()} · {'OK' if r.ok else 'NOT MET'}", flush=True)
            ok = ok and r.ok
        tries: list[KillTry] = []
        for i in range(args.kills):
            t = kill_once(home, image, Path(scratch) / f"kill-{i}", i, args.kill_turns)
            tries.append(t)
            print(f"5c  try {i + 1}: killed the gateway at {t.killed_at} served answers · {t.status} in {t.seconds:.1f} s"
                  f" · restarts {t.restarts} · same session: {'yes' if t.same_session else 'no'} · {t.check.line()}",
                  flush=True)
        if tries:
            recovered = sum(t.recovered and t.check.exact for t in tries)
            twice = sum(t.check.counted_twice for t in tries)
            print(f"5c  recovered {recovered}/{len(tries)} (finished, same session, cost exact) · "
                  f"requests counted twice: {twice or 'none'}")
            ok = ok and recovered == len(tries) and twice == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
