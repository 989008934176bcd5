"""Image operations on the local Docker engine used by `flower_batch.running.image` (blocking, host-side).

Building is a one-off host step (CLI `flower-batch image build`), not part of a job's life, so
these are plain synchronous calls; the async `Backend` only needs `image_info`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types

from flower_batch.backend.base import ImageInfo
from flower_batch.backend.docker.backend import image_info_from_inspect
from flower_batch.backend.docker.connection import OUT_OF_DISK_HINT, Connection, is_out_of_disk, translate
from flower_batch.errors import ImageBuildError, ImageMissing, NotFound, OutOfDisk

LogLine = Callable[[str], None]


class DockerImages:
    def __init__(self, base_url: str | None = None, timeout: float = 600.0):
        self._conn = Connection(base_url, timeout)

    @property
    def address(self) -> str:
        return self._conn.address

    def _api(self) -> Any:
        return self._conn.api()

    def find(self, ref: str) -> ImageInfo | None:
        """The image for an id or tag, or None when the engine does not have it."""
        try:
            return image_info_from_inspect(self._api().inspect_image(ref))
        except Exception as exc:
            err = translate(exc, "image", ref, address=self.address)
            if isinstance(err, ImageMissing):
                return None
            raise err from None

    def find_by_label(self, key: str, value: str) -> list[ImageInfo]:
        """Images carrying key=value, newest first."""
        try:
            rows = self._api().images(filters={"label": f"{key}={value}"})
            rows.sort(key=lambda r: r.get("Created", 0), reverse=True)
            return [image_info_from_inspect(self._api().inspect_image(r["Id"])) for r in rows]
        except Exception as exc:
            raise translate(exc, "image", f"{key}={value}", address=self.address) from None

    def ids_by_label(self, key: str) -> dict[str, str]:
        """Label `key`'s value -> the id of the newest image carrying it: one request for all
        (a plan of hundreds of task folders asks once, not once per folder)."""
        try:
            rows = self._api().images(filters={"label": key})
        except Exception as exc:
            raise translate(exc, "image", key, address=self.address) from None
        found: dict[str, str] = {}
        for row in sorted(rows, key=lambda r: r.get("Created", 0)):
            value = (row.get("Labels") or {}).get(key)
            if value:  # a state image blanks the label it inherited
                found[value] = row["Id"]
        return found

    def tag(self, image_id: str, ref: str) -> None:
        repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
        try:
            self._api().tag(image_id, repo, tag, force=True)
        except Exception as exc:
            raise translate(exc, "image", image_id, address=self.address) from None

    def import_rootfs(self, rootfs: Path, ref: str, changes: list[str]) -> str:
        """`tar -C rootfs -c . | docker import --change ... - ref`, streamed; returns the image id."""
        repo, _, tag = ref.rpartition(":")
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert tar.stdout is not None
        try:
            result = self._api().import_image_from_stream(
                _chunks(tar.stdout), repository=repo, tag=tag, changes=changes
            )
        except Exception as exc:
            tar.kill()
            raise translate(exc, "image", ref, address=self.address) from None
        finally:
            tar.stdout.close()
            stderr = tar.stderr.read().decode(errors="replace") if tar.stderr else ""
            code = tar.wait()
        if code != 0:
            raise ImageBuildError(f"tar of {rootfs} failed (exit {code}): {stderr.strip()[-300:]}")
        if isinstance(result, str) and "error" in result.lower():
            raise ImageBuildError(f"docker import of {rootfs} failed: {result.strip()[-300:]}")
        info = self.find(ref)
        if info is None:
            raise ImageBuildError(f"docker import of {rootfs} reported success but {ref} does not exist")
        return info.id

    def build(
        self,
        context: Path,
        ref: str | None,
        buildargs: dict[str, str],
        labels: dict[str, str],
        network_mode: str | None = "none",
        on_line: LogLine = lambda line: None,
        nocache: bool = False,
        dockerfile: str = "Dockerfile",
    ) -> str:
        """Build `context/Dockerfile` with the classic builder; returns the image id. `ref`: its
        tag (None: untagged).

        `labels` become final LABEL steps, a step per label (a Dockerfile of ours: label_line).
        `network_mode="none"` gives every RUN step no network at all, proving the build is offline.
        """
        last: list[str] = []
        image_id: str | None = None
        try:
            events = self._api().build(
                path=str(context),
                tag=ref,
                buildargs=buildargs,
                labels=labels,
                network_mode=network_mode,
                rm=True,
                forcerm=True,
                nocache=nocache,
                pull=False,
                dockerfile=dockerfile,
                decode=True,
            )
            for event in events:
                if "error" in event:
                    detail = (event.get("errorDetail") or {}).get("message") or event["error"]
                    if is_out_of_disk(detail):
                        raise OutOfDisk(OUT_OF_DISK_HINT)
                    context_lines = " | ".join(last[-3:])
                    raise ImageBuildError(
                        f"image build failed: {detail.strip()} (last output: {context_lines})"
                    )
                if "aux" in event and "ID" in event["aux"]:
                    image_id = event["aux"]["ID"]
                text = event.get("stream")
                if text:
                    for line in text.splitlines():
                        if line.strip():
                            last.append(line.strip())
                            on_line(line.rstrip())
        except (ImageBuildError, OutOfDisk):
            raise
        except Exception as exc:
            raise translate(exc, "image", ref or str(context), address=self.address) from None
        if image_id is None:
            info = self.find(ref) if ref else None
            if info is None:
                raise ImageBuildError(f"image build of {ref or context} ended without an image id")
            image_id = info.id
        return image_id

    def labelled(self, key: str) -> list[ImageInfo]:
        """Every image carrying label `key`, whatever its value."""
        try:
            rows = self._api().images(filters={"label": key})
            return [image_info_from_inspect(self._api().inspect_image(r["Id"])) for r in rows]
        except Exception as exc:
            raise translate(exc, "image", key, address=self.address) from None

    def labelled_volumes(self, key: str) -> list[str]:
        try:
            found = self._api().volumes(filters={"label": key}).get("Volumes") or []
            return sorted(v["Name"] for v in found)
        except Exception as exc:
            raise translate(exc, "volume", key, address=self.address) from None

    def remove_unused(self, kind: str, ref: str) -> bool:
        """Remove an image or volume unless a container uses it; False when one does."""
        try:
            if kind == "image":
                self._api().remove_image(ref, force=False)
            else:
                self._api().remove_volume(ref, force=False)
            return True
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # in use
                return False
            raise translate(
                exc, "image" if kind == "image" else "volume", ref, address=self.address
            ) from None

    # -- the runtime bundle's volume and the pre-flight probe (running/bundle.py) --------------
    def volume_exists(self, name: str) -> bool:
        try:
            self._api().inspect_volume(name)
            return True
        except Exception as exc:
            err = translate(exc, "volume", name, address=self.address)
            if isinstance(err, NotFound):
                return False
            raise err from None

    def create_volume(self, name: str, labels: dict[str, str]) -> None:
        try:
            self._api().create_volume(name, labels=labels)
        except Exception as exc:
            raise translate(exc, "volume", name, address=self.address) from None

    def remove_volume(self, name: str) -> None:
        try:
            self._api().remove_volume(name, force=True)
        except Exception as exc:
            err = translate(exc, "volume", name, address=self.address)
            if not isinstance(err, NotFound):
                raise err from None

    def run_to_end(
        self,
        image: str,
        command: list[str],
        *,
        volumes: dict[str, tuple[str, bool]],
        user: str,
        env: dict[str, str] | None = None,
        timeout: float = 120.0,
    ) -> tuple[int, str]:
        """Run `command` in a confined container of `image` (no network, no capability, a
        read-only root, `volumes` {name: (target, read_only)}) to its end; (exit code, its output,
        bounded). An image with nothing to run `command` with gives exit 127 and the engine's
        words. The container is removed whatever happens."""
        api = self._api()
        mounts = [
            docker.types.Mount(target, name, type="volume", read_only=ro, no_copy=ro)
            for name, (target, ro) in volumes.items()
        ]
        host = api.create_host_config(
            mounts=mounts,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": "rw,exec,nosuid,nodev,size=64m"},
            pids_limit=256,
        )
        try:
            created = api.create_container(
                image, command, user=user, host_config=host, entrypoint=[], environment=env
            )
        except Exception as exc:
            raise translate(exc, "image", image, address=self.address) from None
        cid = created["Id"]
        try:
            try:
                api.start(cid)
            except docker.errors.APIError as exc:  # e.g. no /bin/sh: the OCI runtime cannot exec
                return 127, str(exc.explanation or exc)
            code = int(api.wait(cid, timeout=timeout).get("StatusCode", 1))
            output = api.logs(cid, stdout=True, stderr=True, tail=40).decode(errors="replace")
            return code, output[-4000:]
        except Exception as exc:
            raise translate(exc, "container", cid, address=self.address) from None
        finally:
            try:
                api.remove_container(cid, force=True)
            except Exception:  # noqa: BLE001 - already gone: nothing left behind
                pass

    def remove(self, ref: str) -> None:
        try:
            self._api().remove_image(ref, force=True)
        except Exception as exc:
            err = translate(exc, "image", ref, address=self.address)
            if not isinstance(err, ImageMissing):
                raise err from None

    def close(self) -> None:
        self._conn.close()


def label_line(labels: dict[str, str]) -> str:
    """One Dockerfile LABEL instruction setting all of `labels`: given to `build`, the classic
    builder makes a step of each (a container and a commit, one to two seconds apiece on these
    machines' fuse-overlayfs). Every key and value double-quoted, with backslash, quote and `$`
    escaped (no variable is expanded); a newline cannot be in a Dockerfile line."""
    if any("\n" in k or "\n" in v for k, v in labels.items()):
        raise ValueError(f"a label with a newline cannot be written on a LABEL line: {labels!r}")
    return "LABEL " + " ".join(f"{_quoted(k)}={_quoted(v)}" for k, v in sorted(labels.items()))


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _chunks(stream: Any, size: int = 1 << 20) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk
