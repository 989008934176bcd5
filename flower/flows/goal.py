"""目标.md (a goal statement + a checklist) and the judge's verdict.

目标.md::

    # 目标
    <one statement of what "done" means>

    # 判定清单
    - <one check a judge can verify by looking at the workspace>
    - <a check this environment cannot verify> [此环境无法验证:<why>]

A verdict has three sections, ``结论`` (achieved / not_yet / unreachable), ``理由`` and ``未通过``
(one failed check per bullet). Anything ambiguous — no conclusion, two conclusions, "achieved"
with failed checks listed — is *not achieved*: state ``not_yet`` with a ``note`` saying why, so
the work goes one more round instead of passing on a judge's muddle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from flower.catalogue import CHECKS_HEADING, GOAL_HEADING
from flower.catalogue import EMPTY_MARK as EMPTY
from flower.flows.brief import HEADING, norm_title, strip_fences

ACHIEVED, NOT_YET, UNREACHABLE = "achieved", "not_yet", "unreachable"
STATES = (ACHIEVED, NOT_YET, UNREACHABLE)

_GOAL_TITLES = {norm_title(t) for t in ("目标", "goal", "目标陈述", "goal statement")}
_CHECK_TITLES = {norm_title(t) for t in ("判定清单", "判定标准", "验收清单", "检查清单", "checklist", "checks")}
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)、])\s+(?:\[[ xX]\]\s+)?(.*)$")
_UNVERIFIABLE = re.compile(
    r"\s*[\[【]\s*(?:此环境无法验证|本环境无法验证|无法验证|unverifiable(?: here)?|cannot verify here)"
    r"\s*[:：]?\s*(?P<reason>[^\]】]*?)\s*[\]】]\s*[。.;；]?\s*$",
    re.IGNORECASE,
)


class Unverifiable(NamedTuple):
    check: str
    reason: str


@dataclass
class Goal:
    statement: str = ""
    checks: list[str] = field(default_factory=list)
    unverifiable: list[Unverifiable] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """A statement and at least one check: enough for a judge to work from."""
        return bool(self.statement) and bool(self.checks)

    @property
    def verifiable(self) -> list[str]:
        skip = {u.check for u in self.unverifiable}
        return [c for c in self.checks if c not in skip]

    def warning(self) -> str:
        """One line to show at once when some checks cannot be verified here ("" when none)."""
        if not self.unverifiable:
            return ""
        items = "; ".join(f"{u.check} ({u.reason or '未说明原因'})" for u in self.unverifiable)
        return f"{len(self.unverifiable)} 条判定在此环境无法验证, 判定者会跳过它们: {items}"


def parse_goal(text: str) -> Goal:
    """Parse 目标.md (or a reply containing it). Never raises; missing parts stay empty."""
    statement: list[str] = []
    checks: list[str] = []
    where: str | None = None
    for line in strip_fences(text or "").splitlines():
        m = HEADING.match(line)
        if m:
            title = norm_title(m.group(2))
            where = "goal" if title in _GOAL_TITLES else "checks" if title in _CHECK_TITLES else None
            continue
        if where == "goal":
            statement.append(line)
        elif where == "checks":
            _add_check(checks, line)
    goal = Goal(statement="\n".join(statement).strip())
    if goal.statement in (EMPTY, "（未填）"):
        goal.statement = ""
    for check in checks:
        m = _UNVERIFIABLE.search(check)
        if m:
            check = check[: m.start()].rstrip()
            goal.unverifiable.append(Unverifiable(check, m.group("reason").strip()))
        if check and check not in (EMPTY, "（未填）"):
            goal.checks.append(check)
    goal.unverifiable = [u for u in goal.unverifiable if u.check]
    return goal


def _add_check(checks: list[str], line: str) -> None:
    m = _BULLET.match(line)
    if m:
        checks.append(m.group(1).strip())
    elif line.strip() and checks and line[:1].isspace():
        checks[-1] = f"{checks[-1]} {line.strip()}"  # a wrapped bullet continues the last check


def render_goal(goal: Goal) -> str:
    """目标.md text; unverifiable checks keep their marker so a re-parse gives the same Goal."""
    reasons = {u.check: u.reason for u in goal.unverifiable}
    lines = [f"# {GOAL_HEADING}", "", goal.statement or EMPTY, "", f"# {CHECKS_HEADING}", ""]
    for check in goal.checks or [EMPTY]:
        mark = f" [此环境无法验证:{reasons[check]}]" if check in reasons else ""
        lines.append(f"- {check}{mark}")
    return "\n".join(lines) + "\n"


# -- verdicts ---------------------------------------------------------------------------------


_CONCLUSION_TITLES = {norm_title(t) for t in ("结论", "判定", "判定结论", "verdict", "conclusion", "result")}
_REASON_TITLES = {norm_title(t) for t in ("理由", "原因", "依据", "reason", "reasons", "rationale", "why")}
_MISSING_TITLES = {
    norm_title(t)
    for t in (
        "未通过",
        "未通过项",
        "没通过",
        "未满足",
        "failed",
        "failed checks",
        "not passed",
        "missing",
        "unmet",
        "not met",
    )
}
# Longest, negated phrases first: "未达成" contains "达成", "not achieved" contains "achieved".
_STATE_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (UNREACHABLE, ("unreachable", "不可达成", "无法达成", "达不成", "不可能达成", "无法实现", "不可达")),
    (
        NOT_YET,
        (
            "not yet",
            "not achieved",
            "not_yet",
            "notyet",
            "尚未达成",
            "未达成",
            "没有达成",
            "没达成",
            "还没达成",
            "未完成",
            "未通过",
        ),
    ),
    (ACHIEVED, ("achieved", "已达成", "达成", "全部通过", "通过")),
)
_NONE_WORDS = {"无", "没有", "none", "n/a", "-", "(无)", "（无）", "无。", "nothing"}
_INLINE = re.compile(  # "结论: achieved" / "**理由**：..." written as a labelled line, not a heading
    r"^\s*[*_]*\s*(结论|判定结论|理由|未通过|verdict|conclusion|reason|failed)\s*[*_]*\s*[:：]\s*[*_]*(.*)$",
    re.IGNORECASE,
)


@dataclass
class Verdict:
    state: str = NOT_YET
    reason: str = ""
    missing: list[str] = field(default_factory=list)
    note: str = ""  # set when the verdict was unclear and so counted as not achieved

    @property
    def achieved(self) -> bool:
        return self.state == ACHIEVED

    def feedback(self) -> str:
        """What the work session hears after a not_yet round: what is missing, not how to fix it."""
        lines = ["独立判定者检查了目标,认为还没有达成。"]
        if self.missing:
            lines.append("没通过的判定项:")
            lines += [f"- {item}" for item in self.missing]
        elif self.reason and not self.note:
            lines.append(f"判定者的理由: {self.reason}")
        else:
            lines.append(
                f"判定者没有给出可用的结论({self.note or '格式无法解析'}),请自己对照判定清单逐条核实。"
            )
        lines.append("把这些补齐,怎么做由你决定;做完后简短说明改了什么。")
        return "\n".join(lines)
        # ("An independent judge found the goal not yet achieved. Failed checks: ... Close these
        # gaps; how is up to you; then say briefly what changed.")


def parse_verdict(text: str) -> Verdict:
    """Parse a judge's reply. Never raises; anything unclear is not_yet with a note."""
    sections = _verdict_sections(strip_fences(text or ""))
    conclusion = sections.get("conclusion")
    if conclusion is None:
        return Verdict(reason=(text or "").strip()[:500], note="判定没有「结论」小节")
    states = _states_in(conclusion)
    reason = sections.get("reason", "").strip()
    missing = _items(sections.get("missing", ""))
    if len(states) != 1:
        note = "结论为空或无法识别" if not states else f"结论含糊: {conclusion.strip()[:80]}"
        return Verdict(NOT_YET, reason, missing, note=note)
    state = states.pop()
    if state == ACHIEVED and missing:
        return Verdict(NOT_YET, reason, missing, note="结论写 achieved, 却列出了未通过项")
    return Verdict(state, reason, missing)


