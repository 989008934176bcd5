"""The long job of the soak bench (bench/soak_e2e.py) and of the supervised-gateway Docker tests:
one workflow step that loops a tool call, with a scripted model whose every rule is decided by
what the workspace says, never by counters of the model's own (a restarted gateway forgets
those, a workspace does not).

The job runs `sh count.sh` over and over: the script bumps `.count` and prints `count=N`, and
`LEG-DONE` every `leg` counts, where the step ends (one leg per run or wake). At count `handoff_at`
it prints `HANDOFF-NOW`: the model's answer to that reports a context just past the handoff
threshold of the job's window (`FLOWER_WINDOW`, given to the job with `--env`; a small window
makes a small threshold), so flower's runtime interrupts, asks the session for its handoff
document and continues in a fresh successor session.

Every rule reports its own usage, so the cost a job should have been metered can be computed
from the scenario and the gateway's request log alone (`expected_usage`), independently of the
meter being checked.
"""

from __future__ import annotations

import itertools
import json
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLOW = '''
"""The soak job: one step that counts with count.sh until it says LEG-DONE."""
from flower import AgentSpec, Step, Workflow

COUNTER = AgentSpec("counter", instructions="ROLE: soak counter.", allowed_tools=["Bash"],
                    permission_mode="bypassPermissions", max_turns=100000)


def main():
    return Workflow([Step("count", COUNTER, lambda ctx: ctx.get("prompt") or PROMPT)], name="soak")


PROMPT = "COUNT: run `sh count.sh` again and again until it prints LEG-DONE."
'''
PROMPT = "COUNT: run `sh count.sh` again and again until it prints LEG-DONE."
WAKE_WORDS = "COUNT on: run `sh count.sh` again and again until it prints LEG-DONE."
DEFAULT_WINDOW = 200_000


def handoff_context(window: int | None) -> int:
    """A context a little past the handoff threshold of `window` (flower.context.handoff's numbers)."""
    from flower.context.handoff import Handoff

    return Handoff(window=window or DEFAULT_WINDOW).at + 2000


BUILTIN_USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}
TOKEN_KEYS = tuple(BUILTIN_USAGE)
COUNT = {"tool_use": {"name": "Bash", "input": {"command": "sh count.sh", "description": "count once more"}}}
HANDOFF_DOC = (
    "## 现在在做什么\\n用 count.sh 计数，每次加一。\\n\\n## 已经定下的\\n计数在 .count 里。\\n\\n"
    "## 走不通的路\\n无。\\n\\n## 下一步\\n继续运行 sh count.sh，直到它打印 LEG-DONE。\\n\\n## 现场\\n.count\\n"
)


def count_script(leg: int, handoff_at: int | None) -> str:
    handoff = f'[ "$n" -eq {handoff_at} ] && echo "HANDOFF-NOW"\n' if handoff_at else ""
    return (
        "#!/bin/sh\n"
        "n=$(( $(cat .count 2>/dev/null || echo 0) + 1 ))\n"
        'echo "$n" > .count\n'
        'echo "count=$n"\n'
        f'[ $((n % {leg})) -eq 0 ] && echo "LEG-DONE"\n'
        f"{handoff}"
        "exit 0\n"
    )


