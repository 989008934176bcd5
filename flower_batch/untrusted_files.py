"""A job's files, read as the hostile input they are: the job's model-written code made them.

Every reader of a job folder (the report, the viewer, repro, attempts) goes through here:

- a file is opened below a trusted root (a job folder, a workspace) one component at a time, each
  with O_NOFOLLOW: a symlink anywhere below the root is refused, never followed out of it;
- only a regular file is opened (lstat first, so a device is never opened; O_NONBLOCK, so a FIFO
  swapped in meanwhile cannot block; fstat after, so what was opened is the file checked);
- at most `limit` bytes of it are read.

A refused path raises `NotRegular`, an OSError (so a reader's `except OSError` skips it), whose
`why` names what it was: "symlink -> …", "fifo", "socket", "device", "directory".
`walk` lists a tree the same way: iteratively (a 5,000-deep tree is no recursion), no symlink
followed, bounded in entries and depth, with what it skipped and why. `shown` makes any name
(not UTF-8, a newline in it) one printable line, safe for JSON and HTML.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from flower_batch.errors import NotRegular

MAX_ENTRIES = 20_000  # entries `walk` lists before it stops and says the tree was cut
MAX_DEPTH = 64  # directory levels `walk` descends; one open descriptor per level
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_BELOW = _DIR | os.O_NOFOLLOW
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 16


def kind_of(mode: int) -> str:
    """What an lstat mode is, in the words the notes use."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def shown(name: str | bytes) -> str:
    """A path as one printable line: undecodable bytes as \\xNN, control characters escaped."""
    raw = name if isinstance(name, bytes) else os.fsencode(name)
    text = raw.decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _refused(rel: str, why: str) -> NotRegular:
    return NotRegular(rel, why, shown(rel))


def _parts(rel: str | Path) -> list[str]:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise _refused(str(rel), "not a plain relative path")
    return list(parts)


def _refusal(rel: str, name: str, dir_fd: int) -> NotRegular:
    """Why `name` (in dir_fd) was refused, from its lstat."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        return _refused(rel, f"unreadable ({exc.strerror or exc})")
    if stat.S_ISLNK(st.st_mode):
        try:
            return _refused(rel, f"symlink -> {shown(os.readlink(name, dir_fd=dir_fd))}")
        except OSError:
            return _refused(rel, "symlink")
    return _refused(rel, kind_of(st.st_mode))


@contextmanager
def _parent_fd(root: Path, parts: list[str], rel: str) -> Iterator[int]:
    """The directory holding parts[-1], reached from root without following a symlink."""
    fd = os.open(root, _DIR)
    try:
        for part in parts[:-1]:
            try:
                below = os.open(part, _BELOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ENOENT:  # absent, as a plain read would say
                    raise
                raise _refusal(rel, part, fd) from None
            os.close(fd)
            fd = below
        yield fd
    finally:
        os.close(fd)


@contextmanager
def open_file(root: Path, rel: str | Path) -> Iterator[BinaryIO]:
    """`root/rel` opened for reading if it is a regular file reached through no symlink.

    Raises FileNotFoundError when absent, NotRegular when refused (see the module docstring)."""
    parts = _parts(rel)
    text = "/".join(parts)
    with _parent_fd(Path(root), parts, text) as parent:
        before = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISREG(before.st_mode):
            raise _refusal(text, parts[-1], parent)
        try:
            fd = os.open(parts[-1], _FILE, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise
            raise _refusal(text, parts[-1], parent) from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise _refused(text, "replaced while it was opened")
    with os.fdopen(fd, "rb") as f:
        yield f


@dataclass(frozen=True)
class Read:
    """Bytes read from a file and the file's size then: `cut` when some were left out."""

    data: bytes
    size: int

    @property
    def cut(self) -> bool:
        return self.size > len(self.data)

    def text(self, what: str = "") -> str:
        """The bytes as text, with a last line saying how much was left out when it was cut."""
        body = self.data.decode("utf-8", "replace")
        if not self.cut:
            return body
        return body + f"\n… ({self.size - len(self.data)} more bytes of {what or 'this file'} not read)"


def read_head(root: Path, rel: str | Path, limit: int) -> Read:
    """At most the first `limit` bytes of a job's file (see open_file for what is refused)."""
    with open_file(root, rel) as f:
        data = f.read(limit)
        size = max(os.fstat(f.fileno()).st_size, len(data))
        if size == len(data) and f.read(1):  # grew past limit meanwhile
            size += 1
    return Read(data, size)


def read_tail(root: Path, rel: str | Path, limit: int) -> Read:
    """At most the last `limit` bytes of a job's file."""
    with open_file(root, rel) as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - limit))
        data = f.read(limit)
    return Read(data, max(size, len(data)))


def is_regular(root: Path, rel: str | Path) -> bool:
    """Whether open_file would open it (for readers that cannot take a descriptor, like SQLite)."""
    try:
        with open_file(root, rel):
            return True
    except OSError:
        return False


# -- trees ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    rel: str  # '/'-separated below the root, as os.fsdecode names it (shown() for people)
    kind: str  # file | symlink | fifo | socket | device | special file
    size: int
    mtime_ns: int
    target: str | None = None  # a symlink's target, never followed


