"""backend/swarm/service_spec.py: a ContainerSpec mapped onto a Swarm service spec, field by field
(pure: no engine, no cluster). The whole mapping of one spec is pinned below as the engine gets it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flower_batch.backend.base import ContainerSpec, Mount
from flower_batch.backend.confinement import Confinement
from flower_batch.backend.swarm import service_spec as ss

GIB = 1024**3
CONTROL = Path("/shared/control/fb-j1")


def plain(value: Any) -> Any:
    """What the SDK's dict subclasses send to the engine, as plain JSON data."""
    return json.loads(json.dumps(value))


def job(**kw: Any) -> ContainerSpec:
    fields: dict[str, Any] = {
        "image": "img",
        "command": ["flower", "run"],
        "env": {"HOME": "/tmp"},
        "mounts": [Mount("/h/ws", "/workspace")],
        "user": "1000:1000",
        "labels": {"org.flower-batch.managed": "1"},
        "name": "fb-j1",
    }
    return ContainerSpec(**{**fields, **kw})


def test_the_command_runs_under_task_signals() -> None:
    assert ss.task_command(["flower", "run"]) == [
        "/opt/flower/bin/python",
        "-m",
        "flower_batch.backend.swarm.task_signals",
        "/run/flower-batch/signal",
        "--",
        "flower",
        "run",
    ]


def test_a_secret_name_is_the_service_key_and_token_within_swarms_64_characters() -> None:
    assert ss.secret_name("fb-j1", "ANTHROPIC_API_KEY", "0a0b0c0d") == "fb-j1-anthropic-api-key-0a0b0c0d"
    long = ss.secret_name("x" * 70, "GITHUB_TOKEN", "abcd1234")
    assert long == "x" * 42 + "-github-token-abcd1234" and len(long) == ss.SECRET_NAME_MAX
    # the key is cut to 20 characters, and the service's name loses a trailing separator
    cut = ss.secret_name("x" * 39 + ".yyyy", "A_VERY_LONG_SECRET_KEY_NAME", "00")
    assert cut == "x" * 39 + "-a-very-long-secret-k-00"


def test_a_secret_is_the_task_users_file_only() -> None:
    ref = ss.secret_reference("sec-1", "n", "KEY", "1000:2000")
    assert plain(ref) == {
        "SecretName": "n",
        "SecretID": "sec-1",
        "File": {"Name": "KEY", "UID": "1000", "GID": "2000", "Mode": 0o400},
    }
    assert plain(ss.secret_reference("i", "n", "K", "1000"))["File"]["GID"] == "1000"  # no gid: the uid
    assert plain(ss.secret_reference("i", "n", "K", None))["File"] | {"Name": "K"} == {
        "Name": "K",
        "UID": "0",
        "GID": "0",
        "Mode": 0o400,
    }


def test_the_env_names_secret_files_the_build_key_and_secret_names_never_a_value() -> None:
    spec = job(secrets={"ANTHROPIC_API_KEY": "t0k", "GITHUB_TOKEN": "ghp"})
    assert ss.task_env(spec, "bk") == {
        "HOME": "/tmp",
        "FB_IMAGE_KEY": "bk",
        "ANTHROPIC_API_KEY_FILE": "/run/secrets/ANTHROPIC_API_KEY",
        "GITHUB_TOKEN_FILE": "/run/secrets/GITHUB_TOKEN",
        "FB_SECRET_NAMES": "ANTHROPIC_API_KEY,GITHUB_TOKEN",
    }
    # the gateway reads its files itself; no build key to pin: none handed down
    gateway = job(secrets={"FB_GATEWAY_SECRET": "s"}, secrets_as_env=False)
    assert ss.task_env(gateway, "") == {
        "HOME": "/tmp",
        "FB_GATEWAY_SECRET_FILE": "/run/secrets/FB_GATEWAY_SECRET",
    }
    assert ss.task_env(job(), "") == {"HOME": "/tmp"}


def test_mounts_are_the_specs_then_the_control_folder_then_confinements_tmpfs() -> None:
    spec = job(
        mounts=[Mount("/h/ws", "/workspace", read_only=True), Mount("vol", "/data", kind="volume")],
        confinement=Confinement(tmpfs={"/tmp": "rw,nosuid,nodev,size=64m", "/run/x": "rw,nosuid"}),
    )
    assert plain(ss.mounts(spec, CONTROL)) == [
        {"Target": "/workspace", "Source": "/h/ws", "Type": "bind", "ReadOnly": True},
        {"Target": "/data", "Source": "vol", "Type": "volume", "ReadOnly": False},
        {"Target": "/run/flower-batch", "Source": str(CONTROL), "Type": "bind", "ReadOnly": False},
        {"Target": "/tmp", "Type": "tmpfs", "TmpfsOptions": {"SizeBytes": 64 * 1024**2}},
        {"Target": "/run/x", "Type": "tmpfs"},  # a service's tmpfs takes its size only
    ]


