"""backend/docker/container_config.py: a ContainerSpec mapped onto the engine's create call, field
by field. No engine: the SDK's client builds the configs offline once its API version is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker

from flower_batch.backend.base import ContainerSpec, Mount
from flower_batch.backend.confinement import Confinement
from flower_batch.backend.docker import container_config as cc

GIB = 1024**3
HOSTS = Path("/cache/flower-batch/hosts")


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def offline_api() -> docker.APIClient:
    return docker.APIClient(base_url="unix:///nonexistent.sock", version="1.44")


def job(**kw: Any) -> ContainerSpec:
    fields: dict[str, Any] = {
        "image": "img",
        "command": ["flower", "run"],
        "mounts": [Mount("/h/ws", "/workspace")],
        "user": "1000:1000",
        "labels": {"org.flower-batch.managed": "1"},
        "name": "fb-j1",
    }
    return ContainerSpec(**{**fields, **kw})


def test_mounts_are_the_specs_and_a_loopback_hosts_file_when_given() -> None:
    spec = job(mounts=[Mount("/h/ws", "/workspace", read_only=True), Mount("vol", "/data", kind="volume")])
    assert plain(cc.mounts(spec, None)) == [
        {"Target": "/workspace", "Source": "/h/ws", "Type": "bind", "ReadOnly": True},
        {"Target": "/data", "Source": "vol", "Type": "volume", "ReadOnly": False},
    ]
    assert plain(cc.mounts(spec, HOSTS))[-1] == {
        "Target": "/etc/hosts",
        "Source": str(HOSTS),
        "Type": "bind",
        "ReadOnly": True,
    }


def test_the_engine_restarts_a_restart_container_unless_its_supervisor_hands_it_secrets() -> None:
    assert cc.restart_policy(job()) is None
    assert cc.restart_policy(job(restart=True)) == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert cc.restart_policy(job(restart=True, secrets={"K": "v"})) is None


def test_the_host_config_confines_limits_and_places_the_container() -> None:
    spec = job(cpus=1.5, memory=GIB, network="fb-net")
    assert plain(cc.host_config(offline_api(), spec, {"/tmp": "rw,size=1g"}, None)) == {
        "NetworkMode": "fb-net",
        "ReadonlyRootfs": True,
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges"],
        "Tmpfs": {"/tmp": "rw,size=1g"},
        "NanoCpus": 1_500_000_000,
        "Memory": GIB,
        "PidsLimit": 2048,
        "Init": True,
        "Mounts": [{"Target": "/workspace", "Source": "/h/ws", "Type": "bind", "ReadOnly": False}],
    }
    loose = job(
        init=False, network="none", confinement=Confinement(pids=None, read_only_root=False, tmpfs={})
    )
    config = plain(cc.host_config(offline_api(), loose, {}, HOSTS))
    assert config["NetworkMode"] == "none" and config["ReadonlyRootfs"] is False
    assert config["CapDrop"] == ["ALL"] and config["SecurityOpt"] == ["no-new-privileges"]
    for left_out in ("Tmpfs", "PidsLimit", "Init", "NanoCpus", "Memory", "RestartPolicy"):
        assert left_out not in config
    assert plain(cc.host_config(offline_api(), job(restart=True), {}, None))["RestartPolicy"] == {
        "Name": "on-failure",
        "MaximumRetryCount": 3,
    }


def test_a_network_is_joined_with_its_aliases_and_none_is_no_network() -> None:
    api = offline_api()
    assert cc.networking_config(api, job()) is None and cc.networking_config(api, job(network="none")) is None
    assert plain(cc.networking_config(api, job(network="fb-net", network_aliases=["gateway"]))) == {
        "EndpointsConfig": {"fb-net": {"Aliases": ["gateway"]}}
    }
    assert plain(cc.networking_config(api, job(network="fb-net"))) == {"EndpointsConfig": {"fb-net": {}}}


def test_the_create_call_keeps_stdin_open_only_for_secrets() -> None:
    options = cc.create_options(job(working_dir="/workspace"), ["flower", "run"], {"HOME": "/tmp"}, None)
    assert options == {
        "command": ["flower", "run"],
        "environment": {"HOME": "/tmp"},
        "user": "1000:1000",
        "working_dir": "/workspace",
        "labels": {"org.flower-batch.managed": "1"},
        "name": "fb-j1",
        "network_disabled": False,
        "detach": True,
        "stdin_open": False,
    }
    secret = cc.create_options(job(secrets={"K": "s3cr3t-value"}), ["sh"], {}, HOSTS)
    assert secret["detach"] is False and secret["stdin_open"] is True and secret["network_disabled"] is True
    assert "s3cr3t-value" not in json.dumps(secret)
