"""Hidden tests and rewards: how a job is graded when its task brings a verifier.

A `Verifier` is a folder of tests (a Harbor task's `tests/`) that never enters the job's container
while the agent works. After the workflow ends, it is copied to /tests and `bash /tests/test.sh`
runs on the job's final state, with its own timeout and env; it writes its reward to
/logs/verifier/reward.txt (one number) or reward.json (`{"reward": 0.75, ...}`). A `Reward` is that
file read as hostile input: bounded, finite numbers only. The job passes when its reward reaches
the verifier's `pass_reward`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PASS_REWARD = 1.0
TESTS_PATH = "/tests"
VERIFIER_LOGS = "/logs/verifier"


@dataclass(frozen=True)
class Verifier:
    """The hidden tests of a task: `folder` (absolute host path) holds `test.sh`."""

    folder: Path
    folder_hash: str
    timeout_s: float = 600.0
    env: Mapping[str, str] = field(default_factory=dict)
    pass_reward: float = DEFAULT_PASS_REWARD

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "folder_hash": self.folder_hash,
            "timeout_s": self.timeout_s,
            "env": dict(self.env),
            "pass_reward": self.pass_reward,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verifier:
        return cls(
            folder=Path(data["folder"]),
            folder_hash=str(data["folder_hash"]),
            timeout_s=float(data.get("timeout_s", 600.0)),
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
            pass_reward=float(data.get("pass_reward", DEFAULT_PASS_REWARD)),
        )


@dataclass(frozen=True)
class Reward:
    """What a verifier wrote: the reward and reward.json's other named numbers."""

    value: float
    detail: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "detail": dict(self.detail)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reward:
        return cls(
            value=float(data["value"]),
            detail={str(k): float(v) for k, v in (data.get("detail") or {}).items()},
        )
