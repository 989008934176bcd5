"""The /etc/hosts of a container with no network, as a file the engine can bind-mount.

A container created with NetworkDisabled gets no /etc/hosts from the engine (backend.py says
why we create them so), yet model-written code calls `localhost`. The file is written by us,
0444, into this user's cache: a copy in the checkout would carry the mode its clone's umask gave
it, and under umask 077 the sandbox's uid could not read it (seen in CI).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from flower.fileio import write_atomic

HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
NAME = "loopback_hosts"


def cache_folder(environ: Mapping[str, str]) -> Path | None:
    """$XDG_CACHE_HOME/flower-batch, else $HOME/.cache/flower-batch; None with neither set.
    `environ`: the environment as the command read it where it started."""
    if base := environ.get("XDG_CACHE_HOME"):
        return Path(base) / "flower-batch"
    if home := environ.get("HOME"):
        return Path(home) / ".cache" / "flower-batch"
    return None


def _is_ours(path: Path) -> bool:
    try:
        st = path.lstat()  # a symlink planted here is not followed, it is replaced
        return (
            stat.S_ISREG(st.st_mode)
            and st.st_uid == os.getuid()
            and stat.S_IMODE(st.st_mode) == 0o444
            and path.read_text() == HOSTS
        )
    except (OSError, UnicodeDecodeError):
        return False


def loopback_hosts_file(folder: Path) -> Path | None:
    """A readable-by-all hosts file with localhost only, in `folder`; None where none can be written."""
    path = folder / NAME
    if _is_ours(path):
        return path
    try:  # whole or not at all, when two commands start at once
        write_atomic(path, HOSTS, mode=0o444)
    except OSError:
        return None
    return path
