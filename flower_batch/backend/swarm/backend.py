"""`SwarmBackend`: the Backend on a Docker Swarm cluster, reached the way the docker CLI reaches a
manager (DOCKER_HOST / `docker context`), through the docker SDK's low-level API.

How each part of the contract maps onto Swarm:
- a task is a service: a `replicated` service of one replica, with restart condition "none" for
  a job and "on-failure" for `restart=True` (the gateway, which Swarm restarts when it dies).
  `create` makes it with 0 replicas (the engine lists it, labelled, as "created"); `start` asks
  for the one task. The "container id" is the service id. Not a `replicated-job`: Swarm 20.10
  never lets go of a job's completed task, nor of its reservation (see RESERVATIONS below).
- cpus and memory are both limits and reservations; a task no node could ever hold is refused
  in one line before anything is made (swarm/fit.py). `placement` becomes the service's
  placement constraints.
- the image runs by repo digest (`flower-batch image push REGISTRY` made it), so a node can only
  run the pinned bytes; a registry that serves other bytes under that digest is refused (drift).
- `secrets` (the batch secret, the host's API key, each job's gateway token and the secrets a
  job names) become Swarm secrets mounted at /run/secrets/NAME (env NAME_FILE points there);
  task_signals reads them into the command's env NAME, as a local engine gives them. No
  `docker inspect` of a service or its container shows a value.
- signals: a manager cannot signal a task, so every task runs its command under
  `task_signals`, which forwards what `signal`/`stop` append to a control file on shared storage.
- networks are overlay networks (`internal=True`: no route out); volumes are node-local on Swarm,
  so a batch uses bind mounts on shared storage, which is checked from every node before the
  first task that mounts a folder there (storage.py).
- a task whose node goes down makes `wait` raise `NodeLost`.

`create` builds the service from service_spec.py's pure pieces, one per field group.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import docker.types

from flower_batch.backend.base import (
    Backend,
    ContainerInfo,
    ContainerSpec,
    ImageInfo,
    LabelFilter,
    NetworkInfo,
    NodeLeftover,
    SecretInfo,
    VolumeInfo,
    signal_number,
)
from flower_batch.backend.docker.backend import image_info_from_inspect, label_filters
from flower_batch.backend.docker.connection import Connection, Kind, translate
from flower_batch.backend.docker.registry import repo_digest_for
from flower_batch.backend.swarm import sweep
from flower_batch.backend.swarm.fit import unmet_reservation
from flower_batch.backend.swarm.logs import LOG_BATCH, LineSplitter, LogStamp, split_stamp
from flower_batch.backend.swarm.service_spec import (
    secret_name,
    secret_reference,
    service_options,
    task_env,
    task_template,
)
from flower_batch.backend.swarm.storage import Probe, refusal
from flower_batch.backend.swarm.task_signals import EXPECTED_KEY_ENV, REPORT
from flower_batch.backend.swarm.tasks import (
    ever_ran,
    image_drift,
    newest_task,
    on_its_node,
    task_error,
    task_state,
)
from flower_batch.errors import (
    BackendError,
    ContainerNotFound,
    ContainerNotRunning,
    FlowerBatchError,
    ImageDrift,
    ImageMissing,
    NodeLost,
    ReservationUnmet,
    SharedStorageMissing,
)
from flower_batch.labels import BATCH, BUILD_KEY, JOB, LEASE, MANAGED, ROLE, SERVICE
from flower_batch.untrusted_files import read_head

T = TypeVar("T")

# RESERVATIONS. Why a job is a restart-"none" replicated service and not a `replicated-job`
# (swarmkit as vendored in Docker 20.10, checked on the test cluster, moby/moby#52652):
# - a replicated-job's task that completes keeps DesiredState=Completed for good. Only a failed
#   one goes through the restart supervisor, which sets DesiredState=Shutdown.
# - removing a job service leaves its tasks in the store: the jobs orchestrator handles no
#   service deletion (the replicated and global ones mark the tasks Remove, and the task reaper
#   then deletes them), and the reaper's history pruning (`docker swarm update
#   --task-history-limit`) skips jobs and services that no longer exist. So those tasks stay.
# - the scheduler releases a reservation when the task's actual state is past running, but the
#   constraint enforcer sums the reservations of every task on a node whose DesiredState is at
#   most Completed, whatever its actual state. Each node update (a label, a drain, a rejoin)
#   makes it recount, and past the node's size it rejects tasks, even running ones
#   ("assigned node no longer meets constraints").
# A replicated service's task that ends goes through the restart supervisor (DesiredState
# Shutdown, no restart with condition "none"), and removing the service marks its tasks Remove,
# which the reaper deletes: the enforcer counts it only while it runs, as the scheduler does.

PROBE_TIMEOUT_S = 300.0  # a node's first pull of the runtime image is part of the first probe
# Swarm's constraint enforcer may still reject a task before it starts when something else on
# the cluster left replicated-job tasks with reservations on the node (see RESERVATIONS).
# Nothing ran, so asking again is safe.
REJECTED_BY_ENFORCER = "no longer meets constraints"
RESUBMITS = 5


class SwarmBackend(Backend):
    def __init__(
        self,
        control_dir: Path,
        base_url: str | None = None,
        registry: str | None = None,
        shared_root: Path | None = None,
        timeout: float = 120.0,
        poll_s: float = 0.5,
        warm_networks: bool = True,
    ) -> None:
        """`control_dir`: a folder on shared storage for the signal files (see task_signals).
        `shared_root`: the folder checked once for every mount under it (the home)."""
        self._conn = Connection(base_url, timeout)
        self.control_dir = Path(control_dir)
        self.registry = (registry or "").strip() or None  # the command reads $FLOWER_BATCH_REGISTRY
        self.shared_root = Path(shared_root) if shared_root else None
        self.poll_s = poll_s
        self.warm_networks = warm_networks  # _warm: off only to measure what it saves (bench/cluster.py)
        self._to_warm: dict[str, dict[str, str]] = {}
        self._verified: list[Path] = []
        self._storage_lock: anyio.Lock | None = None  # made in the event loop that uses it
        self._images: dict[str, str] = {}
        self._keys: dict[str, str] = {}
        self._hostnames: dict[str, str] = {}
        self._waits = anyio.CapacityLimiter(64)

    @property
    def address(self) -> str:
        return self._conn.address

    async def _call(self, kind: Kind, ref: str, fn: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            try:
                return fn(self._conn.api(), *args)
            except Exception as exc:
                raise translate(exc, kind, ref, address=self._conn.address) from None

        return await anyio.to_thread.run_sync(run)

    # -- images and storage, checked before anything is scheduled --------------------------
    async def resolve_image(self, ref: str) -> str:
        """The repo digest services run for `ref` (an image id, tag or repo digest)."""
        if ref in self._images:
            return self._images[ref]
        reference: str | None = ref if "@sha256:" in ref else None
        if reference is None:
            data = await self._call("image", ref, lambda api: api.inspect_image(ref))
            digests = list(data.get("RepoDigests") or [])
            reference = (
                repo_digest_for(digests, self.registry)
                if self.registry
                else next((d for d in digests if "/flower-batch-runtime@" in d), None)
            )
            if reference is None:
                where = self.registry or "REGISTRY"
                raise ImageMissing(
                    f"image {data['Id'][:19]} has no copy in {where} the nodes can pull — "
                    f"push it with `flower-batch image push {where}` against the manager"
                )
        served = await self._call("image", reference, lambda api: api.inspect_distribution(reference))
        digest = reference.rsplit("@", 1)[1]
        if (served.get("Descriptor") or {}).get("digest") != digest:
            raise ImageDrift(f"the registry serves other bytes for {reference}: push the pinned image again")
        self._images[ref] = reference
        return reference

    async def _build_key(self, ref: str) -> str:
        """The pinned image's build key, from the manager's copy ("" when it has none to read)."""
        if ref not in self._keys:
            try:
                labels = (await self.image_info(ref)).labels
            except FlowerBatchError:
                labels = {}
            self._keys[ref] = labels.get(BUILD_KEY, "")
        return self._keys[ref]

    async def _check_ran(self, data: Mapping[str, Any], task: Mapping[str, Any]) -> None:
        """Raise ImageDrift when the node reported other bytes than the pinned image's."""
        env = dict(
            e.partition("=")[::2] for e in data["Spec"]["TaskTemplate"]["ContainerSpec"].get("Env") or []
        )
        expected = str(env.get(EXPECTED_KEY_ENV, ""))
        if not expected:
            return
        name = str(data["Spec"]["Name"])
        report = self.control_dir / name / REPORT
        what = _what(data["Spec"].get("Labels") or {}, name)

        def read() -> str | None:
            """The key the task reported ("" when it wrote none), or None when its folder is gone:
            the orchestrator that ran it removed the service (a `stop` waits on the same task)
            and checked the report before that."""
            try:  # the task's file (its job may write it): no link followed, a key's length read
                return read_head(report.parent, REPORT, 256).data.decode("utf-8", "replace").strip()
            except FileNotFoundError:
                return "" if report.parent.exists() else None
            except OSError:
                return ""

        reported = await anyio.to_thread.run_sync(read)
        if reported is None:
            return
        host = await self._hostname(task["NodeID"]) if task.get("NodeID") else "?"
        why = image_drift(what, host, expected, reported or None)
        if why:
            raise ImageDrift(why)

    async def check_ready(self, image: str, labels: Mapping[str, str]) -> None:
        """The image pushed and unchanged in the registry, and the home (every job folder and
        the signal files) the same storage on every node: pre-flight's cluster check."""
        await self.ensure_shared([self.control_dir], await self.resolve_image(image), labels)

    async def reservation_problem(
        self, cpus: float | None, memory: int | None, placement: list[str]
    ) -> str | None:
        """Why no node of the swarm could ever hold this reservation, or None (swarm/fit.py)."""
        nano = int(cpus * 1e9) if cpus else None
        if not nano and not memory:
            return None
        nodes = await self._call("engine", "nodes", lambda api: api.nodes())
        return unmet_reservation(nodes, nano, memory, placement)

    async def ensure_shared(self, paths: list[Path], image: str, labels: Mapping[str, str]) -> None:
        """Refuse (SharedStorageMissing) unless every node sees each path as the same storage.
        The probe carries the caller's batch and session labels (gc finds it if its orchestrator
        is killed mid-probe)."""
        if self._storage_lock is None:
            self._storage_lock = anyio.Lock()
        async with self._storage_lock:
            for path in paths:
                if any(path == root or root in path.parents for root in self._verified):
                    continue
                root = self.shared_root if self.shared_root and self.shared_root in path.parents else path
                await self._probe(root, image, labels)
                self._verified.append(root)

    async def _probe(self, root: Path, image: str, labels: Mapping[str, str]) -> None:
        # One task on every node: a `global` service with restart "none", not a `global-job`
        # (whose finished tasks and containers stay on the nodes: RESERVATIONS, moby#42789).
        probe = Probe(root)
        await anyio.to_thread.run_sync(probe.write)
        mine = {k: v for k, v in labels.items() if k in (BATCH, LEASE)}
        mine.update({MANAGED: "1", ROLE: "probe"})
        name = f"fb-probe-{probe.token}"
        mount = docker.types.Mount(str(root), str(root), type="bind")
        service = await self._once_on_every_node(name, image, probe.command(), mount, mine)
        try:
            usable, ended = await self._until_ended_everywhere(service, name, PROBE_TIMEOUT_S)
            if usable is None:
                raise SharedStorageMissing(
                    refusal(root, "?", f"the probe did not finish in {PROBE_TIMEOUT_S:.0f}s")
                )
            for node_id in usable:
                task = ended[node_id]
                host = await self._hostname(node_id)
                state, code = task_state(task)
                if state == "dead" or code != 0:
                    raise SharedStorageMissing(
                        refusal(root, host, task_error(task) or f"the probe exited {code}")
                    )
                if not await anyio.to_thread.run_sync(probe.answered, host):
                    raise SharedStorageMissing(refusal(root, host, "its marker did not arrive here"))
        finally:
            with anyio.CancelScope(shield=True):
                await self._remove_service_quietly(service)
                await anyio.to_thread.run_sync(probe.clean)

    async def _once_on_every_node(
        self,
        name: str,
        image: str,
        command: list[str],
        mount: docker.types.Mount,
        labels: Mapping[str, str],
        user: str | None = None,
    ) -> str:
        """A `global` service with restart "none": one task on every node, run once (its node's
        hostname in FB_NODE). Returns the service's id; the caller removes it."""
        spec = docker.types.TaskTemplate(
            docker.types.ContainerSpec(
                image,
                command,
                env={"FB_NODE": "{{.Node.Hostname}}"},
                user=user,
                mounts=[mount],
                labels=dict(labels),
            ),
            restart_policy=docker.types.RestartPolicy("none"),
        )
        created = await self._call(
            "container",
            name,
            lambda api: api.create_service(
                spec, name=name, mode=docker.types.ServiceMode("global"), labels=dict(labels)
            ),
        )
        return str(created["ID"])

    async def _until_ended_everywhere(
        self, service: str, name: str, timeout: float
    ) -> tuple[set[str] | None, dict[str, dict[str, Any]]]:
        """Wait until the `global` service's task ended on every ready, active node: (those nodes,
        each node's ended task); (None, what ended) when that took longer than `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            nodes = await self._call("engine", "nodes", lambda api: api.nodes())
            usable = {
                n["ID"]
                for n in nodes
                if n["Status"]["State"] == "ready" and n["Spec"].get("Availability") == "active"
            }
            tasks = await self._call("container", name, lambda api: api.tasks(filters={"service": service}))
            ended = {t["NodeID"]: t for t in tasks if task_state(t)[0] in ("exited", "dead")}
            if usable and usable <= set(ended):
                return usable, ended
            if time.monotonic() > deadline:
                return None, ended
            await anyio.sleep(self.poll_s)

    async def sweep_nodes(
        self, filters: list[LabelFilter], remove: bool
    ) -> tuple[list[NodeLeftover], list[str]]:
        """Run sweep.SCRIPT once on every node (a `global` service, restart "none", the node's
        engine socket mounted): the containers of `filters` only a node still lists. The nodes
        it could not run on (down, drained, or no runtime image to run it) are the second part."""
        if not filters:
            return [], []
        nodes = await self._call("engine", "nodes", lambda api: api.nodes())
        away = sorted(
            n["Description"]["Hostname"]
            for n in nodes
            if n["Status"]["State"] != "ready" or n["Spec"].get("Availability") != "active"
        )
        live = [str(r["ID"]) for r in await self._call("container", "list", lambda api: api.services())]
        image = await self._sweep_image()
        mine = {MANAGED: "1", ROLE: "sweep"}
        name = f"fb-sweep-{secrets.token_hex(6)}"
        mount = docker.types.Mount(sweep.ENGINE_SOCKET, sweep.ENGINE_SOCKET, type="bind")
        command = sweep.command(filters, live, remove)
        # as root: the engine socket is root's
        service = await self._once_on_every_node(name, image, command, mount, mine, user="0:0")
        try:
            usable, ended = await self._until_ended_everywhere(service, name, sweep.GRACE_S + PROBE_TIMEOUT_S)
            lines = [line async for _, line in self._log_stream(service, None)]
            found, done = sweep.read_report(lines)
            hosts = {node_id: await self._hostname(node_id) for node_id in (usable or set(ended))}
            failed = [
                f"{host} ({task_error(ended.get(node_id)) or 'it did not finish'})"
                for node_id, host in hosts.items()
                if host not in done
            ]
            return found, away + sorted(failed)
        finally:
            with anyio.CancelScope(shield=True):
                await self._remove_service_quietly(service)

    async def _sweep_image(self) -> str:
        """The runtime image the manager pushed last (the nodes have it, or pull it by digest)."""
        rows = await self._call("image", "list", lambda api: api.images())
        for row in sorted(rows, key=lambda r: int(r.get("Created") or 0), reverse=True):
            digests = list(row.get("RepoDigests") or [])
            found = (
                repo_digest_for(digests, self.registry)
                if self.registry
                else next((d for d in digests if "/flower-batch-runtime@" in d), None)
            )
            if found:
                return found
        where = self.registry or "REGISTRY"
        raise ImageMissing(
            f"no runtime image pushed to {where} on this manager to look on the nodes with — "
            f"push one with `flower-batch image push {where}`"
        )

    async def _hostname(self, node_id: str) -> str:
        if node_id not in self._hostnames:
            data = await self._call("engine", node_id, lambda api: api.inspect_node(node_id))
            self._hostnames[node_id] = data["Description"]["Hostname"]
        return self._hostnames[node_id]

    # -- tasks ------------------------------------------------------------------------------
    async def create(self, spec: ContainerSpec) -> str:
        """A service of 0 replicas for `spec` (service_spec.py maps each field); `start` runs it."""
        name = spec.name or f"fb-task-{secrets.token_hex(6)}"
        nano = int(spec.cpus * 1e9) if spec.cpus else None  # as service_spec.resources reserves it
        if nano or spec.memory:  # pre-flight asked already; the nodes may have changed since
            why = await self.reservation_problem(spec.cpus, spec.memory, spec.placement)
            if why:
                raise ReservationUnmet(f"no node of the swarm can run {_what(spec.labels, name)}: {why}")
        image = await self.resolve_image(spec.image)
        if spec.network in self._to_warm:
            await self._warm(spec.network, self._to_warm.pop(spec.network), image)
        binds = [Path(m.source) for m in spec.mounts if m.kind == "bind"]
        await self.ensure_shared([self.control_dir, *binds], image, spec.labels)
        control = self.control_dir / name
        await anyio.to_thread.run_sync(lambda: _fresh_control(control))
        made: list[str] = []
        try:
            # the task reports the key its node ran and refuses any other (drift)
            env = task_env(spec, await self._build_key(spec.image))
            refs = [await self._secret(spec, name, key, value, made) for key, value in spec.secrets.items()]
            template = task_template(spec, image, env, control, refs)
            options = service_options(spec, name)
            created = await self._call("container", name, lambda api: api.create_service(template, **options))
            return str(created["ID"])
        except BaseException:
            with anyio.CancelScope(shield=True):
                for sid in made:
                    await self._quietly(self.remove_secret(sid))
            raise

    async def _secret(
        self, spec: ContainerSpec, service: str, key: str, value: str, made: list[str]
    ) -> docker.types.SecretReference:
        """An engine secret holding `value` for `service`'s task (its id added to `made`)."""
        name = secret_name(service, key, secrets.token_hex(4))
        created = await self._call(
            "engine",
            name,
            lambda api: api.create_secret(name, value.encode(), labels={**spec.labels, SERVICE: service}),
        )
        made.append(str(created["ID"]))
        return secret_reference(made[-1], name, key, spec.user)

    async def _update(self, service: str, change: Callable[[dict[str, Any]], bool]) -> None:
        """Apply `change` to the service's spec (it returns False when there is nothing to do)."""

        def update(api: Any) -> None:
            data = api.inspect_service(service)
            spec = data["Spec"]
            if not change(spec):
                return
            resp = api._post_json(
                api._url("/services/{0}/update", service),
                data=spec,
                params={"version": data["Version"]["Index"]},
            )
            api._raise_for_status(resp)

        await self._call("container", service, update)

    async def start(self, container_id: str) -> None:
        def ask_for_one_task(spec: dict[str, Any]) -> bool:
            mode = spec["Mode"]
            if mode["Replicated"].get("Replicas"):
                return False
            mode["Replicated"] = {"Replicas": 1}
            return True

        await self._update(container_id, ask_for_one_task)

    async def _service_and_task(self, service: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        data, tasks = await self._service_and_tasks(service)
        return data, newest_task(tasks)

    async def _service_and_tasks(self, service: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        def read(api: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            data = api.inspect_service(service)
            return data, list(api.tasks(filters={"service": data["ID"]}))

        return await self._call("container", service, read)

    async def inspect(self, container_id: str) -> ContainerInfo:
        data, task = await self._service_and_task(container_id)
        return await self._info(data, task)

    async def _info(self, data: Mapping[str, Any], task: Mapping[str, Any] | None) -> ContainerInfo:
        state, code = task_state(task)
        node = await self._hostname(task["NodeID"]) if task and task.get("NodeID") else None
        return ContainerInfo(
            id=data["ID"],
            name=data["Spec"]["Name"],
            image=data["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"],
            state=state,
            exit_code=code,
            labels=dict(data["Spec"].get("Labels") or {}),
            node=node,
        )

    async def wait(self, container_id: str, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        resubmits = 0
        # The task this wait is about: the newest when it began. Swarm replaces a restarting
        # service's (the gateway's) dead task at once, in the same step that ends it, so the
        # newest task is already the next life: the end of the watched one is the answer.
        watched: str | None = None
        while True:
            data, tasks = await self._service_and_tasks(container_id)
            task = newest_task(tasks)
            watched = watched or (str(task["ID"]) if task else None)
            ended = next((t for t in tasks if t["ID"] == watched and t is not task), None)
            if ended is not None and task_state(ended)[0] in ("exited", "dead"):
                task = ended
            state, code = task_state(task)
            if state == "exited":
                assert code is not None and task is not None
                await self._check_ran(data, task)
                return code
            if (
                state == "dead"
                and REJECTED_BY_ENFORCER in task_error(task)
                and not ever_ran(task)
                and resubmits < RESUBMITS
            ):
                resubmits += 1
                await self._resubmit(container_id)
                watched = None  # the resubmitted task is the one to wait for
                await anyio.sleep(self.poll_s)
                continue
            if state == "dead":
                await self._raise_not_run(data, task)
            if task and state == "running" and await self._node_down(task["NodeID"]):
                host = await self._hostname(task["NodeID"])
                raise NodeLost(
                    f"node {host} was lost while {data['Spec']['Name']} ran on it "
                    "(Swarm marks it down); run the job again to pick it up"
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"task {data['Spec']['Name']} still running after {timeout:g}s")
            await anyio.sleep(
                self.poll_s if deadline is None else max(0.0, min(self.poll_s, deadline - time.monotonic()))
            )

    async def _resubmit(self, service: str) -> None:
        """A new task for a job whose task never ran (a forced update fills its dead slot again)."""

        def force(spec: dict[str, Any]) -> bool:
            spec["TaskTemplate"]["ForceUpdate"] = int(spec["TaskTemplate"].get("ForceUpdate") or 0) + 1
            return True

        await self._update(service, force)

    async def _raise_not_run(self, data: Mapping[str, Any], task: Mapping[str, Any] | None) -> None:
        why = task_error(task)
        host = await self._hostname(task["NodeID"]) if task and task.get("NodeID") else "no node"
        name = data["Spec"]["Name"]
        image = data["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"]
        if "image" in why.lower() or "manifest" in why.lower() or "digest" in why.lower():
            raise ImageDrift(f"node {host} cannot run {image} for {name}: {why}")
        raise BackendError(f"Swarm did not run {name} on {host}: {why or 'no reason given'}")

    async def _node_down(self, node_id: str) -> bool:
        data = await self._call("engine", node_id, lambda api: api.inspect_node(node_id))
        return bool(data["Status"]["State"] == "down")

    async def signal(self, container_id: str, sig: int | str) -> None:
        """Appends the signal to the task's control file. A task on its node that the manager does
        not call running yet gets it too: its process may already run (the manager hears of it
        from the node's agent, later under load), and refusing made `stop` return at once while
        it ran on. The supervisor reads the file from its first line, so a signal written before
        it starts is delivered as it starts."""
        number = signal_number(sig)
        data, task = await self._service_and_task(container_id)
        name = data["Spec"]["Name"]
        if task_state(task)[0] != "running" and not on_its_node(task):
            raise ContainerNotRunning(f"container {name} is not running")
        control = self.control_dir / name / "signal"

        def append() -> None:
            with control.open("a") as f:
                f.write(f"{number}\n")

        try:
            await anyio.to_thread.run_sync(append)
        except FileNotFoundError:
            # Not a task under task_signals (the warm network keeper, a probe): only removing
            # its service stops it.
            raise ContainerNotRunning(f"{name} takes no signals (it has no control file)") from None

    async def stop(self, container_id: str, grace_s: float = 10.0) -> None:
        """As Docker's: SIGTERM, then SIGKILL after `grace_s`. Unlike a local stop it takes several
        calls, so a task whose owner removes it once it ended (the runner does) counts as stopped."""
        try:
            await self.signal(container_id, "SIGTERM")
            try:
                await self.wait(container_id, timeout=grace_s)
                return
            except TimeoutError:
                pass
            await self.signal(container_id, "SIGKILL")
            await self.wait(container_id, timeout=30)
        except (ContainerNotRunning, ContainerNotFound):
            return
        except TimeoutError:
            if (await self.inspect(container_id)).state == "created":
                return  # still not started on its node: it gets both signals the moment it starts
            raise BackendError(f"task {container_id[:12]} did not stop after a kill") from None

    async def logs(self, container_id: str, follow: bool = False) -> AsyncIterator[str]:
        """The service's log, line by line as it streams in (a long job's log is never held
        whole). Followed: Swarm's followed service logs never end, so each poll asks only for the
        lines since the last one seen (by their timestamps) until the task has ended."""
        after: LogStamp | None = None
        while True:
            state = (await self.inspect(container_id)).state if follow else None
            async for stamp, line in self._log_stream(container_id, after):
                after = stamp or after
                yield line
            if not follow or state in ("exited", "dead"):
                return
            await anyio.sleep(self.poll_s)

    async def _log_stream(
        self, service: str, after: LogStamp | None
    ) -> AsyncIterator[tuple[LogStamp | None, str]]:
        """(timestamp, line) of the service's log lines after `after`, read in batches of chunks."""
        since = int(after.seconds) if after is not None else 0

        def open_stream(api: Any) -> Iterator[bytes]:
            return iter(
                api.service_logs(
                    service, stdout=True, stderr=True, follow=False, timestamps=True, since=since
                )
            )

        chunks = await self._call("container", service, open_stream)
        lines = LineSplitter()
        while True:  # each batch through _call: an engine error mid-stream is ours, not docker's
            batch = await self._call(
                "container", service, lambda api: list(itertools.islice(chunks, LOG_BATCH))
            )
            for raw in lines.feed(b"".join(batch)) if batch else lines.rest():
                stamp, line = split_stamp(raw)
                if after is None or stamp is None or stamp > after:
                    yield stamp, line
            if not batch:
                return

    async def remove(self, container_id: str, force: bool = True) -> None:
        data, task = await self._service_and_task(container_id)
        name = data["Spec"]["Name"]
        signalled = (self.control_dir / name / "signal").exists()  # not the warm keeper, a probe
        if task_state(task)[0] == "running" and _is_job(data["Spec"]) and signalled:
            # Swarm would stop it with SIGTERM and a 10 s grace: kill it first, as a forced
            # local remove does.
            await self._quietly(self.signal(container_id, "SIGKILL"))
            with anyio.move_on_after(15):
                await self._quietly(self.wait(container_id))
        await self._call("container", container_id, lambda api: api.remove_service(data["ID"]))
        for secret in await self.list_secrets_by_label({SERVICE: name}):
            await self._quietly(self.remove_secret(secret.id))
        await anyio.to_thread.run_sync(lambda: _drop_control(self.control_dir / name))

    async def _remove_service_quietly(self, service: str) -> None:
        await self._quietly(self._call("container", service, lambda api: api.remove_service(service)))

    async def list_by_label(self, labels: LabelFilter) -> list[ContainerInfo]:
        rows = await self._call("container", "list", lambda api: api.services(filters=label_filters(labels)))
        infos = []
        for row in rows:
            try:
                tasks = await self._call(
                    "container", row["ID"], lambda api, sid=row["ID"]: api.tasks(filters={"service": sid})
                )
            except FlowerBatchError:
                continue  # removed between the two calls
            infos.append(await self._info(row, newest_task(tasks)))
        return infos

    # -- networks ---------------------------------------------------------------------------
    async def create_network(self, name: str, labels: Mapping[str, str], internal: bool = False) -> str:
        created = await self._call(
            "network",
            name,
            lambda api: api.create_network(
                name,
                driver="overlay",
                attachable=True,
                scope="swarm",
                labels=dict(labels),
                internal=internal,
                check_duplicate=True,
            ),
        )
        if internal and self.warm_networks:
            self._to_warm[name] = dict(labels)  # by the first task that joins it (its image)
        return str(created["Id"])

    async def _warm(self, network: str, labels: Mapping[str, str], image: str) -> None:
        """Keep the jobs' overlay network up on every node while it lives: a `global` service of
        one sleeping, confined process on it. A node sets an overlay up (its namespace, bridge,
        VXLAN and load-balancer endpoint) for the first task that joins it and tears it down
        after the last one leaves; without this, the first jobs on each node pay that setup
        between being scheduled and running, all at once, as a matrix starts."""
        mine = {**labels, ROLE: "warm"}
        spec = docker.types.TaskTemplate(
            docker.types.ContainerSpec(
                image,
                ["sleep", "infinity"],
                user="65534:65534",
                labels=mine,
                cap_drop=["ALL"],
                read_only=True,
                # under an init a SIGTERM ends it at once (a bare PID 1 ignores it, and Swarm
                # would wait out its grace before the network could go)
                init=True,
                stop_grace_period=1_000_000_000,
            ),
            restart_policy=docker.types.RestartPolicy("none"),
            networks=[docker.types.NetworkAttachmentConfig(network)],
        )
        name = _warm_name(network)
        await self._call(
            "container",
            name,
            lambda api: api.create_service(
                spec,
                name=name,
                mode=docker.types.ServiceMode("global"),
                labels=mine,
                endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"),
            ),
        )

    async def connect_network(
        self, network: str, container_id: str, aliases: list[str] | None = None
    ) -> None:
        def attach(spec: dict[str, Any]) -> bool:
            nets = spec["TaskTemplate"].setdefault("Networks", [])
            nets.append({"Target": network, **({"Aliases": list(aliases)} if aliases else {})})
            return True

        await self._update(container_id, attach)

    async def remove_network(self, name_or_id: str) -> None:
        try:
            data = await self._call("network", name_or_id, lambda api: api.inspect_network(name_or_id))
            await self._remove_service_quietly(_warm_name(str(data["Name"])))
        except FlowerBatchError:
            pass  # no such network: the removal below says so
        # A removed service's tasks leave the overlay a few seconds later: retry while it is in use.
        deadline = time.monotonic() + 60
        while True:
            try:
                await self._call("network", name_or_id, lambda api: api.remove_network(name_or_id))
                return
            except BackendError as exc:
                if (
                    "in use" not in str(exc)
                    and "active endpoints" not in str(exc)
                    or time.monotonic() > deadline
                ):
                    raise
            await anyio.sleep(self.poll_s)

    async def list_networks_by_label(self, labels: LabelFilter) -> list[NetworkInfo]:
        rows = await self._call("network", "list", lambda api: api.networks(filters=label_filters(labels)))
        return [NetworkInfo(id=r["Id"], name=r["Name"], labels=dict(r.get("Labels") or {})) for r in rows]

    # -- volumes: node-local on Swarm --------------------------------------------------------
    async def create_volume(self, name: str, labels: Mapping[str, str]) -> str:
        raise BackendError(
            f"volume {name}: named volumes are node-local on Swarm — keep data in the job "
            "folder on shared storage instead"
        )

    async def remove_volume(self, name: str, force: bool = False) -> None:
        await self._call("volume", name, lambda api: api.remove_volume(name, force=force))

    async def list_volumes_by_label(self, labels: LabelFilter) -> list[VolumeInfo]:
        found = await self._call("volume", "list", lambda api: api.volumes(filters=label_filters(labels)))
        return [
            VolumeInfo(name=v["Name"], labels=dict(v.get("Labels") or {})) for v in found.get("Volumes") or []
        ]

    # -- secrets ----------------------------------------------------------------------------
    async def list_secrets_by_label(self, labels: LabelFilter) -> list[SecretInfo]:
        rows = await self._call("engine", "secrets", lambda api: api.secrets(filters=label_filters(labels)))
        return [
            SecretInfo(id=r["ID"], name=r["Spec"]["Name"], labels=dict(r["Spec"].get("Labels") or {}))
            for r in rows
        ]

    async def remove_secret(self, secret_id: str) -> None:
        await self._call("engine", secret_id, lambda api: api.remove_secret(secret_id))

    # -- images -----------------------------------------------------------------------------
    async def image_info(self, ref: str) -> ImageInfo:
        data = await self._call("image", ref, lambda api: api.inspect_image(ref))
        return image_info_from_inspect(data)

    async def nodes(self) -> list[dict[str, Any]]:
        """The cluster's nodes as the manager reports them (hostname, state, availability, labels)."""
        rows = await self._call("engine", "nodes", lambda api: api.nodes())
        return [
            {
                "id": n["ID"],
                "hostname": n["Description"]["Hostname"],
                "state": n["Status"]["State"],
                "availability": n["Spec"].get("Availability"),
                "labels": dict(n["Spec"].get("Labels") or {}),
            }
            for n in rows
        ]

    async def _quietly(self, awaitable: Any) -> None:
        try:
            await awaitable
        except FlowerBatchError:
            pass

    async def aclose(self) -> None:
        self._storage_lock = None
        await anyio.to_thread.run_sync(self._conn.close)


def _warm_name(network: str) -> str:
    return f"{network[:58]}-warm"


def _what(labels: Mapping[str, str], name: str) -> str:
    """A task as the user knows it: "job J", "the check of job J", else its service name."""
    role, job = labels.get(ROLE), labels.get(JOB)
    return f"the check of job {job}" if role == "check" and job else f"job {job}" if job else name


def _is_job(spec: Mapping[str, Any]) -> bool:
    """A one-run task (not the gateway that Swarm restarts)."""
    return bool((spec["TaskTemplate"].get("RestartPolicy") or {}).get("Condition") == "none")


def _fresh_control(control: Path) -> None:
    control.mkdir(parents=True, exist_ok=True)
    (control / "signal").write_text("")
    # The task may run as any user (`user`): it can write this file, not make one in the folder.
    report = control / REPORT
    report.write_text("")
    report.chmod(0o666)


def _drop_control(control: Path) -> None:
    (control / "signal").unlink(missing_ok=True)
    (control / REPORT).unlink(missing_ok=True)
    try:
        control.rmdir()
    except OSError:
        pass
