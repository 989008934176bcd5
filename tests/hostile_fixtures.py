"""What a job's model-written code can leave in its folder to hurt the orchestrator that reads it:
a FIFO (a reader that opens it waits forever), a socket, a device node, symlinks out of the job,
names that are not UTF-8 or hold a newline, very deep and very wide trees."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from flower_batch.untrusted_files import remove_tree

SECRET = "root:x:0:0:outside-the-job"  # what a file outside the job holds: must never be shown
NOT_UTF8 = b"caf\xe9.txt"  # latin-1 bytes: no UTF-8 decoding of this name exists
NEWLINE_NAME = "two\nlines.txt"


def outside_secret(root: Path) -> Path:
    """A file outside any job folder (stands for /etc/passwd or another user's files)."""
    root.mkdir(parents=True, exist_ok=True)
    secret = root / "passwd"
    secret.write_text(SECRET + "\n")
    return secret


def hostile_workspace(ws: Path, secret: Path) -> dict[str, str]:
    """Fill `ws` with every hostile kind of entry; returns shown name -> the kind the readers must name."""
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "plain.txt").write_text("fine\n")
    os.mkfifo(ws / "pipe")
    os.mknod(ws / "sock", 0o600 | stat.S_IFSOCK)
    (ws / "passwd-link").symlink_to(secret)
    (ws / "etc-link").symlink_to("/etc/passwd")
    (ws / "dir-link").symlink_to(secret.parent)
    os.close(os.open(os.fsencode(ws) + b"/" + NOT_UTF8, os.O_WRONLY | os.O_CREAT, 0o644))
    (ws / NEWLINE_NAME).write_text("x\n")
    kinds = {
        "pipe": "fifo",
        "sock": "socket",
        "passwd-link": "symlink",
        "etc-link": "symlink",
        "dir-link": "symlink",
    }
    try:  # /dev/zero's numbers: a reader that opened it would read forever
        os.mknod(ws / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        kinds["zero"] = "device"
    except PermissionError:
        pass  # not root: no device node, the other kinds still count
    return kinds


def deep_tree(root: Path, depth: int, name: str = "d") -> None:
    """`depth` nested directories under root and a file at the bottom (made through descriptors:
    the whole path is longer than PATH_MAX)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def remove_deep(root: Path, name: str = "d") -> None:
    """Undo deep_tree (shutil.rmtree recurses: a 5,000-deep tree breaks it)."""
    remove_tree(root / name)


def wide_tree(root: Path, n: int, per_dir: int = 1000) -> None:
    """`n` small files, `per_dir` to a directory."""
    for i in range(n):
        sub = root / f"s{i // per_dir:04d}"
        if i % per_dir == 0:
            sub.mkdir(parents=True, exist_ok=True)
        fd = os.open(sub / f"f{i:06d}", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x\n")
        os.close(fd)
