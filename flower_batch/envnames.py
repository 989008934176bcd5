"""Which environment variable names a job may be given, shared by `run --env/--secret` and jobs.toml.

- A name must be a valid variable name (letters, digits, _; not starting with a digit).
- ANTHROPIC_* names belong to the gateway and the orchestrator: the gateway gives each job its
  own ANTHROPIC_BASE_URL and token (ANTHROPIC_API_KEY), the real key stays on the host, and the
  model is the job's `model`. They are refused as env values and as secrets.
- A name "looks like a secret" when one of its `_`-separated words is KEY, TOKEN, SECRET,
  PASSWORD, PASSWD, CREDENTIAL(S) or APIKEY (GITHUB_TOKEN, OPENAI_API_KEY; not AUTHOR or
  MONKEY_PATCH): its value must come from the host by name (`secrets`), not be written down.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

GATEWAY_PREFIX = "ANTHROPIC_"
GATEWAY_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_WORDS = frozenset(
    {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY"}
)


def valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


def gateway_owned(name: str) -> bool:
    """Set for every job by flower-batch itself; a job must never be given its own value."""
    return name.upper().startswith(GATEWAY_PREFIX)


def looks_secret(name: str) -> bool:
    return any(part in _SECRET_WORDS for part in name.upper().split("_"))


def env_name_problem(name: str) -> str | None:
    """Why `name` cannot be a job's env name, or None. (A secret-looking name is the caller's
    call: fine with a templated or empty value, refused with a literal one.)"""
    if not valid_env_name(name):
        return "not a valid environment variable name; use letters, digits and _"
    if gateway_owned(name):
        return (
            f"{name} is set per job by the gateway (the real key never enters a container); remove it"
            if name in GATEWAY_ENV
            else f"{name}: ANTHROPIC_* variables are set for every job by flower-batch (use `model` for the model); remove it"
        )
    return None


def secret_name_problem(name: str) -> str | None:
    """Why `name` cannot be passed as a secret, or None."""
    if not valid_env_name(name):
        return f"expected the NAME of a host environment variable (not its value), got {name!r}"
    if gateway_owned(name):
        return f"{name} is never passed to a job: the gateway holds the real key; remove it"
    return None


def unset_names(names: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """The secret names in `names` that `environ` does not give a (non-empty) value."""
    return [name for name in dict.fromkeys(names) if not environ.get(name)]