def scenario(*, delay_s: float = 0.0, window: int | None = None) -> str:
    """The scenario TOML: first match wins, so the specific tool results come before `count`."""
    count = json.dumps(COUNT["tool_use"])
    rules = [
        (
            "handoff: document",
            'last_user_contains = "上下文快满了"',
            f'reply = [{{ text = "{HANDOFF_DOC}" }}]',
            {"input_tokens": 2000, "output_tokens": 300},
        ),
        (
            "leg done",
            'last_is_tool_result = true\ntool_result_contains = "LEG-DONE"',
            'reply = [{ text = "LEG-DONE: the counter reached its mark." }]',
            {"input_tokens": 1500, "output_tokens": 20},
        ),
        (
            "context full",
            'last_is_tool_result = true\ntool_result_contains = "HANDOFF-NOW"',
            f"reply = [{{ tool_use = {_toml_inline(count)} }}]",
            {"input_tokens": handoff_context(window), "output_tokens": 40},
        ),
        (
            "count",
            'last_is_tool_result = true\ntool_result_contains = "count="',
            f"reply = [{{ tool_use = {_toml_inline(count)} }}]",
            {"input_tokens": 1200, "output_tokens": 40, "cache_read_input_tokens": 800},
        ),
        (
            "start",
            "last_is_tool_result = false",
            f'reply = [{{ text = "Counting." }}, {{ tool_use = {_toml_inline(count)} }}]',
            {"input_tokens": 1000, "output_tokens": 60},
        ),
    ]
    parts = [
        'description = "soak: a long job that loops a Bash tool call (bench/soakjob.py)"\n',
        f"[defaults]\ndelay_s = {delay_s}\n",
    ]
    for name, when, reply, usage in rules:
        usage_toml = ", ".join(f"{k} = {v}" for k, v in usage.items())
        parts.append(f'[[rules]]\nname = "{name}"\n{when}\n{reply}\nusage = {{ {usage_toml} }}\n')
    return "\n".join(parts)


def _toml_inline(json_text: str) -> str:
    """A JSON object of strings as a TOML inline table (TOML basic strings are JSON strings)."""
    data = json.loads(json_text)

    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return json.dumps(v, ensure_ascii=False)

    return value(data)


def write_project(
    root: Path, *, leg: int, handoff_at: int | None, delay_s: float = 0.0, window: int | None = None
) -> dict[str, Path]:
    """The soak project under `root`: workspace (count.sh), flows (soak_flows.py), scenario."""
    ws = root / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "count.sh").write_text(count_script(leg, handoff_at))
    (ws / "COUNT.md").write_text("Run `sh count.sh` until it prints LEG-DONE.\n")
    flows = root / "soak_flows.py"
    flows.write_text(FLOW)
    scen = root / "soak.toml"
    scen.write_text(scenario(delay_s=delay_s, window=window))
    return {"workspace": ws, "flows": flows, "scenario": scen}


