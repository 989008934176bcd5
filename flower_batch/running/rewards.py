"""A verifier's reward, read as hostile input: the hidden tests ran on the state the agent left, so
what they wrote is the job's, not ours.

`/logs/verifier/reward.txt` holds one number; else `reward.json` an object whose "reward" is a
number, its other numeric keys kept as the reward's detail. Either is at most REWARD_LIMIT bytes, a
regular file reached through no symlink, and every number finite (text, NaN, inf, a 10 MB file:
RewardUnreadable, one line, and the job is `error`). Any finite number is taken, negative too:
the task says what its scale is.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from flower_batch.errors import RewardUnreadable
from flower_batch.jobmodel.grading import VERIFIER_LOGS, Reward
from flower_batch.untrusted_files import read_head

REWARD_LIMIT = 4096
"""Bytes: a number, or a small object of named numbers."""
MAX_DETAIL = 64
"""reward.json's named numbers kept beside the reward."""
TEXT, JSON = "reward.txt", "reward.json"
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def read_reward(logs: Path) -> Reward:
    """The reward in `logs` (the host folder mounted at VERIFIER_LOGS): reward.txt, else reward.json."""
    for name, parse in ((TEXT, _from_text), (JSON, _from_json)):
        body = _read(logs, name)
        if body is not None:
            return parse(body, f"{VERIFIER_LOGS}/{name}")
    raise RewardUnreadable(f"the tests wrote no reward ({VERIFIER_LOGS}/{TEXT} or {JSON})")


def _read(logs: Path, name: str) -> str | None:
    where = f"{VERIFIER_LOGS}/{name}"
    try:
        got = read_head(logs, name, REWARD_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink, a FIFO, a folder: never followed or read
        raise RewardUnreadable(f"{where} is not read: {exc.strerror or exc}") from None
    if got.cut:
        raise RewardUnreadable(f"{where} is {got.size} bytes, over the {REWARD_LIMIT} a reward may take")
    try:
        return got.data.decode("utf-8")
    except UnicodeDecodeError:
        raise RewardUnreadable(f"{where} is not UTF-8 text") from None


def _from_text(body: str, where: str) -> Reward:
    text = body.strip()
    if not _NUMBER.fullmatch(text):
        raise RewardUnreadable(f"{where} holds {_shown(text)}, not a number")
    return Reward(_finite(float(text), where))


def _from_json(body: str, where: str) -> Reward:
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except ValueError as exc:
        raise RewardUnreadable(f"{where} is not JSON of finite numbers: {exc}") from None
    if not isinstance(data, dict) or not _is_number(data.get("reward")):
        raise RewardUnreadable(f'{where} has no number "reward" (expected {{"reward": 0.75, ...}})')
    detail: dict[str, float] = {}
    for key, value in data.items():
        if key != "reward" and _is_number(value) and len(detail) < MAX_DETAIL:
            detail[str(key)[:64]] = _finite(float(value), f"{where}'s {key!r}")
    return Reward(_finite(float(data["reward"]), where), detail)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: float, where: str) -> float:
    if not math.isfinite(value):  # 1e999 parses as inf
        raise RewardUnreadable(f"{where} is {value}, not a finite number")
    return value


def _shown(text: str) -> str:
    one = text.replace("\n", "\\n")
    return repr(one if len(one) <= 40 else one[:37] + "...")
