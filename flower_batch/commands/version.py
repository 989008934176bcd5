"""`flower-batch --version`: flower's lines (flower/versions.py), the runtime image
`flower-batch-runtime:latest` as the local engine has it: its id and what it was built with,
"not built", or why the engine could not say, and where this flower-batch runs from (its
checkout, or where it is installed and from what). Never fails: no engine is an answer too."""

from __future__ import annotations

import typer

from flower.versions import version_lines
from flower_batch.commands.common import out
from flower_batch.errors import FlowerBatchError
from flower_batch.labels import BUILD_KEY

IMAGE_TAG = "flower-batch-runtime:latest"  # running/image.py DEFAULT_TAG: what `run` uses by default
LOOKUP_TIMEOUT_S = 5.0  # a DOCKER_HOST that does not answer must not hold `--version` up


def image_line(tag: str = IMAGE_TAG) -> str:
    from flower_batch.backend.docker.images import DockerImages  # only when asked: the SDK is slow to load
    from flower_batch.running.image import RuntimeImage

    try:
        images = DockerImages(timeout=LOOKUP_TIMEOUT_S)
        try:
            info = images.find(tag)
        finally:
            images.close()
        if info is None:
            return f"runtime image {tag}: not built (flower-batch image build)"
        image = RuntimeImage.from_info(info, tag=tag)
    except FlowerBatchError as exc:
        return f"runtime image {tag}: unknown ({' '.join(str(exc).split())})"
    built = f"flower-batch {image.flower_batch_version}, sdk {image.sdk_version}, cli {image.cli_version}"
    key = image.labels.get(BUILD_KEY, "")
    return f"runtime image {tag}: {image.id} (built with {built}" + (f"; build {key[:16]})" if key else ")")


def show_version(value: bool) -> None:
    """The eager `--version` option's callback: print, then exit 0 before any command runs."""
    if not value:
        return
    from flower_batch.running.image_sources import install_origin

    for line in [*version_lines("flower-batch"), image_line(), f"flower-batch runs from: {install_origin()}"]:
        out.print(line, markup=False)
    raise typer.Exit(0)


VERSION_OPT = typer.Option(
    False,
    "--version",
    callback=show_version,
    is_eager=True,
    help="show the versions (flower-batch, the SDK, its CLI, the runtime image) and exit",
)
