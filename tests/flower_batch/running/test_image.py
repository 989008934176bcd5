"""The runtime image: pure pieces of the build, and (docker, slow) the real offline build."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import anyio
import pytest

from flower_batch.backend.base import ContainerSpec, ImageInfo
from flower_batch.errors import ImageBuildError, NotARuntimeImage
from flower_batch.labels import CLI_VERSION, SDK_VERSION, VERSION
from flower_batch.running import image
from tests.batch_fixtures.rig import image_build_lock


def _fake_sdk_wheel(dir: Path, cli_version: str | None) -> Path:
    wheel = dir / "claude_agent_sdk-9.9.9-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("claude_agent_sdk/__init__.py", "")
        if cli_version:
            zf.writestr("claude_agent_sdk/_cli_version.py", f'"""x"""\n\n__cli_version__ = "{cli_version}"\n')
    return wheel


def test_bundled_cli_version_is_read_from_the_sdk_wheel(tmp_path: Path) -> None:
    other = tmp_path / "anyio-4.0.0-py3-none-any.whl"
    other.write_bytes(b"")
    assert image.bundled_cli_version([other, _fake_sdk_wheel(tmp_path, "2.1.327")]) == "2.1.327"


def test_bundled_cli_version_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match="bundled CLI version"):
        image.bundled_cli_version([_fake_sdk_wheel(tmp_path, None)])


def test_locked_requirements_pin_the_sdk_with_hashes() -> None:
    requirements = image.export_requirements(image.PROJECT_ROOT)
    assert image.pinned_version(requirements, "claude-agent-sdk") == "0.2.184"
    assert "--hash=sha256:" in requirements
    # the project itself is not exported (it is installed from its own wheel)
    assert not any(line.startswith("flower-batch") for line in requirements.splitlines())


def test_build_key_covers_every_input(tmp_path: Path) -> None:
    wheel = tmp_path / "w-1.0-py3-none-any.whl"
    wheel.write_bytes(b"w")
    project = tmp_path / "p-1.0-py3-none-any.whl"
    project.write_bytes(b"p")
    args = ["sha256:base", b"FROM x", "a==1", [wheel], project, {"v": "1"}, False]
    key = image.build_key(*args)
    assert key == image.build_key(*args)
    for i, changed in enumerate(["sha256:other", b"FROM y", "a==2", [], project, {"v": "2"}, True]):
        if i == 4:
            project.write_bytes(b"p2")
        variant = list(args)
        variant[i] = changed
        assert image.build_key(*variant) != key, f"input {i} does not change the key"


def test_context_holds_only_dockerfile_its_script_and_wheels(tmp_path: Path) -> None:
    wheel = tmp_path / "a-1.0-py3-none-any.whl"
    wheel.write_bytes(b"a")
    project = tmp_path / "flower_batch-0.1.0-py3-none-any.whl"
    project.write_bytes(b"p")
    dockerfile = image.PROJECT_ROOT / "images" / "runtime" / "Dockerfile"
    ctx = image.assemble_context(tmp_path / "ctx", dockerfile, [wheel], "a==1\n", project)
    files = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*") if p.is_file())
    assert files == [
        "Dockerfile",
        "project/flower_batch-0.1.0-py3-none-any.whl",
        "relocate-python.sh",
        "wheels/a-1.0-py3-none-any.whl",
        "wheels/requirements.txt",
    ]


def test_unlabelled_image_is_not_a_runtime_image() -> None:
    with pytest.raises(NotARuntimeImage, match="flower-batch image build"):
        image.RuntimeImage.from_info(ImageInfo("sha256:" + "0" * 64, ["debian:x"], {}, 1))
    labels = {VERSION: "0.1.0", SDK_VERSION: "0.2.184", CLI_VERSION: "2.1.327"}
    got = image.RuntimeImage.from_info(ImageInfo("sha256:" + "1" * 64, ["t:1"], labels, 5))
    assert (got.tag, got.flower_batch_version, got.sdk_version, got.cli_version) == (
        "t:1",
        "0.1.0",
        "0.2.184",
        "2.1.327",
    )


def _snapshot_project(dest: Path) -> Path:
    """A frozen copy of the sources, so concurrent edits cannot change what is built twice."""
    root = image.PROJECT_ROOT
    for name in ("pyproject.toml", "uv.lock", "README.md", "hatch_build.py"):
        if (root / name).exists():
            shutil.copy2(root / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", ".cache")
    for name in ("flower", "flower_batch", "images"):
        shutil.copytree(root / name, dest / name, ignore=ignore)
    return dest


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.anyio
async def test_image_builds_offline_runs_the_sdk_and_cli_and_is_cached(tmp_path: Path) -> None:
    from flower_batch.backend.docker.backend import DockerBackend

    project = _snapshot_project(tmp_path)
    cache = image.PROJECT_ROOT / "images" / ".cache"  # shared wheelhouse: the slow part is done once
    lines: list[str] = []

    def build() -> image.RuntimeImage:
        with image_build_lock():  # another worker's build may be using the same cache
            return image.build_image(
                tag="flower-batch-runtime:test", project_root=project, cache_dir=cache, log=lines.append
            )

    first = await anyio.to_thread.run_sync(build)  # marked docker: a dead daemon fails, never skips
    assert first.id.startswith("sha256:")
    assert (first.sdk_version, first.cli_version, first.flower_batch_version) == (
        "0.2.184",
        "2.1.327",
        "0.1.0",
    )
    if not first.reused:
        assert any("network: none" in line for line in lines)

    second = await anyio.to_thread.run_sync(build)
    assert second.reused and second.id == first.id
    assert image.read_image(first.id).labels == first.labels

    backend = DockerBackend()
    try:
        script = (
            "import claude_agent_sdk, pathlib, subprocess, sys;"
            "cli = pathlib.Path(claude_agent_sdk.__file__).parent / '_bundled' / 'claude';"
            "print(sys.executable, claude_agent_sdk.__version__);"
            "print(subprocess.run([str(cli), '--version'], capture_output=True, text=True).stdout.strip())"
        )
        cid = await backend.create(
            ContainerSpec(
                first.id,
                ["python", "-c", script],
                network="none",
                user="1234:1234",
                labels={"org.flower-batch.test": "image"},
            )
        )
        await backend.start(cid)
        code = await backend.wait(cid, timeout=60)
        out = [line async for line in backend.logs(cid)]
        await backend.remove(cid)
        assert code == 0, out
        assert out[0] == "/opt/flower/bin/python 0.2.184"
        assert out[1].startswith("2.1.327")
    finally:
        await backend.aclose()
