"""A gateway's Docker names: unique per batch, session and suffix, and within Docker's 63 characters."""

from __future__ import annotations

from pathlib import Path

from flower_batch.jobmodel.spec import GatewaySpec


def gateway_name(batch: str, session: str, suffix: str) -> str:
    from flower_batch.gateway.host.sidecar import GatewaySidecar
    from tests.fake_backend import FakeBackend

    gw = GatewaySidecar(
        FakeBackend(),
        batch=batch,
        lease=session,
        suffix=suffix,
        image_id="sha256:x",
        batch_dir=Path("/nonexistent"),
        gateway=GatewaySpec(mode="replay"),
    )
    return gw.name


def test_gateway_names_stay_unique_and_short_for_long_batch_names() -> None:
    long_a = "nightly-evaluation-of-the-refactoring-agents-" + "x" * 40
    long_b = long_a + "-v2"
    names = {
        gateway_name(batch, session, suffix)
        for batch in (long_a, long_b, "demo")
        for session in ("0123abcd", "89ef4567")
        for suffix in ("", "-g0", "-g1", "-g12")
    }
    assert len(names) == 3 * 2 * 4
    assert all(len(n + "-gateway") <= 63 and len(n + "-out") <= 63 for n in names)
    assert all(n.startswith("fb-") for n in names)
    assert len(gateway_name("demo", "s" * 80, "-g3") + "-gateway") <= 63
