"""A job's own disk without the engine (issue 36): the field, the image mkfs makes from the job's
folders, when a disk counts as full and the reason it gives. The engine's side:
test_job_disk_on_docker.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from flower_batch.backend.confinement import tmp_mount
from flower_batch.jobmodel import fields
from flower_batch.jobmodel.spec import DEFAULT_DISK, JobSpec
from flower_batch.layout import JobDir
from flower_batch.running.job_disk import DISK_IMAGE, DiskUse, make_image
from flower_batch.untrusted_files import remove_tree


def job_spec() -> JobSpec:
    return JobSpec(id="j", task="t", variant="v", repeat=1, matrix={}, prompt="p")


def test_disk_is_a_size_of_at_least_64m_with_a_default_of_10g() -> None:
    assert fields.disk("2g") == 2 * 1024**3 and fields.disk(128 * 1024**2) == 128 * 1024**2
    lots = fields.disk("lots", lambda v: f'"{v}"')
    assert isinstance(lots, fields.Problem) and lots.text.startswith('expected a disk size like "500m"')
    small = fields.disk("1m", lambda v: f'"{v}"')
    assert isinstance(small, fields.Problem) and 'at least "64m"' in small.text
    assert job_spec().disk_bytes == DEFAULT_DISK == 10 * 1024**3
    assert "disk" not in job_spec().to_dict()  # unset: the inputs hash of older records holds


def test_tmp_is_bounded_by_a_disk_smaller_than_its_usual_size() -> None:
    assert tmp_mount(None)["/tmp"].endswith("size=1g")
    assert tmp_mount(10 * 1024**3)["/tmp"].endswith("size=1g")
    assert tmp_mount(96 * 1024**2)["/tmp"].endswith(f"size={96 * 1024**2}")


def test_the_image_holds_the_jobs_folders_and_leaves_them_on_the_host(tmp_path: Path) -> None:
    jd = JobDir("b", "j", tmp_path / "j")
    jd.make()
    (jd.workspace / "a.txt").write_text("hello")
    (jd.runs / "manifest.json").write_text("[]")
    image = make_image(jd, 64 * 1024**2)
    assert image == jd.root / DISK_IMAGE and image.stat().st_size == 64 * 1024**2
    assert image.stat().st_blocks * 512 < 16 * 1024**2  # sparse: only the metadata written
    assert (jd.workspace / "a.txt").read_text() == "hello" and (jd.runs / "manifest.json").exists()
    assert not (jd.root / ".disk-in").exists()
    listing = subprocess.run(
        ["debugfs", "-R", "cat /workspace/a.txt", str(image)], capture_output=True, text=True, check=True
    )
    assert listing.stdout == "hello"


def test_a_disk_at_its_limit_names_the_limit_and_the_folder_that_grew() -> None:
    mib = 1024**2
    use = DiskUse(
        96 * mib, 512 * 1024, (("workspace", 82 * mib), ("runs", mib // 10)), ("workspace/big.bin", 82 * mib)
    )
    assert use.full
    assert use.reason() == (
        'disk full: the job reached its limit of 96m (disk = "96m"); workspace grew to 82.0 MiB '
        "(largest: workspace/big.bin, 82.0 MiB), runs 0.1 MiB"
    )
    assert not DiskUse(96 * mib, 40 * mib, (("workspace", mib), ("runs", mib)), None).full


def test_a_full_disks_folders_are_measured_however_deep_the_jobs_tree(tmp_path: Path) -> None:
    from flower_batch.running.job_disk import tree_bytes

    deep = tmp_path / "workspace"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    for _ in range(3000):  # deeper than Python's recursion limit (and than PATH_MAX): os.walk fails
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    assert tree_bytes(deep) >= 3000 * 4096
    remove_tree(deep)  # iteratively: pytest's own cleanup recurses
