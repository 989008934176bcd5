"""`python -m flower_batch.gateway.server serve ...`: the gateway process inside the sidecar container."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from flower.scripted import MessagesServer, ScenarioError
from flower_batch.errors import GatewayConfigError
from flower_batch.gateway.job_sockets import JobSockets
from flower_batch.gateway.server.responders import build_gateway, describe
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import SECRET_ENV, secrets_from_files
from flower_batch.gateway.upstream_auth import GATEWAY_KEY_ENV, GATEWAY_TOKEN_ENV
from flower_batch.jobmodel.modes import MODES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flower-batch-gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("--mode", choices=MODES, default="scripted")
    serve.add_argument("--scenario", help="scripted mode: the scenario file")
    serve.add_argument("--upstream", help="anthropic mode: the upstream base URL (key in FB_UPSTREAM_KEY)")
    serve.add_argument("--batch-budget-usd", type=float, help="refuse every job once the batch spent this")
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--batch-dir", required=True, help="per-job logs go to <batch-dir>/<job>/logs/")
    serve.add_argument(
        "--sockets",
        help="serve each job on a unix socket of its own under this folder "
        "(job_sockets.py); the HTTP port is then on loopback only",
    )
    args = parser.parse_args(argv)
    environ = dict(os.environ)  # read here, where the process starts, and handed down
    try:  # the secrets are files (a tmpfs, 0400), never in this process's environment
        secrets_from_files([SECRET_ENV, GATEWAY_KEY_ENV, GATEWAY_TOKEN_ENV], environ)
    except OSError as err:
        print(f"gateway: cannot read a secret file: {err}", file=sys.stderr)
        return 2
    secret = environ.get(SECRET_ENV, "")
    if not secret:
        print(f"gateway: {SECRET_ENV} is not set", file=sys.stderr)
        return 2
    try:
        responder = build_gateway(
            args.mode,
            batch_dir=args.batch_dir,
            scenario=args.scenario,
            upstream=args.upstream,
            batch_budget_usd=args.batch_budget_usd,
            environ=environ,
        )
    except (ScenarioError, GatewayConfigError) as err:
        print(f"gateway: {err}", file=sys.stderr)
        return 2
    server = MessagesServer(JobRouter(responder, secret), host=args.host, port=args.port)
    server.log = PerJobLog(args.batch_dir)  # type: ignore[assignment]
    server.start()
    if args.sockets:
        JobSockets(args.sockets, server.port).start()
    print(
        f"gateway listening on {args.host}:{server.port} mode={args.mode} ({describe(args.mode, args.upstream)})",
        flush=True,
    )
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