@dataclass
class Tree:
    entries: dict[str, Entry] = field(default_factory=dict)  # by rel; directories are not entries
    dirs: list[str] = field(default_factory=list)  # rel of every directory listed
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (rel, why) of what was not listed
    truncated: bool = False  # stopped at max_entries


@dataclass
class _Frame:
    fd: int
    prefix: str
    names: list[str]  # left to look at, last first


def walk(root: Path, *, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH) -> Tree:
    """Every non-directory under root (symlinks as symlinks), depth first, bounded (module docstring)."""
    tree = Tree()
    frames = [_Frame(os.open(root, _DIR), "", [])]
    try:
        seen = 0
        frames[0].names = _names(frames[0].fd, max_entries + 1)
        while frames:
            frame = frames[-1]
            if not frame.names:
                os.close(frames.pop().fd)
                continue
            seen += 1
            if seen > max_entries:
                tree.truncated = True
                break
            name = frame.names.pop()
            child = _visit(tree, frame, name, len(frames) >= max_depth, max_entries + 1 - seen)
            if child is not None:
                frames.append(child)
    finally:
        for frame in frames:
            os.close(frame.fd)
    return tree


def _names(fd: int, limit: int) -> list[str]:
    names = []
    with os.scandir(fd) as it:
        for entry in it:
            names.append(entry.name)
            if len(names) >= limit:
                break
    return sorted(names, reverse=True)


def _visit(tree: Tree, frame: _Frame, name: str, at_floor: bool, room: int) -> _Frame | None:
    """Record one name of a directory; a subdirectory comes back as the frame to descend into."""
    rel = frame.prefix + name
    try:
        st = os.stat(name, dir_fd=frame.fd, follow_symlinks=False)
    except OSError as exc:
        tree.skipped.append((rel, f"unreadable ({exc.strerror or exc})"))
        return None
    kind = kind_of(st.st_mode)
    if kind != "directory":
        target = _link(name, frame.fd) if kind == "symlink" else None
        tree.entries[rel] = Entry(rel, kind, st.st_size, st.st_mtime_ns, target)
        return None
    if at_floor:
        tree.skipped.append((rel, f"directory deeper than {MAX_DEPTH} levels, not listed"))
        return None
    try:
        fd = os.open(name, _BELOW, dir_fd=frame.fd)
    except OSError as exc:
        tree.skipped.append((rel, f"unreadable ({exc.strerror or exc})"))
        return None
    try:
        frame = _Frame(fd, rel + "/", _names(fd, room))
        tree.dirs.append(rel)
        return frame
    except OSError as exc:
        os.close(fd)
        tree.skipped.append((rel, f"unreadable ({exc.strerror or exc})"))
        return None


def _link(name: str, dir_fd: int) -> str:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return "?"


# -- copies ---------------------------------------------------------------------------------------


def copy_file(root: Path, rel: str | Path, dest: Path) -> None:
    """A regular file of a job copied to dest (mode and times kept); NotRegular when refused."""
    with open_file(root, rel) as f:
        made = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(made, "wb") as out:
            while chunk := f.read(_CHUNK):
                out.write(chunk)
        st = os.fstat(f.fileno())
    os.chmod(dest, stat.S_IMODE(st.st_mode))
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))


def copy_tree(src: Path, dest: Path, *, max_entries: int = MAX_ENTRIES) -> list[tuple[str, str]]:
    """src's tree copied into dest without following a symlink out of it: regular files and
    directories copied, symlinks made again as symlinks, FIFOs, sockets and devices skipped.
    Returns what was skipped, (shown path, why); bounded like `walk`."""
    tree = walk(src, max_entries=max_entries)
    skipped = [(shown(rel), why) for rel, why in tree.skipped]
    if tree.truncated:
        skipped.append((".", f"more than {max_entries} entries: the rest not copied"))
    dest.mkdir(parents=True, exist_ok=True)
    for rel in tree.dirs:
        (dest / rel).mkdir(parents=True, exist_ok=True)
    for rel, entry in sorted(tree.entries.items()):
        out = dest / rel
        try:
            if entry.kind == "file":
                copy_file(src, rel, out)
            elif entry.kind == "symlink" and entry.target is not None:
                os.symlink(entry.target, out)
            else:
                skipped.append((shown(rel), entry.kind))
        except OSError as exc:
            skipped.append((shown(rel), str(exc.strerror or exc)))
    return skipped


def remove_tree(path: Path) -> None:
    """Delete a job's folder however deep, never following a symlink. shutil.rmtree recurses, so
    a tree a job made 2,000 deep stops it with RecursionError; here each pass moves the
    grandchildren of `path` up beside their parents (a rename), so two descriptors and no
    recursion do it, in as many renames as there are directories."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
    except FileNotFoundError:
        return
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    prefix, moved = f".rm-{os.getpid()}-{secrets.token_hex(4)}-", 0
    try:
        again = True
        while again:
            again = False
            for entry in list(os.scandir(top)):
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.name, dir_fd=top)
                    continue
                sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
                try:
                    for inner in list(os.scandir(sub)):
                        if inner.is_dir(follow_symlinks=False):
                            moved += 1
                            os.rename(inner.name, f"{prefix}{moved}", src_dir_fd=sub, dst_dir_fd=top)
                            again = True
                        else:
                            os.unlink(inner.name, dir_fd=sub)
                finally:
                    os.close(sub)
                os.rmdir(entry.name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)
