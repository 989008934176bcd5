"""How a container's command finds its secrets, the same on every engine: each secret NAME is a
file (env NAME_FILE names it: /run/secrets/NAME, mode 0400, in memory), never a value in the
container's configuration, so no `docker inspect` of it (or of its Swarm service) shows one.

A command that wants them as environment variables (a job: the CLI reads ANTHROPIC_API_KEY, the
workflow its `--secret`s) gets them from what starts it (the Swarm task's supervisor; on one
machine a few lines of sh, docker/secret_handover.py): the names FB_SECRET_NAMES lists, read
from their files into the environment the command is started with. A command that reads the
files itself (the gateway) is started with no such list. Stdlib only: it runs in the task.
"""

from __future__ import annotations

SECRETS_DIR = "/run/secrets"
SECRET_NAMES_ENV = "FB_SECRET_NAMES"


def command_env(environ: dict[str, str]) -> dict[str, str]:
    """`environ` with each listed secret's value read from its file into env NAME."""
    env = dict(environ)
    for name in filter(None, env.pop(SECRET_NAMES_ENV, "").split(",")):
        path = env.get(f"{name}_FILE")
        if path:
            with open(path, encoding="utf-8") as f:
                env[name] = f.read()
    return env
