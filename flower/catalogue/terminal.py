"""What the person sees and types at the terminal (flower.cli, flower.starter.wake): the
prompts, the wake banner, the step notices and lines, the answers' lines, `go`'s option help,
and the words flower_batch finds in every wake line flower prints.
"""

from __future__ import annotations

# -- cli.terminal -----------------------------------------------------------------------------
# Everything here is said to the person, in English. What the agent is told, and the names of the
# published flower's files and steps (需求.md, 目标.md, 确认需求 …), stay as the workflow defines
# them (names.py, starter.py); a step is shown to the person by its label (STEP_LABELS).

WAKE_QUESTION = (
    "Continue? Enter = go on; or say something new; /new = start something else (Ctrl-C quits)\n> "
)
TASK_PROMPT = "What shall I do? One sentence is enough; Enter starts (Ctrl-C quits)\n> "
ADD_PROMPT = "Add a word? Enter = just continue (Ctrl-C again quits)\n> "

# -- what the person sees on the terminal ------------------------------------------------------
# (flower.cli.display, flower.cli.go_printer, flower.starter.wake)
WOKE_MARK = "  <- continued · wake #{woke}"  # after a step header
BANNER = "<- back in {where} where we left off  "  # the wake banner
BANNER_BRIEF = "brief settled"
BANNER_CHECKS = "goal: {checks} checks"
BANNER_CONTEXT = "{step} context {tokens}"
BANNER_WOKE = "wake #{woke}"
NOTICE_HANDOFF_DUE = (
    "  context {context} is past the handoff line {at}: stopping to write the handoff document"
)
NOTICE_HANDED_OVER = "  handoff: a fresh session took over (generation {generation}), document {doc}"
NOTICE_LIMITS = "  limits: {text}"  # the time and budget the agent was told it has left (LIMITS_SUMMARY)
LIMITS_SUMMARY_TIME = "{time_left} left (deadline {deadline})"
LIMITS_SUMMARY_BUDGET = "${budget_left} of ${budget} budget left (${spent} spent)"
LIMITS_SUMMARY_JOIN = " · "
NOTICE_TIME_UP = "  time is up: {seconds} seconds to write the wrap-up notes {notes}"
NOTICE_DEGRADED = "  the context is full: the runtime wrote the handoff document (degraded handoff)"
NOTICE_CONTEXT = "  context {context}, handoff line {at}"
NOTICE_OFFLINE = "  cannot reach {host}:{port}: waiting for the network, then the same session goes on"
NOTICE_OFFLINE_VIA = (
    "  cannot reach {host}:{port} (through {via}): waiting for the network, then the same session goes on"
)
FROZEN_LINE = "== {name}: settled, skipped ({path})"  # its content still flows on
GOAL_LINE = "  goal: {statement}  ·  {count} checks  ->  {path}"
JUDGE_LINE = "  -- {name}: an independent judge (a fresh session) checks against 目标.md"
WAIT_MINUTES = "{n:.0f} minutes"
WAIT_SECONDS = "{n:.0f} seconds"
ASK_HINT = "   Enter submits; an empty line = no answer; unanswered after {wait}, the agent decides"
UNCLEAR_VERDICT = "    (unclear verdict, counted as not achieved: {note})"
NEXT_ROUND = "  -> back to the same session with the checks that failed (round {round}/{rounds})"
INBOX_DELIVERED = "  -> in the inbox (the agent reads it between phases), and in 需求.md's 运行中补充"
ROUNDS_SPENT = "the judge did not pass it and the rounds ran out"
STOPPED_AT = "not finished: stopped at {step}"
HOW_TO_CONTINUE = (
    '  run flower again to continue, or flower "more words" to add some (--rounds N for more rounds)'
)
CLARIFIED_ONLY = "brief settled (--clarify-only: stopping here)"
DONE_JUDGED = "done: an independent judge confirmed the goal"
DONE = "done"
NOTE_LABELS = ("brief", "goal", "Q&A")  # the notes listed at the end: 需求.md, 目标.md, 问答记录.md

# The starter flow's steps as the person reads them in progress lines and errors; the step
# names themselves (lineage, manifest, the notes' file names) are the published flower's.
STEP_LABELS = {"确认需求": "clarify", "设定目标": "set goal", "干活": "work", "干活·判定": "work·judge"}

# -- cli.go_printer ---------------------------------------------------------------------------

ANSWER_LINES = {  # how a question to the person ended, by Exchange.status
    "answered": "   ✓ answer received",
    "auto": "   (fully automatic: nobody answers; the agent decides and records its assumption)",
    "timeout": "   (no answer in time: the agent decides and records its assumption)",
    "declined": "   (no answer: the agent decides)",
    "budget": "   (the question budget is spent; not passed on to you)",
}


# -- cli.go: the options of `flower [go]` ---------------------------------------------------------

GO_WORDS_HELP = "the task; in a directory already in progress: words to add (none = just continue)"
GO_ASKS_HELP = "questions the agents may ask you in this run (-1 = unlimited)"
GO_ROUNDS_HELP = "work rounds, each judged against 目标.md (resets every wake)"
GO_NO_GOAL_HELP = "no 设定目标 step and no judge: clarify, then work"
GO_JUDGE_CAN_RUN_HELP = "the judge may run commands (Bash) to verify"
GO_TIMEOUT_HELP = "seconds a question waits for your answer; 0 = fully automatic (nobody answers, no prompts)"
GO_ISOLATE_HELP = "each worker changes its own git worktree (needs a git repository)"
GO_NO_HANDOFF_HELP = "never hand over to a fresh session when the context fills up"
GO_NEW_HELP = "archive 需求.md, 目标.md and lineage.json, then start something new"
GO_CLARIFY_ONLY_HELP = "only write 需求.md, then stop"
GO_NO_TRIM_HELP = "keep old large tool results in the context on resume"

# -- what flower_batch finds in flower's output ----------------------------------------------------

# Words in every wake line flower prints (BANNER, WOKE_MARK, BANNER_WOKE); the Chinese ones are
# an earlier flower's, still in the logs of jobs it ran.
WAKE_LINE_MARKS = ("where we left off", "wake #", "接上", "唤醒")


def step_label(name: str) -> str:
    """A step's name as the person reads it: the starter flow's steps by their label (干活·判定#2
    -> work·judge#2), any other step as its workflow names it."""
    base, sep, attempt = name.partition("#")
    return STEP_LABELS.get(base, base) + sep + attempt
