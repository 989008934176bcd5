"""gc's node sweep (backend/swarm/sweep.py) without a cluster: what each node is told, and how
its report is read back (a node's log is not trusted to be well formed)."""

from __future__ import annotations

import json

from flower_batch.backend.swarm import sweep


def test_each_node_is_told_the_labels_and_the_services_the_manager_still_has() -> None:
    cmd = sweep.command([{"m": "1", "lease": "a"}, {"m": "1", "lease": "b", "k": None}], {"s2", "s1"}, True)
    assert cmd[:3] == ["/opt/flower/bin/python", "-c", sweep.SCRIPT]
    job = json.loads(cmd[3])
    assert job["filters"] == [["m=1", "lease=a"], ["m=1", "lease=b", "k"]]
    assert job["live_services"] == ["s1", "s2"] and job["remove"] is True
    compile(sweep.SCRIPT, "sweep", "exec")  # what the nodes run is valid Python


def test_the_report_keeps_each_container_once_and_the_nodes_that_finished() -> None:
    row = {"node": "w1", "id": "c1", "name": "fb-x", "labels": {"role": "job"}, "removed": True}
    lines = [
        json.dumps(row),
        json.dumps(row),  # a log read twice over
        "not json",
        json.dumps({"node": "w2"}),  # a row missing its fields
        json.dumps([1, 2]),
        f"{sweep.DONE} w1",
        f"{sweep.DONE} w2",
    ]
    found, done = sweep.read_report(lines)
    assert [(f.node, f.id, f.name, f.labels, f.removed) for f in found] == [
        ("w1", "c1", "fb-x", {"role": "job"}, True)
    ]
    assert done == {"w1", "w2"}
