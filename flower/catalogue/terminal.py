"""What the person sees and types at the terminal (flower.cli, flower.starter.wake): the
prompts, the wake banner, the step notices and lines, the answers' lines, `go`'s option help,
and the words flower_batch finds in every wake line flower prints.
"""

from __future__ import annotations

# -- cli.terminal -----------------------------------------------------------------------------

WAKE_QUESTION = "接着上次? 直接回车 = 接着做;也可以说点新的;/new = 重开一件事(Ctrl-C 退出)\n> "
# ("Continue? Enter = go on; or say something new; /new = start something else (Ctrl-C quits)")
TASK_PROMPT = "要做什么? 一句话就够,回车开始(Ctrl-C 退出)\n> "
# ("What shall I do? One sentence is enough; Enter starts (Ctrl-C quits)")
ADD_PROMPT = "补充一句? 回车 = 直接接着做 (再按 Ctrl-C 退出)\n> "
# ("Add a word? Enter = just continue (Ctrl-C again quits)")

# -- what the person sees on the terminal ------------------------------------------------------
# (flower.cli.display, flower.cli.go_printer, flower.starter.wake)
WOKE_MARK = "  <- 接上次 · 第 {woke} 次唤醒"  # after a step header: continued, the N-th wake
BANNER = "<- 在 {where} 接上上次  "  # the wake banner: "back in <dir> where we left off"
BANNER_BRIEF = "需求已确认"  # the brief is settled
BANNER_CHECKS = "目标 {checks} 条"  # the goal has N checks
BANNER_CONTEXT = "{step}上下文 {tokens}"  # the step's context size
BANNER_WOKE = "第 {woke} 次唤醒"  # the N-th wake
NOTICE_HANDOFF_DUE = (
    "  上下文 {context} 过了交接线 {at}: 停下来写交接文档"  # context past the line: writing the handoff
)
NOTICE_HANDED_OVER = "  交接: 新会话接手 (第 {generation} 代), 文档 {doc}"  # a fresh session took over
NOTICE_LIMITS = "  限制: {text}"  # what the agent was told of its time and budget
NOTICE_TIME_UP = "  时间到: 给 {seconds} 秒写收尾笔记 {notes}"  # time is up: N seconds to write the notes
NOTICE_DEGRADED = "  上下文装不下了: 运行时代写交接文档 (降级交接)"  # full: the runtime wrote the document
NOTICE_CONTEXT = "  上下文 {context}, 交接线 {at}"  # context size, the handoff line
NOTICE_OFFLINE = "  连不上 {host}:{port}: 等网络恢复后接着同一个会话做"  # unreachable: waiting, same session
NOTICE_OFFLINE_VIA = (
    "  连不上 {host}:{port} (经 {via}): 等网络恢复后接着同一个会话做"  # the same, through a socket
)
FROZEN_LINE = "== {name}: 已定下, 跳过 ({path})"  # already settled: skipped (its content still flows on)
GOAL_LINE = "  目标: {statement}  ·  判定清单 {count} 条  ->  {path}"
JUDGE_LINE = "  -- {name}: 独立判定者 (全新会话) 对照 目标.md 检查"  # an independent judge, a fresh session
WAIT_MINUTES = "{n:.0f} 分钟"
WAIT_SECONDS = "{n:.0f} 秒"
ASK_HINT = "   回车提交;空行 = 不回答;{wait}内不答由 agent 自己决定"
# (Enter submits; an empty line = no answer; unanswered after <wait>, the agent decides)
UNCLEAR_VERDICT = "    (结论不清楚, 按未达成算: {note})"  # unclear verdict: counted as not achieved
NEXT_ROUND = "  -> 带着没通过的项回到同一个会话接着做 (第 {round}/{rounds} 轮)"  # back with the failed checks
INBOX_DELIVERED = "  -> 放进收件箱 (agent 在阶段之间会读), 也记进了 需求.md 的「运行中补充」"
# (into the inbox — the agent reads it between phases — and into 需求.md)
ROUNDS_SPENT = "判定没通过, 轮数用完了"  # the judge did not pass it and the rounds ran out
STOPPED_AT = "没做完: 停在「{step}」"  # not finished: stopped at <step>
HOW_TO_CONTINUE = '  再运行 flower 接着做, 或 flower "补充的话" 加一句 (--rounds N 给更多轮)'
# (run flower again to continue, or add words; --rounds N for more rounds)
CLARIFIED_ONLY = "需求已确认 (--clarify-only: 到此为止)"
DONE_JUDGED = "做完了: 独立判定者确认目标已达成"  # done: the judge confirmed the goal
DONE = "做完了"
NOTE_LABELS = ("需求", "目标", "问答")  # the notes listed at the end: brief, goal, Q&A log

# -- cli.go_printer ---------------------------------------------------------------------------

ANSWER_LINES = {  # how a question to the person ended, by Exchange.status
    "answered": "   ✓ 收到回答",  # answer received
    "auto": "   (全自动: 没人回答, agent 自己决定并记下假设)",  # fully automatic: the agent decides
    "timeout": "   (没等到回答: agent 自己决定并记下假设)",  # no answer in time
    "declined": "   (不回答: agent 自己决定)",  # declined
    "budget": "   (提问次数用完, 没有转给你)",  # question budget spent
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

WAKE_LINE_MARKS = ("接上", "唤醒")  # words in every wake line flower prints (BANNER, WOKE_MARK, BANNER_WOKE)
