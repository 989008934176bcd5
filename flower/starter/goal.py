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

from flower.catalogue.readback import (
    CHECK_BULLET,
    CHECKS_TITLES,
    EMPTY_MARKS,
    FEEDBACK_HEAD,
    FEEDBACK_MISSING,
    FEEDBACK_REASON,
    FEEDBACK_TAIL,
    FEEDBACK_UNCLEAR,
    FEEDBACK_UNPARSABLE,
    GOAL_TITLES,
    NO_REASON_GIVEN,
    UNVERIFIABLE_MARK,
    UNVERIFIABLE_TAG,
    UNVERIFIABLE_WARNING,
    VERDICT_CONCLUSION_TITLES,
    VERDICT_CONTRADICTS,
    VERDICT_EMPTY_CONCLUSION,
    VERDICT_INLINE_LABEL,
    VERDICT_ITEM_TRAILERS,
    VERDICT_MISSING_TITLES,
    VERDICT_NO_CONCLUSION,
    VERDICT_NONE_WORDS,
    VERDICT_REASON_TITLES,
    VERDICT_STATE_WORDS,
    VERDICT_VAGUE,
)
from flower.catalogue.starter import CHECKS_HEADING, GOAL_HEADING
from flower.catalogue.starter import EMPTY_MARK as EMPTY
from flower.starter.brief import HEADING, norm_title, strip_fences

ACHIEVED, NOT_YET, UNREACHABLE = "achieved", "not_yet", "unreachable"
STATES = (ACHIEVED, NOT_YET, UNREACHABLE)

_GOAL_TITLES = {norm_title(t) for t in GOAL_TITLES}
_CHECK_TITLES = {norm_title(t) for t in CHECKS_TITLES}
_BULLET = re.compile(CHECK_BULLET)
_UNVERIFIABLE = re.compile(UNVERIFIABLE_MARK, re.IGNORECASE)


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
        items = "; ".join(f"{u.check} ({u.reason or NO_REASON_GIVEN})" for u in self.unverifiable)
        return UNVERIFIABLE_WARNING.format(count=len(self.unverifiable), items=items)


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
    if goal.statement in EMPTY_MARKS:
        goal.statement = ""
    for check in checks:
        m = _UNVERIFIABLE.search(check)
        if m:
            check = check[: m.start()].rstrip()
            goal.unverifiable.append(Unverifiable(check, m.group("reason").strip()))
        if check and check not in EMPTY_MARKS:
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
        mark = UNVERIFIABLE_TAG.format(reason=reasons[check]) if check in reasons else ""
        lines.append(f"- {check}{mark}")
    return "\n".join(lines) + "\n"


# -- verdicts ---------------------------------------------------------------------------------


_CONCLUSION_TITLES = {norm_title(t) for t in VERDICT_CONCLUSION_TITLES}
_REASON_TITLES = {norm_title(t) for t in VERDICT_REASON_TITLES}
_MISSING_TITLES = {norm_title(t) for t in VERDICT_MISSING_TITLES}
# Checked in this order: an "unreachable" or a negated phrase must win over the "achieved" inside it.
_STATE_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (state, VERDICT_STATE_WORDS[state]) for state in (UNREACHABLE, NOT_YET, ACHIEVED)
)
_NONE_WORDS = VERDICT_NONE_WORDS
_INLINE = re.compile(VERDICT_INLINE_LABEL, re.IGNORECASE)  # a labelled line, not a heading


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
        lines = [FEEDBACK_HEAD]
        if self.missing:
            lines.append(FEEDBACK_MISSING)
            lines += [f"- {item}" for item in self.missing]
        elif self.reason and not self.note:
            lines.append(FEEDBACK_REASON.format(reason=self.reason))
        else:
            lines.append(FEEDBACK_UNCLEAR.format(note=self.note or FEEDBACK_UNPARSABLE))
        lines.append(FEEDBACK_TAIL)
        return "\n".join(lines)


def parse_verdict(text: str) -> Verdict:
    """Parse a judge's reply. Never raises; anything unclear is not_yet with a note."""
    sections = _verdict_sections(strip_fences(text or ""))
    conclusion = sections.get("conclusion")
    if conclusion is None:
        return Verdict(reason=(text or "").strip()[:500], note=VERDICT_NO_CONCLUSION)
    states = _states_in(conclusion)
    reason = sections.get("reason", "").strip()
    missing = _items(sections.get("missing", ""))
    if len(states) != 1:
        note = (
            VERDICT_EMPTY_CONCLUSION
            if not states
            else VERDICT_VAGUE.format(conclusion=conclusion.strip()[:80])
        )
        return Verdict(NOT_YET, reason, missing, note=note)
    state = states.pop()
    if state == ACHIEVED and missing:
        return Verdict(NOT_YET, reason, missing, note=VERDICT_CONTRADICTS)
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
    return [
        i
        for i in items
        if i.lower().strip(VERDICT_ITEM_TRAILERS) not in _NONE_WORDS and i.lower() not in _NONE_WORDS
    ]
