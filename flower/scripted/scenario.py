"""Scenario: an ordered list of rules scripting the offline model (format: docs/scenario-format.md).

Loading validates everything up front; a mistake raises ScenarioError naming the file, the rule
and the field, with the fix. A Scenario is immutable: the counters that `times` and `sequence`
need live in the ScriptedResponder, so one Scenario can drive several servers.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ScenarioError
from .plan import ERROR_TYPES
from .request import ParsedRequest

DEFAULT_MODEL = "scripted-model"
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
DEFAULT_USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}

MATCHER_FIELDS = (
    "last_user_contains", "last_user_regex", "last_is_tool_result", "tool_result_contains",
    "tool_result_regex", "any_text_contains", "any_text_regex", "system_contains", "system_regex",
    "session", "prefix", "model", "nth", "stream",
)  # fmt: skip
ACTION_FIELDS = (
    "reply", "usage", "stop_reason", "reply_model", "delay_s", "chunk_delay_s", "error", "error_message",
    "cut_after", "outage_s",
)  # fmt: skip
RULE_FIELDS = ("name", "when", "times", "per_session", "sequence")
DEFAULTS_FIELDS = ("reply_model", "usage", "delay_s", "chunk_delay_s")
TOP_FIELDS = ("rules", "rule", "defaults", "name", "description")


@dataclass(frozen=True)
class Block:
    """One content block of a scripted reply."""

    kind: str  # "text" | "tool_use"
    text: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Action:
    """What a rule does. Unset fields fall back to the scenario defaults."""

    reply: tuple[Block, ...] = ()
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    reply_model: str | None = None  # the response's `model` field
    delay_s: float | None = None
    chunk_delay_s: float | None = None
    error: int | None = None
    error_message: str | None = None
    cut_after: int | None = None
    outage_s: float | None = None


@dataclass(frozen=True)
class Matcher:
    """Conditions on a request; all set ones must hold. `*_contains` lists need every string."""

    last_user_contains: tuple[str, ...] = ()
    last_user_regex: re.Pattern[str] | None = None
    last_is_tool_result: bool | None = None
    tool_result_contains: tuple[str, ...] = ()
    tool_result_regex: re.Pattern[str] | None = None
    any_text_contains: tuple[str, ...] = ()
    any_text_regex: re.Pattern[str] | None = None
    system_contains: tuple[str, ...] = ()
    system_regex: re.Pattern[str] | None = None
    session: str | None = None
    prefix: str | None = None
    model: str | None = None
    nth: int | None = None
    stream: bool | None = None

    def matches(self, req: ParsedRequest) -> bool:
        texts = (
            (self.last_user_contains, self.last_user_regex, lambda: req.last_user_text),
            (self.tool_result_contains, self.tool_result_regex, lambda: req.tool_result_text),
            (self.any_text_contains, self.any_text_regex, lambda: req.all_text),
            (self.system_contains, self.system_regex, lambda: req.system_text),
        )
        for needles, pattern, text_of in texts:
            if needles and not all(n in text_of() for n in needles):
                return False
            if pattern is not None and not pattern.search(text_of()):
                return False
        exact = (
            (self.last_is_tool_result, req.last_is_tool_result),
            (self.session, req.session),
            (self.prefix, req.prefix),
            (self.model, req.model),
            (self.nth, req.nth),
            (self.stream, req.stream),
        )
        return all(want is None or want == got for want, got in exact)


@dataclass(frozen=True)
class Rule:
    index: int  # 1-based position in the file
    name: str | None
    matcher: Matcher
    actions: tuple[Action, ...]  # one action, or the steps of a sequence
    is_sequence: bool = False
    times: int | None = None
    per_session: bool = False

    @property
    def label(self) -> str:
        return self.name or f"rule #{self.index}"


@dataclass(frozen=True)
class Defaults:
    reply_model: str = DEFAULT_MODEL
    usage: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_USAGE))
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0


@dataclass(frozen=True)
class Scenario:
    rules: tuple[Rule, ...]
    defaults: Defaults = field(default_factory=Defaults)
    source: str = "<dict>"

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read a .toml or .json scenario file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise ScenarioError(
                f"{path}: cannot read the scenario file ({err.strerror or err})", source=str(path)
            ) from None
        if path.suffix.lower() == ".json":
            return cls.from_json(text, source=str(path))
        return cls.from_toml(text, source=str(path))

    @classmethod
    def from_toml(cls, text: str, source: str = "<toml>") -> Scenario:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ScenarioError(
                f"{source}: not valid TOML ({err}); fix the syntax there", source=source
            ) from None
        return cls.from_dict(data, source=source)

    @classmethod
    def from_json(cls, text: str, source: str = "<json>") -> Scenario:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ScenarioError(
                f"{source}: not valid JSON ({err}); fix the syntax there", source=source
            ) from None
        return cls.from_dict(data, source=source)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> Scenario:
        return _Parser(source).scenario(data)

    @classmethod
    def coerce(cls, value: Scenario | str | Path | dict[str, Any]) -> Scenario:
        """A Scenario from a Scenario, a file path or a dict."""
        if isinstance(value, Scenario):
            return value
        if isinstance(value, dict):
            return cls.from_dict(value)
        return cls.load(value)


def _type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)


class _Parser:
    """Validates a raw dict into a Scenario; every message says where and how to fix."""

    def __init__(self, source: str):
        self.source = source
        self.where = ""
        self.rule: str | None = None

    def fail(self, fieldname: str | None, problem: str) -> ScenarioError:
        at = f"{self.where}: " if self.where else ""
        named = f"field '{fieldname}': " if fieldname else ""
        return ScenarioError(
            f"{self.source}: {at}{named}{problem}", source=self.source, rule=self.rule, field=fieldname
        )

    def unknown(self, keys: Any, allowed: tuple[str, ...], what: str) -> None:
        for key in keys:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = (
                    f"did you mean '{close[0]}'?" if close else f"allowed {what} fields: {', '.join(allowed)}"
                )
                raise self.fail(str(key), f"unknown {what} field; {hint}")

    # -- top level --------------------------------------------------------------------------
    def scenario(self, data: Any) -> Scenario:
        if not isinstance(data, dict):
            raise self.fail(
                None, f"a scenario must be a table/object with a 'rules' list, got {_type_name(data)}"
            )
        self.unknown(data, TOP_FIELDS, "top-level")
        if "rules" in data and "rule" in data:
            raise self.fail("rule", "use either [[rules]] or [[rule]], not both")
        raw_rules = data.get("rules", data.get("rule"))
        if not isinstance(raw_rules, list) or not raw_rules:
            raise self.fail(
                "rules", 'needs a non-empty list of rules, e.g. [[rules]] reply = [{text = "hi"}]'
            )
        defaults = self.defaults(data.get("defaults", {}))
        rules = tuple(self.rule_at(i, raw) for i, raw in enumerate(raw_rules, start=1))
        return Scenario(rules=rules, defaults=defaults, source=self.source)

    def defaults(self, raw: Any) -> Defaults:
        self.where = "[defaults]"
        if not isinstance(raw, dict):
            raise self.fail(None, f"must be a table, got {_type_name(raw)}")
        self.unknown(raw, DEFAULTS_FIELDS, "defaults")
        out = Defaults(
            reply_model=self.string(raw, "reply_model") or DEFAULT_MODEL,
            usage={**DEFAULT_USAGE, **self.usage(raw)},
            delay_s=self.number(raw, "delay_s") or 0.0,
            chunk_delay_s=self.number(raw, "chunk_delay_s") or 0.0,
        )
        self.where = ""
        return out

    # -- rules ----------------------------------------------------------------------------
    def rule_at(self, index: int, raw: Any) -> Rule:
        self.where, self.rule = f"rule #{index}", f"#{index}"
        if not isinstance(raw, dict):
            raise self.fail(None, f"must be a table, got {_type_name(raw)}")
        name = raw.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise self.fail("name", f"must be a string, got {_type_name(name)}")
            self.where, self.rule = f"rule #{index} '{name}'", name
        self.unknown(raw, RULE_FIELDS + MATCHER_FIELDS + ACTION_FIELDS, "rule")
        matcher = self.matcher(raw)
        times = self.integer(raw, "times", minimum=1)
        per_session = self.boolean(raw, "per_session") or False
        if per_session and times is None:
            raise self.fail("per_session", "only makes sense with times = N; add times or drop per_session")
        has_action = any(k in raw for k in ACTION_FIELDS)
        if "sequence" in raw:
            if has_action:
                extra = next(k for k in ACTION_FIELDS if k in raw)
                raise self.fail(
                    extra, "a rule has either action fields or a sequence; move it into each sequence entry"
                )
            steps = raw["sequence"]
            if not isinstance(steps, list) or not steps:
                raise self.fail(
                    "sequence",
                    'must be a non-empty list of action tables, e.g. [{error = 500}, {reply = [{text = "ok"}]}]',
                )
            actions = tuple(self.action(step, f"sequence[{i}]") for i, step in enumerate(steps))
            return Rule(index, name, matcher, actions, True, times, per_session)
        action_fields = {k: v for k, v in raw.items() if k in ACTION_FIELDS}
        return Rule(index, name, matcher, (self.action(action_fields, None),), False, times, per_session)

    def matcher(self, raw: dict[str, Any]) -> Matcher:
        when = raw.get("when", {})
        if not isinstance(when, dict):
            raise self.fail("when", f"must be a table of matchers, got {_type_name(when)}")
        self.unknown((f"when.{k}" for k in when), tuple(f"when.{m}" for m in MATCHER_FIELDS), "matcher")
        merged = dict(when)
        for key in MATCHER_FIELDS:
            if key in raw:
                if key in when:
                    raise self.fail(key, "given both in the rule and in its 'when' table; keep one")
                merged[key] = raw[key]
        return Matcher(
            last_user_contains=self.texts(merged, "last_user_contains"),
            last_user_regex=self.regex(merged, "last_user_regex"),
            last_is_tool_result=self.boolean(merged, "last_is_tool_result"),
            tool_result_contains=self.texts(merged, "tool_result_contains"),
            tool_result_regex=self.regex(merged, "tool_result_regex"),
            any_text_contains=self.texts(merged, "any_text_contains"),
            any_text_regex=self.regex(merged, "any_text_regex"),
            system_contains=self.texts(merged, "system_contains"),
            system_regex=self.regex(merged, "system_regex"),
            session=self.string(merged, "session"),
            prefix=self.string(merged, "prefix"),
            model=self.string(merged, "model"),
            nth=self.integer(merged, "nth", minimum=1),
            stream=self.boolean(merged, "stream"),
        )

    def action(self, raw: Any, at: str | None) -> Action:
        outer = self.where
        if at:
            self.where = f"{outer} {at}"
        if not isinstance(raw, dict):
            raise self.fail(None, f"must be a table of action fields, got {_type_name(raw)}")
        self.unknown(raw, ACTION_FIELDS, "action")
        error = self.integer(raw, "error")
        if error is not None and error not in ERROR_TYPES:
            codes = ", ".join(str(c) for c in ERROR_TYPES)
            raise self.fail("error", f"unsupported HTTP status {error}; use one of {codes}")
        outage = self.number(raw, "outage_s")
        if outage is not None and outage <= 0:
            raise self.fail("outage_s", "must be > 0 seconds")
        if not any(k in raw for k in ("reply", "error", "cut_after", "outage_s")):
            raise self.fail(None, "no action: give reply = [...], error = 500, cut_after = N or outage_s = S")
        terminal = [k for k in ("error", "outage_s") if k in raw]
        if len(terminal) > 1 or (terminal and ("reply" in raw or "cut_after" in raw)):
            raise self.fail(
                terminal[-1], "error and outage_s answer on their own; drop reply/cut_after or split the rule"
            )
        if "error_message" in raw and error is None:
            raise self.fail("error_message", "only used with error = <status>")
        action = Action(
            reply=self.reply(raw),
            usage=self.usage(raw),
            stop_reason=self.string(raw, "stop_reason"),
            reply_model=self.string(raw, "reply_model"),
            delay_s=self.number(raw, "delay_s"),
            chunk_delay_s=self.number(raw, "chunk_delay_s"),
            error=error,
            error_message=self.string(raw, "error_message"),
            cut_after=self.integer(raw, "cut_after", minimum=0),
            outage_s=outage,
        )
        self.where = outer
        return action

    def reply(self, raw: dict[str, Any]) -> tuple[Block, ...]:
        if "reply" not in raw:
            return ()
        value = raw["reply"]
        if isinstance(value, str):  # shorthand: reply = "text"
            return (Block("text", text=value),)
        example = (
            'e.g. reply = [{text = "hi"}, {tool_use = {name = "Read", input = {file_path = "{cwd}/a.txt"}}}]'
        )
        if not isinstance(value, list) or not value:
            raise self.fail("reply", f"must be a non-empty list of blocks, {example}")
        return tuple(self.block(i, b, example) for i, b in enumerate(value))

    def block(self, i: int, raw: Any, example: str) -> Block:
        fieldname = f"reply[{i}]"
        if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in ("text", "tool_use"):
            raise self.fail(
                fieldname, f'each block is {{text = "..."}} or {{tool_use = {{name, input}}}}; {example}'
            )
        if "text" in raw:
            if not isinstance(raw["text"], str):
                raise self.fail(f"{fieldname}.text", f"must be a string, got {_type_name(raw['text'])}")
            return Block("text", text=raw["text"])
        tool = raw["tool_use"]
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise self.fail(
                f"{fieldname}.tool_use", 'needs a tool name, e.g. {name = "Bash", input = {command = "ls"}}'
            )
        extra = set(tool) - {"name", "input", "id"}
        if extra:
            raise self.fail(
                f"{fieldname}.tool_use.{sorted(extra)[0]}",
                "unknown; a tool_use has name, input and optionally id",
            )
        tool_input = tool.get("input", {})
        if not isinstance(tool_input, dict):
            raise self.fail(
                f"{fieldname}.tool_use.input",
                f"must be a table of tool arguments, got {_type_name(tool_input)}",
            )
        tool_id = tool.get("id")
        if tool_id is not None and not isinstance(tool_id, str):
            raise self.fail(f"{fieldname}.tool_use.id", "must be a string like toolu_abc")
        return Block("tool_use", name=tool["name"], input=tool_input, id=tool_id)

    # -- scalar fields ----------------------------------------------------------------------
    def usage(self, raw: dict[str, Any]) -> dict[str, int]:
        if "usage" not in raw:
            return {}
        value = raw["usage"]
        if not isinstance(value, dict):
            raise self.fail("usage", "must be a table like {input_tokens = 10, output_tokens = 5}")
        for key, n in value.items():
            if key not in USAGE_KEYS:
                raise self.fail(f"usage.{key}", f"unknown; use {', '.join(USAGE_KEYS)}")
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise self.fail(f"usage.{key}", f"must be a whole number >= 0, got {n!r}")
        return dict(value)

    def string(self, raw: dict[str, Any], key: str) -> str | None:
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {_type_name(value)}")
        return value

    def texts(self, raw: dict[str, Any], key: str) -> tuple[str, ...]:
        value = raw.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise self.fail(key, f"must be a string or a non-empty list of strings, got {_type_name(value)}")

    def regex(self, raw: dict[str, Any], key: str) -> re.Pattern[str] | None:
        value = self.string(raw, key)
        if value is None:
            return None
        try:
            return re.compile(value, re.S)
        except re.error as err:
            raise self.fail(
                key, f"not a valid regular expression ({err}); check brackets and escape \\ in TOML as \\\\"
            ) from None

    def boolean(self, raw: dict[str, Any], key: str) -> bool | None:
        value = raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def integer(self, raw: dict[str, Any], key: str, minimum: int | None = None) -> int | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(key, f"must be a whole number, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {value}")
        return value

    def number(self, raw: dict[str, Any], key: str) -> float | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise self.fail(key, f"must be a number of seconds >= 0, got {value!r}")
        return float(value)
