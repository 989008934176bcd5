"""The runtime's texts (flower.runtime): the prompt of a resumed broken round, what the agent
is told of its time and budget (each the default of one key of a wording file,
docs/limits.md), the wrap-up notes the runtime writes itself, the step's error at the
deadline, and what Ctrl-C says on the terminal (flower.runtime.signals).
"""

from __future__ import annotations

from flower.catalogue.context import FACTS_ONLY_BODY

# -- runtime.resilience -----------------------------------------------------------------------

# Said to the model when a broken round is resumed. Upstream's wording; deliberately no error
# details. ("The last round was cut off before it finished. Check what is already recorded in
# the workbench and continue from where it stopped. Do not start over.")
RESUME_PROMPT = (
    "上一轮在中途被中断，没有完成。先查看工作台里已经记下的内容，从中断的地方接着做，不要从头开始。"
)

# -- runtime.signals: Ctrl-C ----------------------------------------------------------------
INTERRUPT_NOTICE = "flower: Ctrl-C received: stopping at the next message boundary (Ctrl-C again quits)"
INTERRUPT_PROMPT = "Add a word? Enter = just continue (Ctrl-C quits)\n> "

# -- runtime.limits: what the agent is told about its time and budget ---------------------------
# Each is the default of one key of a wording file (`--notice-wording FILE`, docs/limits.md).

# "[flower] Limits of this run: {parts}. Plan for them." — the start of every session.
LIMITS_START = "[flower] 本次运行的限制：{parts}。请按这个安排工作。"
# "{time_left} of time left (deadline {deadline})"
LIMITS_TIME = "剩余时间 {time_left}（截止 {deadline}）"
# "${budget_left} of budget left (of ${budget}, ${spent} spent)"
LIMITS_BUDGET = "剩余预算 ${budget_left}（共 ${budget}，已用 ${spent}）"
# "；" — joins the parts above
LIMITS_JOIN = "；"
# "[flower] {percent}% of the {what} is used: {left} left." — a threshold crossed
LIMITS_NOTICE = "[flower] {what}已用 {percent}%：还剩 {left}。"
LIMITS_WHAT_TIME = "时间"  # "time"
LIMITS_WHAT_BUDGET = "预算"  # "budget"
# "Your notes from when the time ran out last time are in {path}: read them first and carry on
# from their 下一步." — added to the start of a session whose step has such notes
LIMITS_NOTES = "上次时间用完时你写的收尾笔记在 {path}：先读它，从「下一步」接着做。"
# "Time is up (deadline {deadline}). Stop the work now. Within {seconds} seconds, write your
# notes for whoever continues this session later: reply with the whole document (no tools,
# nothing else); it is saved to {path}. Use these five sections: ..."
LIMITS_TIME_UP = """\
[flower] 时间到了（截止 {deadline}）。现在停下手上的工作。请在 {seconds} 秒内写收尾笔记，给之后接着这个会话做的人看：
直接把笔记全文作为你的回复（不要调用工具，不要写别的），它会被保存到 {path}。用下面五个小节，每节写实在的内容：

## 现在在做什么
(正在进行的事，做到了哪一步)

## 已经定下的
(已经确认的决定、约定、关键事实；已经产出的文件和它们的路径)

## 走不通的路
(试过但行不通的做法，以及为什么，免得重走)

## 下一步
(接着做时第一件要做的事，然后是后面几步)

## 现场
(相关的文件、命令、报错原文、要注意的状态)
"""
# The notes the runtime writes itself when the session wrote none in the wrap-up window (same
# placeholders as DEGRADED_DOC): "(Notes: <step>, written by the runtime. The time was up and
# the session wrote no usable notes ({error}); only facts the runtime knows — check the
# workspace first. Doing: the original task, stopped at the deadline; its last words. Settled:
# (not summarised). Dead ends: (unknown). Next: look at what the workspace and the workbench
# hold and carry on from there, don't start over. Scene: the task, recent tool calls.)"
WRAP_UP_DEGRADED_DOC = (
    """\
# 收尾笔记: {step} (运行时代写)

> 这份笔记是运行时代写的：时间到了，会话没有写出可用的收尾笔记 ({error})。
> 下面只有运行时确切知道的事实；请先核对工作区的现状。

## 现在在做什么
在做原始任务 (见下)，到截止时间时停下。最后说的话：
{last_words}

"""
    + FACTS_ONLY_BODY
)
# The step's error when the deadline ended it (manifest.json, .exit.json, flower-batch's record).
LIMITS_TIMED_OUT = "timeout: the deadline passed"