def test_resources_reserve_what_they_limit_and_pids_are_confinements() -> None:
    assert plain(ss.resources(job(cpus=0.5, memory=GIB))) == {
        "Limits": {"NanoCPUs": 500_000_000, "MemoryBytes": GIB, "Pids": 2048},
        "Reservations": {"NanoCPUs": 500_000_000, "MemoryBytes": GIB},
    }
    assert plain(ss.resources(job(confinement=Confinement(pids=None)))) == {}
    assert plain(ss.resources(job(cpus=2, confinement=Confinement(pids=64)))) == {
        "Limits": {"NanoCPUs": 2_000_000_000, "Pids": 64},
        "Reservations": {"NanoCPUs": 2_000_000_000},
    }


def test_a_job_never_restarts_and_a_restart_service_does_on_failure() -> None:
    assert plain(ss.restart_policy(False)) == {"Condition": "none", "Delay": 0, "MaxAttempts": 0, "Window": 0}
    assert plain(ss.restart_policy(True)) == {
        "Condition": "on-failure",
        "Delay": 1_000_000_000,
        "MaxAttempts": 3,
        "Window": 60_000_000_000,
    }


def test_placement_and_networks_only_when_given() -> None:
    assert ss.placement(job()) is None and ss.networks(job()) is None
    assert plain(ss.placement(job(placement=["node.labels.pool==big"]))) == {
        "Constraints": ["node.labels.pool==big"]
    }
    assert plain(ss.networks(job(network="fb-net"))) == [
        {"Target": "fb-net", "Aliases": None, "DriverOpts": None}
    ]
    assert plain(ss.networks(job(network="fb-net", network_aliases=["gateway"])))[0]["Aliases"] == ["gateway"]


def test_a_service_of_no_replica_yet_reached_by_dns_round_robin() -> None:
    options = ss.service_options(job(), "fb-j1")
    assert options["name"] == "fb-j1" and options["labels"] == {"org.flower-batch.managed": "1"}
    assert options["mode"].mode == "replicated" and plain(options["mode"]) == {"replicated": {"Replicas": 0}}
    assert plain(options["endpoint_spec"]) == {"Mode": "dnsrr"}


def test_the_whole_task_of_a_job_as_the_engine_gets_it() -> None:
    spec = job(
        cpus=0.5,
        memory=GIB,
        network="fb-net",
        network_aliases=["gateway"],
        secrets={"ANTHROPIC_API_KEY": "t0k"},
        placement=["node.labels.pool==big"],
        working_dir="/workspace",
    )
    name = ss.secret_name("fb-j1", "ANTHROPIC_API_KEY", "0a0b0c0d")
    refs = [ss.secret_reference("sec-1", name, "ANTHROPIC_API_KEY", spec.user)]
    template = plain(ss.task_template(spec, "img@sha256:cd", ss.task_env(spec, "bk"), CONTROL, refs))
    assert "t0k" not in json.dumps(template)
    assert template == {
        "ContainerSpec": {
            "Image": "img@sha256:cd",
            "Command": [
                "/opt/flower/bin/python",
                "-m",
                "flower_batch.backend.swarm.task_signals",
                "/run/flower-batch/signal",
                "--",
                "flower",
                "run",
            ],
            "Args": None,
            "Env": [
                "HOME=/tmp",
                "FB_IMAGE_KEY=bk",
                "ANTHROPIC_API_KEY_FILE=/run/secrets/ANTHROPIC_API_KEY",
                "FB_SECRET_NAMES=ANTHROPIC_API_KEY",
            ],
            "Dir": "/workspace",
            "User": "1000:1000",
            "Labels": {"org.flower-batch.managed": "1"},
            "Mounts": [
                {"Target": "/workspace", "Source": "/h/ws", "Type": "bind", "ReadOnly": False},
                {"Target": "/run/flower-batch", "Source": str(CONTROL), "Type": "bind", "ReadOnly": False},
                {"Target": "/tmp", "Type": "tmpfs", "TmpfsOptions": {"SizeBytes": GIB}},
            ],
            "Secrets": [
                {
                    "SecretName": "fb-j1-anthropic-api-key-0a0b0c0d",
                    "SecretID": "sec-1",
                    "File": {"Name": "ANTHROPIC_API_KEY", "UID": "1000", "GID": "1000", "Mode": 0o400},
                }
            ],
            "ReadOnly": True,
            "Init": True,
            "CapabilityDrop": ["ALL"],
            "Sysctls": {"net.ipv4.tcp_syn_retries": str(ss.SYN_RETRIES)},
        },
        "Resources": {
            "Limits": {"NanoCPUs": 500_000_000, "MemoryBytes": GIB, "Pids": 2048},
            "Reservations": {"NanoCPUs": 500_000_000, "MemoryBytes": GIB},
        },
        "RestartPolicy": {"Condition": "none", "Delay": 0, "MaxAttempts": 0, "Window": 0},
        "Placement": {"Constraints": ["node.labels.pool==big"]},
        "Networks": [{"Target": "fb-net", "Aliases": ["gateway"], "DriverOpts": None}],
    }


def test_no_network_no_init_a_writable_root_and_no_secret_leave_their_fields_out() -> None:
    spec = job(init=False, confinement=Confinement(read_only_root=False, tmpfs={}))
    container = plain(ss.container_spec(spec, "img", ss.task_env(spec, ""), CONTROL, []))
    assert "Sysctls" not in container and "Secrets" not in container and "Init" not in container
    assert container["ReadOnly"] is False and container["CapabilityDrop"] == ["ALL"]
