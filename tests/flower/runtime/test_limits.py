"""Limits, pure: threshold crossing, the wording and its file, the deadline arithmetic, and how
the CLI's options and the environment become a Limits (flower.cli.limits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flower.cli.limits import limits_from
from flower.errors import ConfigError
from flower.runtime.limits import (
    Limits,
    LimitWatch,
    crossed,
    format_duration,
    format_usd,
    load_wording,
)

NOW = 1_800_000_000.0


def test_crossed_gives_the_highest_threshold_passed_and_nothing_twice() -> None:
    t = (0.5, 0.8, 0.95)
    assert crossed(0.0, 0.49, t) is None
    assert crossed(0.0, 0.5, t) == 0.5
    assert crossed(0.5, 0.79, t) is None
    assert crossed(0.4, 0.96, t) == 0.95  # one notice for a jump past three
    assert crossed(0.96, 1.0, t) is None


def test_time_used_is_the_share_of_the_allowance() -> None:
    lim = Limits(deadline=NOW + 25, time_limit_s=100)
    assert lim.time_used(NOW) == pytest.approx(0.75)
    assert lim.time_left(NOW) == 25
    assert lim.time_used(NOW + 200) == 1.0 and lim.time_left(NOW + 200) == 0
    assert not lim.past_deadline(NOW) and lim.past_deadline(NOW + 25)
    assert Limits(deadline=NOW + 25, time_limit_s=100, wrap_up_s=30).wrap_up_end() == NOW + 55


def test_budget_used_counts_what_was_spent_before_this_process() -> None:
    lim = Limits(budget_usd=2.0, spent_usd=0.5)
    assert lim.budget_used(0.5) == pytest.approx(0.5)
    assert lim.budget_used(5) == 1.0
    assert Limits().budget_used(1) is None and not Limits().active


def test_the_watch_notices_each_threshold_once_per_kind() -> None:
    watch = LimitWatch(Limits(deadline=NOW + 100, time_limit_s=100, budget_usd=1.0))
    assert watch.check(NOW + 10, 0.1) == ""
    first = watch.check(NOW + 55, 0.1)
    assert "时间已用 50%" in first and "45s" in first and "预算" not in first
    assert watch.check(NOW + 60, 0.1) == ""
    both = watch.check(NOW + 81, 0.96)
    assert "时间已用 80%" in both and "预算已用 95%" in both and "$0.0400" in both


def test_the_opening_tells_time_and_budget_left_and_marks_what_is_used() -> None:
    watch = LimitWatch(Limits(deadline=NOW + 3700, time_limit_s=7400, budget_usd=5.0, spent_usd=1.0))
    text = watch.opening(NOW, 0.25)
    assert "剩余时间 1h 01m" in text and "剩余预算 $3.75（共 $5.00，已用 $1.25）" in text
    assert "时间已用 50%" in text  # crossed before this session: said once, here
    assert watch.check(NOW + 1, 0.25) == ""
    notes = watch.opening(NOW, 0.25, notes=Path("/ws/.flower/notes/收尾-干活.md"))
    assert "收尾-干活.md" in notes and "时间已用" not in notes


def test_notices_off_say_nothing() -> None:
    watch = LimitWatch(Limits(deadline=NOW + 10, time_limit_s=100, notices=False, thresholds=()))
    assert watch.opening(NOW, 0) == "" and watch.check(NOW + 9, 0) == ""
    assert LimitWatch(Limits()).opening(NOW, 0) == ""  # no limits known: nothing to tell


def test_time_up_names_the_notes_and_the_seconds_left_of_the_window() -> None:
    watch = LimitWatch(Limits(deadline=NOW, time_limit_s=60, wrap_up_s=45))
    text = watch.time_up(NOW + 5, Path("/n/收尾-w.md"))
    assert "时间到了" in text and "40 秒" in text and "/n/收尾-w.md" in text and "## 下一步" in text


def test_formats() -> None:
    assert format_duration(45.9) == "45s"
    assert format_duration(750) == "12m 30s"
    assert format_duration(3900) == "1h 05m"
    assert format_usd(0.05) == "0.0500" and format_usd(12.5) == "12.50"


def test_a_wording_file_replaces_texts_and_refuses_unknown_keys_and_placeholders(tmp_path: Path) -> None:
    good = tmp_path / "w.toml"
    good.write_text(
        'start = "LIMITS: {parts}"\nnotice = "{what} at {percent}%, {left} left"\nwhat_time = "time"\n'
    )
    watch = LimitWatch(Limits(deadline=NOW + 50, time_limit_s=100, wording=load_wording(good)))
    assert watch.opening(NOW, 0).endswith("LIMITS: 剩余时间 50s（截止 2027-01-15 08:00:50 UTC）")
    assert watch.check(NOW + 31, 0) == "time at 80%, 19s left"
    for text, says in (
        ('stat = "x"', "unknown key 'stat'"),
        ('notice = "{budget}"', "notice uses {budget}; it may use {left}, {percent}, {what}"),
        ("notice = 3", "notice must be a string"),
        ('notice = "{oops"', "bad braces"),
        ("notice = ", "not valid TOML"),
    ):
        bad = tmp_path / "bad.toml"
        bad.write_text(text + "\n")
        with pytest.raises(
            ConfigError, match=says.replace("{", r"\{").replace("}", r"\}").replace("(", r"\(")
        ):
            load_wording(bad)


def test_limits_from_options_over_environment() -> None:
    env = {"FLOWER_TIME_LIMIT": "600", "FLOWER_BUDGET_USD": "2", "FLOWER_SPENT_USD": "0.5"}
    lim = limits_from({}, env, now=NOW)
    assert (lim.deadline, lim.time_limit_s, lim.budget_usd, lim.spent_usd) == (NOW + 600, 600, 2, 0.5)
    assert lim.thresholds == (0.5, 0.8, 0.95) and lim.notices and lim.wrap_up_s == 60
    typed = limits_from({"time_limit": 60.0, "notices": "25,75", "wrap_up": 0.0}, env, now=NOW)
    assert typed.deadline == NOW + 60 and typed.thresholds == (0.25, 0.75) and typed.wrap_up_s == 0
    both = limits_from({}, {"FLOWER_DEADLINE": str(NOW + 30), "FLOWER_TIME_LIMIT": "120"}, now=NOW)
    assert both.deadline == NOW + 30 and both.time_limit_s == 120  # 75% used already
    iso = limits_from({"deadline": "2027-01-15T08:00:00Z"}, {}, now=NOW - 100)
    assert iso.deadline == NOW and iso.time_limit_s == 100
    off = limits_from({}, {"FLOWER_NOTICES": "off", "FLOWER_TIME_LIMIT": "5"}, now=NOW)
    assert not off.notices and off.thresholds == () and off.deadline == NOW + 5
    assert not limits_from({}, {}, now=NOW).active


@pytest.mark.parametrize(
    ("typed", "env", "says"),
    [
        ({}, {"FLOWER_TIME_LIMIT": "soon"}, "FLOWER_TIME_LIMIT='soon': give seconds"),
        ({"budget_usd": -1.0}, {}, "--budget-usd=-1.0: give USD"),
        (
            {},
            {"FLOWER_DEADLINE": "tomorrow"},
            "FLOWER_DEADLINE='tomorrow': give epoch seconds or an ISO 8601",
        ),
        ({"notices": "50,180"}, {}, "--notices='50,180': give percentages between 0 and 100"),
        ({}, {"FLOWER_WRAP_UP": "-5"}, "FLOWER_WRAP_UP='-5'"),
        ({"time_limit": float("inf")}, {}, "--time-limit=inf: give seconds"),
        ({}, {"FLOWER_DEADLINE": "1e300"}, "FLOWER_DEADLINE='1e300': give epoch seconds"),
    ],
)
def test_limits_from_refuses_bad_values_in_one_line(
    typed: dict[str, Any], env: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        limits_from(typed, env, now=NOW)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_hook_tells_the_main_thread_and_keeps_the_notice_from_a_subagent(tmp_path: Path) -> None:
    import time

    import anyio

    from flower.runtime.engine import Runtime

    (tmp_path / "ws").mkdir()
    rt = Runtime(
        workspace=tmp_path / "ws",
        run_dir=tmp_path / "runs",
        limits=Limits(deadline=time.time() + 40, time_limit_s=100),  # 60% used
    )
    hook: Any = rt.limit_hook()  # called as the CLI would, with the input's plain dict
    base = {"hook_event_name": "PostToolUse", "tool_name": "Bash", "session_id": "s"}
    try:
        in_subagent: Any = anyio.run(hook, {**base, "agent_id": "a1"}, "t1", {"signal": None})
        main: Any = anyio.run(hook, base, "t2", {"signal": None})
        again: Any = anyio.run(hook, base, "t3", {"signal": None})
    finally:
        rt.close()
    assert in_subagent == {} and again == {}  # the subagent's call consumed nothing; said once
    assert main["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert "时间已用 50%" in main["hookSpecificOutput"]["additionalContext"]


def test_the_person_reads_the_limits_in_english_whatever_the_agent_is_told() -> None:
    from flower.events import LimitsTold
    from flower.runtime.limits import format_deadline, limits_summary
    from flower.starter.wake import notice

    now = 1_000_000.0
    lim = Limits(deadline=now + 600, time_limit_s=1200, budget_usd=1.0, spent_usd=0.25)
    summary = limits_summary(lim, now, 0.0)
    deadline = format_deadline(now + 600)
    assert summary == f"10m 00s left (deadline {deadline}) · $0.7500 of $1.00 budget left ($0.2500 spent)"
    told = "[flower] 本次运行的限制：剩余时间 10m。请按这个安排工作。"  # the agent's wording
    assert notice(LimitsTold(text=told, summary=summary)) == f"  limits: {summary}"
    assert notice(LimitsTold(text=told)) == f"  limits: {told}"  # an event of an earlier flower: its text