# -- what the job should have been metered -----------------------------------------------------
@dataclass
class Expected:
    """What the meter of a job must hold: every complete answer once (`tokens`, `cost_usd`,
    `complete`), plus each answer its client asked for again (`cut_starts`, `cut_fulls`) once at
    most: at its first event's usage when the gateway's death cut it (the meter counts it
    `incomplete`), or whole when the answer was done but the client had given up on it first
    (its own request timeout, as a loaded machine can make the CLI's API_TIMEOUT_MS hit)."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KEYS, 0))
    cost_usd: float = 0.0
    complete: int = 0
    cut_starts: list[tuple[dict[str, int], float]] = field(default_factory=list)  # (usage, cost)
    cut_fulls: list[tuple[dict[str, int], float]] = field(default_factory=list)  # the same answers, whole
    rule_starts: list[tuple[dict[str, int], float]] = field(default_factory=list)  # each rule's first event
    # (rule, its first event's usage less its whole usage, the same for the cost): a complete
    # answer metered at its start only (see accepts)
    rule_cuts: list[tuple[str, dict[str, int], float]] = field(default_factory=list)
    by_rule: dict[str, int] = field(default_factory=dict)

    def add_complete(self, rule: str, usage: Mapping[str, Any], model: str) -> None:
        """One complete answer of `rule` at its usage, priced as the gateway prices `model`."""
        from flower_batch.gateway.prices import cost_usd

        self.complete += 1
        self.by_rule[rule] = self.by_rule.get(rule, 0) + 1
        for key in TOKEN_KEYS:
            self.tokens[key] += int(usage.get(key) or 0)
        self.cost_usd += cost_usd(model, usage) or 0.0

    @property
    def cut(self) -> int:
        return len(self.cut_starts)

    def accepts(
        self, meter: Mapping[str, Any], *, client_timeout: bool = False, unlogged_starts: int = 0
    ) -> bool:
        """Whether a meter.json is exact: nothing lost, nothing counted twice. Each answer asked
        for again is counted not at all or at its start (one of the meter's `incomplete`); with
        `client_timeout` (the client had a request timeout of its own) also whole.

        With `unlogged_starts` (the gateway's deaths), up to that many answers more may be
        counted at their start only, each either
        - a request the gateway began to answer and died within its log's delay of (its meter
          line is written at the first event, its log line just after), so the log this account
          is made from never saw it; or
        - a complete answer whose stream the death cut after its content and before its
          message_delta: the gateway meters the final usage before it passes that event on, so
          the meter holds only the start, while the client kept the content it had (the CLI
          writes each block to its transcript as it ends) and the conversation went on from it
          (CI saw it: 21 exchanges, 1 incomplete, the lost one's content in the next request)."""
        incomplete = int(meter.get("incomplete") or 0)
        exchanges = int(meter.get("exchanges") or 0)
        tokens = {k: int((meter.get("tokens") or {}).get(k) or 0) for k in TOKEN_KEYS}
        cost = float(meter.get("cost_usd") or 0.0)
        fulls = self.cut_fulls or [(u, c) for u, c in self.cut_starts]  # an Expected built by hand
        kinds = ("none", "start", "whole") if client_timeout else ("none", "start")
        # (counted as a complete answer less, tokens, cost) of each way to be counted at a start
        options = [(0, u, c) for u, c in self.rule_starts]
        options += [(1, d, c) for rule, d, c in self.rule_cuts if self.by_rule.get(rule)]
        extras = [
            combo
            for n in range(unlogged_starts + 1)
            for combo in itertools.combinations_with_replacement(options, n)
        ]
        for ways in itertools.product(kinds, repeat=self.cut):
            for extra in extras:
                fewer_complete = sum(e[0] for e in extra)
                if ways.count("start") + len(extra) != incomplete or exchanges != (
                    self.complete - fewer_complete + incomplete + ways.count("whole")
                ):
                    continue
                counted = [
                    self.cut_starts[i] if w == "start" else fulls[i]
                    for i, w in enumerate(ways)
                    if w != "none"
                ]
                counted += [(u, c) for _, u, c in extra]
                want = {k: self.tokens[k] + sum(u.get(k, 0) for u, _ in counted) for k in TOKEN_KEYS}
                if want == tokens and math.isclose(
                    cost, self.cost_usd + sum(c for _, c in counted), abs_tol=1e-6
                ):
                    return True
        return False


def rule_usages(scenario_path: Path) -> dict[str, dict[str, int]]:
    """Each rule's usage, as the scenario file says (defaults merged), read with tomllib."""
    data = tomllib.loads(Path(scenario_path).read_text(encoding="utf-8"))
    defaults = {**BUILTIN_USAGE, **((data.get("defaults") or {}).get("usage") or {})}
    rules = data.get("rules") or data.get("rule") or []
    return {
        str(r.get("name") or f"rule #{i}"): {**defaults, **(r.get("usage") or {})}
        for i, r in enumerate(rules, 1)
    }


def start_and_whole(usage: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """An answer's usage at its first event (the input side, output_tokens 1: what
    flower/scripted/render.py sends in message_start) and whole."""
    start = {k: int(v) for k, v in {**usage, "output_tokens": 1}.items() if k in TOKEN_KEYS}
    return start, {k: int(v) for k, v in usage.items() if k in TOKEN_KEYS}


def expected_usage(scenario_path: Path, log_records: Iterable[Mapping[str, Any]]) -> Expected:
    """What the scripted model sent, from the gateway's request log: each answer at the usage its
    rule has in the scenario, priced as the gateway prices (the requested model).

    An answer the client asked for again (the next request of its session carries the same
    messages) was cut by the gateway's death: it got no further than its first event, whose usage
    is the input side with output_tokens 1 (flower/scripted/render.py) — as an API bills an
    interrupted stream — or not even that far; or it was whole, and the client had stopped
    waiting for it (its own request timeout)."""
    from flower_batch.gateway.prices import cost_usd

    usages = rule_usages(scenario_path)
    records = [r for r in log_records if r.get("endpoint") == "messages"]
    out = Expected()
    for rule, model in unlogged_answers(scenario_path, records):
        out.add_complete(rule, usages[rule], model)
    for i, rec in enumerate(records):
        if rec.get("status") != 200:
            continue
        if rec.get("outcome") not in ("stream", "response") or rec.get("rule") not in usages:
            continue
        usage = usages[str(rec["rule"])]
        model = str(rec.get("model") or "")
        again = next((r for r in records[i + 1 :] if r.get("session") == rec.get("session")), None)
        if again is not None and again.get("n_messages") == rec.get("n_messages"):
            start, whole = start_and_whole(usage)
            out.cut_starts.append((start, cost_usd(model, start) or 0.0))
            out.cut_fulls.append((whole, cost_usd(model, whole) or 0.0))
            continue
        out.add_complete(str(rec["rule"]), usage, model)
    model = next((str(r.get("model") or "") for r in reversed(records) if r.get("model")), "")
    for rule, usage in usages.items():
        start, whole = start_and_whole(usage)
        start_cost = cost_usd(model, start) or 0.0
        if (start, start_cost) not in out.rule_starts:
            out.rule_starts.append((start, start_cost))
        less = {k: start.get(k, 0) - whole.get(k, 0) for k in TOKEN_KEYS}
        out.rule_cuts.append((rule, less, start_cost - (cost_usd(model, whole) or 0.0)))
    return out


def unlogged_answers(scenario_path: Path, records: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(rule, model) of each request the log lost whose answer the conversation went on from.

    A gateway killed just after an answer can lose that request's log line (it is written after
    the answer); but the client's next request of the session resends the whole history, that
    answer included. The logged request before it had `before` messages, so its own answer is
    message `before`; any later model answer in the history answered a request the log lost.
    Its messages are the history up to that answer, and its rule is the one the scenario picks
    for them, by the gateway's own matcher. (A turn does not always add 2 messages, answer and
    tool result: a step's end adds 3, so the growth of a session says nothing by its parity;
    counting by parity missed a lost answer next to such a turn: CI, 27 -> 32 messages.)"""
    from flower.scripted import ParsedRequest, Scenario

    scenario = Scenario.load(scenario_path)
    seen: dict[Any, int] = {}
    out: list[tuple[str, str]] = []
    for rec in records:
        session, n = rec.get("session"), int(rec.get("n_messages") or 0)
        before = seen.get(session, -1)  # a session's first request is the first of its history
        seen[session] = max(before, n)
        messages = (rec.get("body") or {}).get("messages")
        if not isinstance(messages, list) or len(messages) != n:
            continue
        for m in range(before + 1, n):
            if m < 1 or messages[m].get("role") != "assistant":
                continue
            req = ParsedRequest(
                method="POST",
                path="/v1/messages",
                prefix="",
                endpoint="messages",
                headers={},
                body={"model": rec.get("model"), "messages": messages[:m]},
            )
            rule = next((r.label for r in scenario.rules if r.matcher.matches(req)), None)
            if rule is not None:
                out.append((rule, str(rec.get("model") or "")))
    return out


def expected_of_one_leg(
    scenario_path: Path, log_records: Iterable[Mapping[str, Any]], turns: int
) -> Expected:
    """What a job of one leg of `turns` counts (no handoff) must be metered: its complete answers
    from the scenario and the workspace alone — the start answer, `turns` - 1 count answers and
    the leg-done answer, each once (the job's `.count` shows the tool ran `turns` times) — and the
    answers its client asked for again from the request log, as in expected_usage.

    Not the log's account of the complete answers: the line of an answer the gateway had just
    sent when it was killed can be lost (it is written just after the answer; the meter's line,
    written before each event, is not lost), and that answer is still one the model sent (CI saw
    it: 17 exchanges metered, 16 in the log, `.count` at 16)."""
    records = [r for r in log_records if r.get("endpoint") == "messages"]
    logged = expected_usage(scenario_path, records)  # for the answers asked for again
    usages = rule_usages(scenario_path)
    model = next((str(r.get("model") or "") for r in reversed(records) if r.get("model")), "")
    out = Expected(
        cut_starts=logged.cut_starts,
        cut_fulls=logged.cut_fulls,
        rule_starts=logged.rule_starts,
        rule_cuts=logged.rule_cuts,
    )
    for rule, n in (("start", 1), ("count", turns - 1), ("leg done", 1)):
        for _ in range(n):
            out.add_complete(rule, usages[rule], model)
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out
