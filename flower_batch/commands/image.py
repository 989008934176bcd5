"""The runtime image commands: `image build`, `image show`, `image push` (flower_batch.cli groups them)."""

from __future__ import annotations

import json
import os

import typer

from flower_batch.commands.common import err
from flower_batch.running.image import pinned_image


def image_build(
    tag: str = typer.Option("flower-batch-runtime:latest", "--tag"),
    base: str | None = typer.Option(
        None, "--base", help="base image (default: made locally with debootstrap)"
    ),
    network: bool = typer.Option(False, "--network", help="allow network during the build"),
    no_cache: bool = typer.Option(False, "--no-cache"),
) -> None:
    """Build (or reuse) the runtime image; prints its immutable id."""
    from flower_batch.running.image import build_image

    img = build_image(tag=tag, base_image=base, network=network, no_cache=no_cache, environ=dict(os.environ))
    err.print(
        f"flower-batch {img.flower_batch_version} · claude-agent-sdk {img.sdk_version} · "
        f"CLI {img.cli_version} · {'reused' if img.reused else 'built'}"
    )
    print(img.id)


def image_show(ref: str = typer.Argument("flower-batch-runtime:latest")) -> None:
    """The id and versions of a runtime image."""
    pinned = pinned_image(ref)
    img_id, versions = pinned.id, pinned.versions
    print(json.dumps({"id": img_id, **versions}))


def image_push(
    registry: str = typer.Argument(..., help="HOST[:PORT] of a registry every node pulls from"),
    image: str = typer.Option("flower-batch-runtime:latest", "--image", help="runtime image (tag or id)"),
) -> None:
    """Push the pinned runtime image to REGISTRY; prints the repo digest cluster jobs run."""
    from flower_batch.backend.docker.registry import push_image

    img_id = pinned_image(image).id
    pushed = push_image(img_id, registry, on_line=lambda line: err.print(f"  {line}"))
    err.print(f"pushed {pushed.image_id[:19]} to {registry}")
    print(pushed.reference)
