"""Scenario loading/validation and the scripted responder's matching, counters and substitutions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower.scripted import UNMATCHED, ParsedRequest, Scenario, ScenarioError, ScriptedResponder
from flower.scripted.request import split_path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "scenarios"

# The shape the real CLI sends (spec §8.2): a reminder block, a trailing role:"system" message
# announcing the working directory, a billing line in `system`.
ENV_MESSAGE = {
    "role": "system",
    "content": "# Environment\n - Primary working directory: /work/ws one\n - Platform: linux",
}
SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.327; cc_entrypoint=sdk-py;"},
    {"type": "text", "text": "You are a Claude agent."},
    {"type": "text", "text": "ROLE=reviewer. Review the diff."},
]


def user(*blocks) -> dict:
    return {"role": "user", "content": list(blocks)}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tool_result(content, tool_id: str = "toolu_1") -> dict:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


FIRST_TURN = [
    user(
        text("<system-reminder>\nAttribution for git commits\n</system-reminder>\n"),
        text("please read notes"),
    ),
    ENV_MESSAGE,
]
AFTER_TOOL = FIRST_TURN + [
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/notes"}}
        ],
    },
    user(tool_result("1\tbanana split\n")),
]


class Client:
    """Feeds requests to a responder the way the server does (nth counted per session)."""

    def __init__(self, scenario: dict | Scenario):
        self.responder = ScriptedResponder(
            scenario if isinstance(scenario, Scenario) else Scenario.from_dict(scenario)
        )
        self.nth: dict[str, int] = {}

    def ask(
        self, messages, *, session="s1", stream=True, system=SYSTEM, path="/v1/messages", model="claude-x"
    ):
        self.nth[session] = self.nth.get(session, 0) + 1
        prefix, endpoint, _ = split_path(path)
        req = ParsedRequest(
            method="POST",
            path=path,
            prefix=prefix,
            endpoint=endpoint,
            headers={"x-claude-code-session-id": session},
            body={"model": model, "stream": stream, "system": system, "messages": messages},
            nth=self.nth[session],
        )
        return self.responder.respond(req)

    def rule(self, messages, **kw) -> str:
        return self.ask(messages, **kw).rule


def reply_of(plan) -> dict:
    """The message a plan carries, from its JSON body or its SSE events."""
    if plan.json_body is not None:
        return plan.json_body
    events = list(plan.events)
    msg = dict(events[0][1]["message"])
    blocks = []
    for name, data in events:
        if name == "content_block_delta":
            d = data["delta"]
            blocks.append(d["text"] if d["type"] == "text_delta" else json.loads(d["partial_json"]))
    msg["content"] = blocks
    msg["stop_reason"] = events[-2][1]["delta"]["stop_reason"]
    msg["usage"] = {**msg["usage"], **events[-2][1]["usage"]}  # final output_tokens come last
    return msg


def test_request_text_views_follow_the_cli_shape():
    req = ParsedRequest(
        "POST", "/v1/messages", "", "messages", {}, body={"system": SYSTEM, "messages": AFTER_TOOL}
    )
    assert (
        req.last_is_tool_result and "banana split" in req.last_user_text and "banana" in req.tool_result_text
    )
    assert req.cwd == "/work/ws one" and "ROLE=reviewer" in req.system_text
    first = ParsedRequest("POST", "/v1/messages", "", "messages", {}, body={"messages": FIRST_TURN})
    assert first.last_user_text.strip() == "please read notes"  # reminder stripped, role:system skipped
    assert not first.last_is_tool_result and first.tool_result_text == ""
    assert "Attribution for git commits" in first.all_text
    blocks = ParsedRequest(
        "POST", "/", "", "messages", {}, body={"messages": [user(tool_result([text("as blocks")]))]}
    )
    assert blocks.tool_result_text == "as blocks"


def test_split_path():
    assert split_path("/v1/messages?beta=true") == ("", "messages", "beta=true")
    assert split_path("/j/job-1/v1/messages/count_tokens?beta=true") == (
        "/j/job-1",
        "count_tokens",
        "beta=true",
    )
    assert split_path("/a/b/api/hello") == ("/a/b", "hello", "")
    assert split_path("/j/x/v1/models") == ("/j/x", None, "")
    assert split_path("/favicon.ico") == ("", None, "")


def test_first_matching_rule_answers_and_matchers_are_anded():
    scn = {
        "rules": [
            {
                "name": "reviewer-read",
                "system_contains": "ROLE=reviewer",
                "last_user_contains": "read",
                "reply": "r1",
            },
            {
                "name": "tool-banana",
                "when": {"last_is_tool_result": True, "tool_result_contains": "banana"},
                "reply": "r2",
            },
            {"name": "other-role", "system_contains": "ROLE=writer", "reply": "r3"},
            {"name": "fallback", "reply": "r4"},
        ]
    }
    c = Client(scn)
    assert c.rule(FIRST_TURN) == "reviewer-read"
    assert c.rule(AFTER_TOOL) == "tool-banana"
    writer = [{"type": "text", "text": "ROLE=writer"}]
    assert c.rule(FIRST_TURN, system=writer) == "other-role"
    assert c.rule([user(text("unrelated"))], system="ROLE=nobody") == "fallback"


@pytest.mark.parametrize(
    ("matcher", "hits", "misses"),
    [
        ({"last_user_regex": r"read\s+notes$"}, {}, {"messages": [user(text("read notes later"))]}),
        ({"any_text_contains": ["Attribution", "read notes"]}, {}, {"messages": [user(text("read notes"))]}),
        ({"any_text_regex": r"(?i)ATTRIBUTION"}, {}, {"messages": [user(text("x"))]}),
        ({"system_regex": r"ROLE=\w+er\b"}, {}, {"system": "no role"}),
        ({"tool_result_regex": r"banana \w+"}, {"messages": AFTER_TOOL}, {}),
        ({"last_is_tool_result": False}, {}, {"messages": AFTER_TOOL}),
        ({"session": "s1"}, {}, {"session": "s2"}),
        ({"prefix": "/j/job1"}, {"path": "/j/job1/v1/messages"}, {"path": "/j/job2/v1/messages"}),
        ({"model": "claude-x"}, {}, {"model": "claude-y"}),
        ({"stream": False}, {"stream": False}, {}),
    ],
)
def test_each_matcher(matcher, hits, misses):
    scn = {"rules": [{"name": "m", **matcher, "reply": "yes"}]}

    def rule(overrides: dict) -> str:
        kw = dict(overrides)
        return Client(scn).rule(kw.pop("messages", FIRST_TURN), **kw)

    assert rule(hits) == "m"
    assert rule(misses) == UNMATCHED


def test_nth_counts_requests_per_session():
    c = Client({"rules": [{"name": "second", "nth": 2, "reply": "two"}, {"name": "any", "reply": "x"}]})
    assert [c.rule(FIRST_TURN, session=s) for s in ("a", "a", "b", "a", "b")] == [
        "any",
        "second",
        "any",
        "any",
        "second",
    ]


def test_times_total_and_per_session():
    c = Client({"rules": [{"name": "once", "times": 1, "reply": "a"}, {"name": "rest", "reply": "b"}]})
    assert [c.rule(FIRST_TURN, session=s) for s in ("a", "a", "b")] == ["once", "rest", "rest"]
    c = Client(
        {
            "rules": [
                {"name": "once", "times": 1, "per_session": True, "reply": "a"},
                {"name": "rest", "reply": "b"},
            ]
        }
    )
    assert [c.rule(FIRST_TURN, session=s) for s in ("a", "a", "b", "b")] == ["once", "rest", "once", "rest"]


def test_sequence_plays_per_session_and_repeats_its_last_step():
    scn = {"rules": [{"name": "flaky", "sequence": [{"error": 529}, {"cut_after": 2}, {"reply": "finally"}]}]}
    c = Client(scn)
    a = [c.ask(FIRST_TURN, session="a") for _ in range(4)]
    b = c.ask(FIRST_TURN, session="b")
    assert [p.step for p in a] == [0, 1, 2, 2] and b.step == 0
    assert a[0].status == 529 and a[1].cut_after == 2 and a[1].outcome == "cut"
    assert reply_of(a[2])["content"] == ["finally"] and reply_of(a[3])["content"] == ["finally"]
    assert b.status == 529


def test_sequence_with_times_is_exhausted():
    scn = {
        "rules": [
            {"name": "seq", "times": 2, "sequence": [{"reply": "one"}, {"reply": "two"}]},
            {"name": "after", "reply": "z"},
        ]
    }
    c = Client(scn)
    assert [c.rule(FIRST_TURN) for _ in range(3)] == ["seq", "seq", "after"]


def test_substitutions_in_text_and_tool_input():
    scn = {
        "rules": [
            {
                "reply": [
                    {
                        "text": "cwd={cwd} session={session} n={n} prefix={prefix} model={model} literal={{cwd}} other={x}"
                    },
                    {
                        "tool_use": {
                            "name": "Write",
                            "input": {"file_path": "{cwd}/out.txt", "content": ["{session}", 3]},
                        }
                    },
                ]
            }
        ]
    }
    c = Client(scn)
    c.ask(FIRST_TURN, session="sid")
    msg = reply_of(c.ask(FIRST_TURN, session="sid", stream=False, path="/j/q/v1/messages"))
    assert msg["content"][0]["text"] == (
        "cwd=/work/ws one session=sid n=2 prefix=/j/q model=claude-x literal={cwd} other={x}"
    )
    assert msg["content"][1]["input"] == {"file_path": "/work/ws one/out.txt", "content": ["sid", 3]}
    no_cwd = reply_of(Client(scn).ask([user(text("hi"))]))
    assert no_cwd["content"][0].startswith("cwd={cwd} ")  # unknown stays visible


def test_defaults_and_overrides_of_usage_model_stop_reason():
    scn = {
        "defaults": {"reply_model": "scripted-opus", "usage": {"input_tokens": 7}, "delay_s": 0.1},
        "rules": [
            {"name": "custom", "last_user_contains": "custom", "reply": "x", "usage": {"output_tokens": 9, "cache_read_input_tokens": 3},
             "stop_reason": "max_tokens", "reply_model": "scripted-{model}", "delay_s": 0, "chunk_delay_s": 0.2},
            {"name": "plain", "reply": "y"},
        ]
    }  # fmt: skip
    c = Client(scn)
    plain = c.ask(FIRST_TURN)
    msg = reply_of(plain)
    assert msg["model"] == "scripted-opus" and plain.delay_s == 0.1
    assert msg["usage"] == {
        "input_tokens": 7,
        "output_tokens": 5,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    custom = c.ask([user(text("custom"))], stream=False)
    msg = custom.json_body
    assert msg["model"] == "scripted-claude-x" and msg["stop_reason"] == "max_tokens"
    assert (
        msg["usage"]["output_tokens"] == 9
        and msg["usage"]["cache_read_input_tokens"] == 3
        and msg["usage"]["input_tokens"] == 7
    )
    assert custom.delay_s == 0 and custom.chunk_delay_s == 0.2


def test_count_tokens_is_an_estimate_not_a_rule():
    c = Client({"rules": [{"error": 500}]})
    plan = c.ask(FIRST_TURN, path="/v1/messages/count_tokens")
    assert plan.status == 200 and plan.json_body["input_tokens"] > 10 and plan.rule == "count_tokens"


def test_toml_and_json_files_load(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text(
        "[defaults]\nusage = { input_tokens = 3 }\n\n"
        '[[rules]]\nname = "hi"\nlast_user_contains = "hello"\nreply = [{ text = "hi {session}" }]\n\n'
        '[[rules]]\nname = "tool"\n[rules.when]\nlast_is_tool_result = true\n'
        '[[rules.sequence]]\nerror = 500\n[[rules.sequence]]\nreply = "ok"\n'
    )
    scn = Scenario.load(toml)
    assert (
        [r.label for r in scn.rules] == ["hi", "tool"]
        and scn.rules[1].is_sequence
        and scn.source == str(toml)
    )
    assert scn.defaults.usage["input_tokens"] == 3 and scn.defaults.usage["output_tokens"] == 5
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"rules": [{"reply": [{"text": "x"}]}]}))
    assert Scenario.load(js).rules[0].label == "rule #1"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_example_scenarios_load(path):
    assert Scenario.load(path).rules


BAD = [
    (
        "[[rules]]\nname = 'a'\nlast_user_contain = 'x'\nreply = 'y'\n",
        "rule #1 'a': field 'last_user_contain'",
        "did you mean 'last_user_contains'",
    ),
    (
        "[[rules]]\nreply = 'ok'\n[[rules]]\nname = 'boom'\nerror = 418\n",
        "rule #2 'boom': field 'error'",
        "use one of 400, 401",
    ),
    ("[[rules]]\nname = 'n'\nlast_user_contains = 'x'\n", "rule #1 'n'", "no action: give reply"),
    ("[[rules]]\nreply = [{ text = 1 }]\n", "rule #1: field 'reply[0].text'", "must be a string"),
    (
        "[[rules]]\nreply = [{ tool_use = { input = {} } }]\n",
        "field 'reply[0].tool_use'",
        "needs a tool name",
    ),
    ("[[rules]]\nreply = [{ image = 'x' }]\n", "field 'reply[0]'", "each block is {text"),
    ("[[rules]]\nreply = 'x'\nerror = 500\n", "field 'error'", "answer on their own"),
    (
        "[[rules]]\nreply = 'x'\nsequence = [{ reply = 'y' }]\n",
        "field 'reply'",
        "either action fields or a sequence",
    ),
    (
        "[[rules]]\nsequence = [{ reply = 'y' }, { nope = 1 }]\n",
        "rule #1 sequence[1]: field 'nope'",
        "unknown action field",
    ),
    (
        "[[rules]]\nlast_user_regex = '(unclosed'\nreply = 'x'\n",
        "field 'last_user_regex'",
        "not a valid regular expression",
    ),
    ("[[rules]]\nnth = 0\nreply = 'x'\n", "field 'nth'", "must be >= 1"),
    ("[[rules]]\ntimes = 'two'\nreply = 'x'\n", "field 'times'", "must be a whole number"),
    ("[[rules]]\nper_session = true\nreply = 'x'\n", "field 'per_session'", "add times"),
    ("[[rules]]\nreply = 'x'\nusage = { input = 3 }\n", "field 'usage.input'", "use input_tokens"),
    ("[[rules]]\nreply = 'x'\noutage_s = 0\n", "field 'outage_s'", "must be > 0"),
    (
        "[[rules]]\nwhen = { last_user = 'x' }\nreply = 'x'\n",
        "field 'when.last_user'",
        "did you mean 'when.last_user_",
    ),
    ("[[rules]]\nsession = 's'\nwhen = { session = 't' }\nreply = 'x'\n", "field 'session'", "keep one"),
    (
        "[defaults]\nmodel = 'x'\n[[rules]]\nreply = 'x'\n",
        "[defaults]: field 'model'",
        "did you mean 'reply_model'",
    ),
    ("rules = []\n", "field 'rules'", "non-empty list of rules"),
    ("[[rulez]]\nreply = 'x'\n", "field 'rulez'", "did you mean 'rule"),
    ("[[rules]\nreply = 'x'\n", "not valid TOML", "fix the syntax"),
]


@pytest.mark.parametrize(("text", "where", "fix"), BAD, ids=[b[2][:30] for b in BAD])
def test_bad_scenarios_name_file_rule_field_and_fix(tmp_path, text, where, fix):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        Scenario.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and where in message and fix in message
    assert "\n" not in message


def test_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read the scenario file"):
        Scenario.load(tmp_path / "nope.toml")


def test_scenario_error_knows_rule_and_field():
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict({"rules": [{"reply": "ok"}, {"name": "x", "error": 1}]})
    assert caught.value.source == "<dict>" and caught.value.rule == "x" and caught.value.field == "error"