def _verdict_sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    where: str | None = None
    for line in text.splitlines():
        m = HEADING.match(line)
        title = norm_title(m.group(2)) if m else None
        inline = None if m else _INLINE.match(line)
        if inline:
            title = norm_title(inline.group(1))
        if title is not None:
            kind = (
                "conclusion"
                if title in _CONCLUSION_TITLES
                else "reason"
                if title in _REASON_TITLES
                else "missing"
                if title in _MISSING_TITLES
                else None
            )
            if kind or m:
                where = kind
                if kind:
                    out.setdefault(kind, [])  # a later section of the same kind extends the first
                    if inline and inline.group(2).strip(" *_"):
                        out[kind].append(inline.group(2).strip(" *_"))
                continue
        if where is not None:
            out[where].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _states_in(conclusion: str) -> set[str]:
    text = re.sub(r"[*_`|]", " ", conclusion.lower()).replace("not_yet", "not yet")
    text = " ".join(text.split())
    # A template echoed back ("achieved | not_yet | unreachable") names all three: ambiguous.
    found: set[str] = set()
    for state, words in _STATE_WORDS:
        for word in words:
            if word in text:
                found.add(state)
                text = text.replace(word, " ")
    return found


def _items(body: str) -> list[str]:
    items: list[str] = []
    for line in body.splitlines():
        m = _BULLET.match(line)
        if m:
            items.append(m.group(1).strip())
        elif line.strip() and items and line[:1].isspace():
            items[-1] = f"{items[-1]} {line.strip()}"
        elif line.strip():
            items.append(line.strip())
    return [i for i in items if i.lower().strip("。. ") not in _NONE_WORDS and i.lower() not in _NONE_WORDS]
