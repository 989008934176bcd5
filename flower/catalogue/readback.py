"""What flower reads back: the words and shapes its parsers accept from a model (brief and
goal headings, placeholders, verdict states, handoff numbering; flower.starter.brief,
flower.starter.goal, flower.context.handoff), why a verdict counts as not achieved, and the
feedback a work session hears after a not_yet round.
"""

from __future__ import annotations

from flower.catalogue.starter import EMPTY_MARK

# -- what flower reads back: the vocabularies its parsers accept ---------------------------------
# Models answer in many ways; these are the words and shapes flower.starter.brief, flower.starter.goal
# and flower.context.handoff recognise. Regex sources are kept whole so a parser's shape is one line.

BRIEF_ALIASES: dict[str, tuple[str, ...]] = {  # the headings each of 需求.md's sections may go by
    "目标": ("目标", "需求目标", "目的", "goal", "goals", "objective", "objectives"),
    "验收标准": (
        "验收标准",
        "验收条件",
        "验收",
        "完成标准",
        "acceptance criteria",
        "acceptance",
        "definition of done",
        "done when",
    ),
    "边界": (
        "边界",
        "范围",
        "范围与边界",
        "边界与范围",
        "scope",
        "boundaries",
        "boundary",
        "scope and boundaries",
        "scope boundaries",
        "out of scope",
        "non goals",
    ),
    "未知与假设": (
        "未知与假设",
        "未知和假设",
        "假设与未知",
        "未知",
        "假设",
        "待确认",
        "unknowns and assumptions",
        "assumptions and unknowns",
        "unknowns",
        "assumptions",
        "open questions",
    ),
}
# Placeholders meaning "not filled in". "无" / "none" are real answers ("no unknowns"), not blanks.
BRIEF_BLANKS = {"", "(未填)", "（未填）", "未填", "(待填)", "（待填）", "待填", "tbd", "todo", "..."}
EMPTY_MARKS = (EMPTY_MARK, "（未填）")  # the empty placeholder, half- and full-width (目标.md)
FILL_IN_MARK = "<填写>"  # "<fill in>": the blank in the brief template the clarify role is shown
HEADING_NUMBERING = r"^(?:\d+|[一二三四五六七八九十]+)[.、)）:：]\s*"  # "1." / "二、" before a heading
HEADING_PARENS = r"[(（][^)）]*[)）]"  # "(Scope)" / "（边界）" after a heading
HANDOFF_NUMBERING = r"^[\d一二三四五六七八九十]+[.、)）]\s*"  # numbering before a handoff heading

GOAL_TITLES = ("目标", "goal", "目标陈述", "goal statement")  # 目标.md's statement heading
CHECKS_TITLES = ("判定清单", "判定标准", "验收清单", "检查清单", "checklist", "checks")
CHECK_BULLET = r"^\s*(?:[-*+]|\d+[.)、])\s+(?:\[[ xX]\]\s+)?(.*)$"  # "- x", "1. x", "2、x", "- [ ] x"
UNVERIFIABLE_MARK = (  # "[此环境无法验证: why]" at the end of a check ("cannot be verified here")
    r"\s*[\[【]\s*(?:此环境无法验证|本环境无法验证|无法验证|unverifiable(?: here)?|cannot verify here)"
    r"\s*[:：]?\s*(?P<reason>[^\]】]*?)\s*[\]】]\s*[。.;；]?\s*$"
)
UNVERIFIABLE_TAG = " [此环境无法验证:{reason}]"  # how render_goal writes the mark back
NO_REASON_GIVEN = "未说明原因"  # (no reason given)
UNVERIFIABLE_WARNING = "{count} 条判定在此环境无法验证, 判定者会跳过它们: {items}"
# ("N checks cannot be verified here; the judge will skip them: ...")

VERDICT_CONCLUSION_TITLES = ("结论", "判定", "判定结论", "verdict", "conclusion", "result")
VERDICT_REASON_TITLES = ("理由", "原因", "依据", "reason", "reasons", "rationale", "why")
VERDICT_MISSING_TITLES = (
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
# The words for each state; within a state, longest and negated phrases first: "未达成" contains
# "达成", "not achieved" contains "achieved" (flower.starter.goal checks unreachable, not_yet, achieved).
VERDICT_STATE_WORDS: dict[str, tuple[str, ...]] = {
    "unreachable": ("unreachable", "不可达成", "无法达成", "达不成", "不可能达成", "无法实现", "不可达"),
    "not_yet": (
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
    "achieved": ("achieved", "已达成", "达成", "全部通过", "通过"),
}
VERDICT_NONE_WORDS = {
    "无",
    "没有",
    "none",
    "n/a",
    "-",
    "(无)",
    "（无）",
    "无。",
    "nothing",
}  # "no failed checks"
VERDICT_ITEM_TRAILERS = "。. "  # stripped from a failed-check item before it is compared with those
VERDICT_INLINE_LABEL = (  # "结论: achieved" / "**理由**：..." written as a labelled line, not a heading
    r"^\s*[*_]*\s*(结论|判定结论|理由|未通过|verdict|conclusion|reason|failed)\s*[*_]*\s*[:：]\s*[*_]*(.*)$"
)
VERDICT_HINT = r"(结论|判定|verdict|conclusion)"  # a text naming none of these is no verdict (flower_batch.running.repro)

# Why a verdict counts as not achieved (Verdict.note).
VERDICT_NO_CONCLUSION = "判定没有「结论」小节"  # the verdict has no 结论 section
VERDICT_EMPTY_CONCLUSION = "结论为空或无法识别"  # the conclusion is empty or unrecognisable
VERDICT_VAGUE = "结论含糊: {conclusion}"  # the conclusion is ambiguous: ...
VERDICT_CONTRADICTS = "结论写 achieved, 却列出了未通过项"  # says achieved, yet lists failed checks

# What the work session hears after a not_yet round: what is missing, not how to fix it.
FEEDBACK_HEAD = "独立判定者检查了目标,认为还没有达成。"  # an independent judge found it not yet achieved
FEEDBACK_MISSING = "没通过的判定项:"  # the failed checks:
FEEDBACK_REASON = "判定者的理由: {reason}"  # the judge's reasoning: ...
FEEDBACK_UNCLEAR = "判定者没有给出可用的结论({note}),请自己对照判定清单逐条核实。"
# (the judge gave no usable verdict (...): check the checklist item by item yourself)
FEEDBACK_UNPARSABLE = "格式无法解析"  # (the format could not be parsed)
FEEDBACK_TAIL = "把这些补齐,怎么做由你决定;做完后简短说明改了什么。"
# (close these gaps; how is up to you; then say briefly what changed)
