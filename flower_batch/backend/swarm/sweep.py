"""Looking on every node for containers the manager no longer accounts for (what `gc` sweeps).

Swarm removes a service's containers itself, but not always: a `global-job`'s finished tasks
stay (RESERVATIONS in backend.py), a node cut off while its service was removed keeps its
containers, and anything run on a node by hand is out of the manager's sight. Only the node's
own engine lists those, and the manager is all `gc` can reach. So a `global` service (restart
"none") runs SCRIPT once on every node, as root with the node's engine socket mounted: it lists
the containers carrying the labels asked for, and (removing) force-removes them.

A container of a service the manager still lists is left to the manager (`gc` removes the
service, and Swarm its containers). One of a service already gone is given GRACE_S for the
node's agent to remove it before the sweep does. The script is stdlib-only Python passed as
`python -c`, so any runtime image version on the node can run it; each node prints one JSON
line per container and a last line saying it finished, read back through the service's log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from flower_batch.backend.base import NodeLeftover
from flower_batch.layout import FLOWER_PYTHON

ENGINE_SOCKET = "/var/run/docker.sock"
GRACE_S = 20.0
DONE = "fb-sweep-done"
SERVICE_ID = "com.docker.swarm.service.id"  # what Swarm labels each task's container with

SCRIPT = r"""
import http.client, json, os, socket, sys, time, urllib.parse

class Engine(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(60)
        self.sock.connect(SOCKET)

def call(method, path):
    conn = Engine("localhost", timeout=60)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.read(1 << 22)
    finally:
        conn.close()

job = json.loads(sys.argv[1])
SOCKET, node, me = job["socket"], os.environ.get("FB_NODE", "?"), os.environ.get("HOSTNAME", "")

def matching():
    found = {}
    for labels in job["filters"]:
        query = urllib.parse.quote(json.dumps({"label": labels}))
        status, body = call("GET", "/containers/json?all=1&filters=" + query)
        if status != 200:
            raise SystemExit("listing containers: engine answered %d" % status)
        for c in json.loads(body):
            service = (c.get("Labels") or {}).get(job["service_label"])
            if (me and c["Id"].startswith(me)) or service in job["live_services"]:
                continue
            found[c["Id"]] = c
    return found

found = matching()
deadline = time.monotonic() + job["grace_s"]
while job["remove"] and time.monotonic() < deadline and any(
    job["service_label"] in (c.get("Labels") or {}) for c in found.values()
):
    time.sleep(1)  # a removed service's containers: the node's agent is removing them
    found = matching()
for c in found.values():
    row = {"node": node, "id": c["Id"], "name": (c.get("Names") or ["/?"])[0].lstrip("/"),
           "labels": c.get("Labels") or {}, "removed": False}
    if job["remove"]:
        status, _ = call("DELETE", "/containers/%s?force=1&v=1" % c["Id"])
        row["removed"] = status in (204, 404)
    print(json.dumps(row), flush=True)
print(job["done"], node, flush=True)
"""


def command(
    filters: Sequence[Mapping[str, str | None]], live_services: Iterable[str], remove: bool
) -> list[str]:
    """What each node runs: SCRIPT, told which labels to look for (any one filter matching) and
    which services the manager still has."""
    job = {
        "socket": ENGINE_SOCKET,
        "filters": [[k if v is None else f"{k}={v}" for k, v in f.items()] for f in filters],
        "live_services": sorted(live_services),
        "service_label": SERVICE_ID,
        "remove": remove,
        "grace_s": GRACE_S,
        "done": DONE,
    }
    return [FLOWER_PYTHON, "-c", SCRIPT, json.dumps(job)]


def read_report(lines: Iterable[str]) -> tuple[list[NodeLeftover], set[str]]:
    """The containers the nodes reported and the nodes that finished, from the sweep's log lines
    (anything else in the log is ignored: a node's output is not trusted to be well formed)."""
    found: dict[tuple[str, str], NodeLeftover] = {}
    done: set[str] = set()
    for line in lines:
        if line.startswith(DONE + " "):
            done.add(line[len(DONE) + 1 :].strip())
            continue
        try:
            row = json.loads(line)
            item = NodeLeftover(
                node=str(row["node"]),
                id=str(row["id"]),
                name=str(row["name"]),
                labels={str(k): str(v) for k, v in dict(row["labels"]).items()},
                removed=bool(row["removed"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        found[(item.node, item.id)] = item
    return list(found.values()), done
