"""One fact, one table: gateway modes and their labels, memory sizes and image versions are each
read from one place, whichever module asks."""

from __future__ import annotations

from typing import get_type_hints

import pytest

from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.image import PinnedImage


def test_one_table_each_for_modes_labels_memory_and_image_versions(monkeypatch) -> None:
    from types import SimpleNamespace

    from flower_batch.backend import base as backend_base
    from flower_batch.commands import jobs as jobs_cmd
    from flower_batch.gateway.host.sidecar import gateway_memory
    from flower_batch.gateway.server import responders as modes
    from flower_batch.jobmodel import modes as host_modes
    from flower_batch.jobmodel.units import parse_memory
    from flower_batch.running import image, repro

    assert modes.MODES is host_modes.MODES
    for mode in (*host_modes.MODES, "other"):
        assert jobs_cmd.mode_label(mode) == host_modes.mode_label(mode)
        assert modes.describe(mode, None).startswith(host_modes.mode_label(mode))
    # A size is parsed where it is given; a ContainerSpec carries bytes, the backends parse nothing.
    assert get_type_hints(backend_base.ContainerSpec)["memory"] == int | None
    assert not hasattr(backend_base, "memory_limit_bytes")
    for text in ("512m", "2g", "1.5GiB", "7340032"):
        assert gateway_memory({"FLOWER_BATCH_GATEWAY_MEMORY": text}) == parse_memory(text)
    with pytest.raises(FlowerBatchError):
        gateway_memory({"FLOWER_BATCH_GATEWAY_MEMORY": "lots"})

    fake = SimpleNamespace(id="sha256:abc", flower_batch_version="1", sdk_version="2", cli_version="3")
    fake.pinned = image.RuntimeImage.pinned.fget(fake)  # type: ignore[attr-defined]
    monkeypatch.setattr(image, "read_image", lambda ref: fake)
    assert (
        repro.pinned_image("x")
        == image.pinned_image("x")
        == PinnedImage("sha256:abc", {"flower_batch": "1", "sdk": "2", "cli": "3"})
    )
