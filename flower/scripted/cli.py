"""`flower-model` / `python -m flower.scripted`: serve a scenario, or check one.

python -m flower.scripted serve SCENARIO.toml [--host H] [--port P] [--log FILE]
python -m flower.scripted check SCENARIO.toml
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .errors import ScenarioError
from .scenario import Scenario
from .server import ScriptedServer

PROG = "flower-model"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The scripted (offline) Anthropic Messages API model."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a scenario until SIGTERM or Ctrl-C; prints the base URL")
    serve.add_argument("scenario", help="scenario file (.toml or .json), see docs/scenario-format.md")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    serve.add_argument(
        "--log",
        default=None,
        help="append every request to this file: JSON lines, of each body only its new messages "
        "(read it back whole with flower.scripted.read_request_log)",
    )
    check = sub.add_parser("check", help="validate a scenario file and exit")
    check.add_argument("scenario")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        scenario = Scenario.load(args.scenario)
    except ScenarioError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    if args.command == "check":
        print(f"{args.scenario}: ok, {len(scenario.rules)} rules")
        return 0
    return _serve(scenario, args.host, args.port, args.log)


def _serve(scenario: Scenario, host: str, port: int, log_path: str | None) -> int:
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        server = ScriptedServer(scenario, host=host, port=port, log_path=log_path).start()
    except OSError as err:
        print(
            f"{PROG}: cannot listen on {host}:{port} ({err.strerror or err}); pick another --port",
            file=sys.stderr,
        )
        return 1
    print(server.base_url, flush=True)
    try:
        while not done.wait(0.5):  # a timed wait keeps the main thread responsive to signals
            pass
    finally:
        server.stop()
    return 0
