"""The cost of one model call, priced the way the gateway metered it.

The gateway prices each response with flower_batch/gateway/prices.py; a model the table does not
know (the offline scripted model) is priced as the model the request asked for, and the meter
says which one in each line's `priced_as`. So a call of the transcript is priced with the same
table and the same substitution, and the calls of a job add up to what its meter counted.
Replay answers cost nothing (`free` in the meter).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flower_batch.gateway.metering import METER_LOG
from flower_batch.gateway.prices import cost_usd, price_for
from flower_batch.layout import JobDir
from flower_batch.untrusted_files import read_head

METER_BYTES = 32 * 1024 * 1024  # a meter line is ~300 bytes: 100,000 calls fit


@dataclass
class Pricer:
    """Prices of one job's calls: the answering model -> the model the gateway priced it as."""

    priced_as: dict[str, str] = field(default_factory=dict)
    free: bool = False

    @classmethod
    def of_job(cls, jd: JobDir) -> Pricer:
        """From the job's logs/meter.jsonl (written by the gateway); none for a job run elsewhere."""
        try:
            read = read_head(jd.root, f"logs/{METER_LOG}", METER_BYTES)
        except OSError:
            return cls()
        pricer = cls()
        for line in read.data.decode("utf-8", "replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn last line
            if not isinstance(entry, dict) or entry.get("kind") != "usage":
                continue
            pricer.free = pricer.free or bool(entry.get("free"))
            model, as_ = entry.get("model"), entry.get("priced_as")
            if isinstance(model, str) and isinstance(as_, str) and as_:
                pricer.priced_as.setdefault(model, as_)
        return pricer

    def model_for(self, model: str) -> str | None:
        """The model whose price applies, or None when nothing prices it."""
        if price_for(model):
            return model
        return self.priced_as.get(model)

    def cost(self, model: str, usage: Mapping[str, Any]) -> float | None:
        if self.free:
            return 0.0
        as_ = self.model_for(model)
        cost = cost_usd(as_, usage) if as_ else None
        return None if cost is None else round(cost, 8)
