"""Per-job gateway tokens: HMAC(batch secret, job id).

The gateway holds only the batch secret (a 0400 file on a tmpfs, then its memory; never in its
environment or on the host's disk) and recomputes the expected token for the job named in the
request path, so jobs can be added while it runs and no token table is ever written anywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, MutableMapping

SECRET_ENV = "FB_GATEWAY_SECRET"  # the batch secret: the file env FB_GATEWAY_SECRET_FILE names


def new_secret() -> str:
    return secrets.token_hex(32)


def job_token(secret: str, job_id: str) -> str:
    mac = hmac.new(secret.encode(), job_id.encode(), hashlib.sha256).hexdigest()
    return f"fbj-{mac[:40]}"


def token_matches(secret: str, job_id: str, presented_sha256: str) -> bool:
    expected = hashlib.sha256(job_token(secret, job_id).encode()).hexdigest()
    return hmac.compare_digest(expected, presented_sha256)


def secrets_from_files(names: Iterable[str], environ: MutableMapping[str, str]) -> None:
    """A secret arrives as a file (env NAME_FILE=/run/secrets/NAME: an engine secret on a cluster,
    a tmpfs filled from stdin on one machine; backend/secret_env.py): read it into
    `environ`, the gateway entry's copy of its environment (never os.environ)."""
    for name in names:
        path = environ.get(f"{name}_FILE")
        if path and not environ.get(name):
            with open(path, encoding="utf-8") as f:
                environ[name] = f.read().strip()
