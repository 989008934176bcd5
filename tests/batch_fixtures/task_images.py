"""Images of other distributions, for the task-image tests, made here with no registry the way
the runtime's base is (debootstrap from Debian's packages, then `docker import`), once per machine
(cached by tag and a recipe label):

- DEBIAN11: Debian 11 minbase, no Python at all (glibc 2.31, the oldest supported);
- DEBIAN13: Debian 13 with python3 (3.13), busybox-static and musl (for the two below);
- MUSL: busybox and musl's loader, no glibc: what an Alpine image is to flower;
- NO_SHELL: one file and nothing else, no /bin/sh.

`python -m tests.batch_fixtures.task_images` makes them all (`make test` starts it in the
background while the runtime image builds).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.batch_fixtures.rig import REPO

DEBIAN11 = "flower-batch-test:debian11"
DEBIAN13 = "flower-batch-test:debian13"
MUSL = "flower-batch-test:musl"
NO_SHELL = "flower-batch-test:no-shell"
RECIPE = "org.flower-batch.test-recipe"
MIRROR = "http://deb.debian.org/debian"
_RECIPES = {
    DEBIAN11: ("bullseye", ""),
    DEBIAN13: ("trixie", "python3,busybox-static,musl"),
}
_DERIVED = {
    MUSL: (
        DEBIAN13,
        "FROM {src} AS src\n"
        "FROM scratch\n"
        "COPY --from=src /bin/busybox /bin/busybox\n"
        "COPY --from=src /usr/lib/x86_64-linux-musl/ /usr/lib/x86_64-linux-musl/\n"
        "COPY --from=src /usr/lib/x86_64-linux-musl/libc.so /lib/ld-musl-x86_64.so.1\n"
        'RUN ["/bin/busybox", "mkdir", "-p", "/usr/bin", "/sbin", "/usr/sbin", "/tmp", "/etc"]\n'
        'RUN ["/bin/busybox", "--install", "-s"]\n'
        "RUN echo 3.20.0 > /etc/alpine-release\n",
    ),
    NO_SHELL: (DEBIAN13, "FROM scratch\nCOPY hello.txt /hello.txt\n"),
}


def ensure(tag: str) -> str:
    """The image `tag` (made when missing); its id."""
    from filelock import FileLock

    (REPO / "images" / ".cache").mkdir(parents=True, exist_ok=True)
    with FileLock(REPO / "images" / ".cache" / "test-task-images.lock", timeout=1800):
        found = _image_id(tag)
        if found:
            return found
        if tag in _RECIPES:
            _debootstrap(tag, *_RECIPES[tag])
        else:
            source, dockerfile = _DERIVED[tag]
            ensure_unlocked = _image_id(source) or _debootstrap(source, *_RECIPES[source])
            assert ensure_unlocked
            _build(tag, dockerfile.format(src=source))
        made = _image_id(tag)
        assert made, f"{tag} was not made"
        return made


def _image_id(tag: str) -> str | None:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


def _debootstrap(tag: str, suite: str, include: str) -> str:
    root = Path(tempfile.mkdtemp(prefix=f"fb-{suite}-", dir=REPO / "images" / ".cache"))
    try:
        command = ["debootstrap", "--variant=minbase", *([f"--include={include}"] if include else [])]
        for _attempt in range(3):  # a mirror's hiccup is not the test's failure
            shutil.rmtree(root, ignore_errors=True)
            done = subprocess.run([*command, suite, str(root), MIRROR], capture_output=True, text=True)
            if done.returncode == 0:
                break
        else:
            raise RuntimeError(f"debootstrap {suite} failed: {done.stdout[-800:]} {done.stderr[-800:]}")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (root / junk).glob("*"):
                if path.is_file():
                    path.unlink()
        (root / "etc" / "resolv.conf").write_text("")
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            [
                "docker",
                "import",
                "-c",
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "-c",
                f"LABEL {RECIPE}={suite}",
                "-",
                tag,
            ],
            stdin=tar.stdout,
            check=True,
            capture_output=True,
        )
        assert tar.wait() == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)
    found = _image_id(tag)
    assert found
    return found


def _build(tag: str, dockerfile: str) -> None:
    """`docker build` of a context holding only `dockerfile` and a small file, no network."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", dockerfile.encode()), ("hello.txt", b"hello\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    subprocess.run(
        ["docker", "build", "--network", "none", "-q", "-t", tag, "-"],
        input=context.getvalue(),
        check=True,
        capture_output=True,
    )


def main() -> int:
    for tag in (DEBIAN11, DEBIAN13, MUSL, NO_SHELL):
        ensure(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
