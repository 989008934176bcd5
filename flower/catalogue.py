"""Every text the model or the person reads, and the step and file names — one fact, one place.

Grouped by who reads it. Modules import from here instead of writing the literal inline, so a
step name, a file name or a prompt is changed (or translated) in exactly one line. English glosses
follow the Chinese texts as comments.
"""

from __future__ import annotations

# -- where flower keeps things (file and directory names) --------------------------------------

SESSIONS_DB = "sessions.db"  # every session's transcript (flower.context.store)
MANIFEST_FILE = "manifest.json"  # one row per step attempt (flower.runtime.manifest)
LINEAGE_FILE = "lineage.json"  # which session each step used last (flower.flows.lineage)
WORKBENCH_DIR = ".flower"  # the workbench, under the workspace (flower.context.workbench)
NOTES_DIR = "notes"  # the workbench's notes: 需求.md, 目标.md, 问答记录.md, 交接-<step>.md
SCRIPTS_DIR = "scripts"
ARTIFACTS_DIR = "artifacts"
INDEX_FILE = "INDEX.md"  # what is where in the workbench, one line per file

# -- starter.flow -----------------------------------------------------------------------------

CLARIFY = "确认需求"
GOAL = "设定目标"
WORK = "干活"
BRIEF_FILE = "需求.md"
GOAL_FILE = "目标.md"
QA_FILE = "问答记录.md"
ARCHIVE_DIR = "archive"
CLARIFY_PROMPT = "用户的请求:\n\n{ask}\n\n把它整理成需求确认书。"
# ("The person's request: ... Turn it into a requirement brief.")
CLARIFY_RESUME = (
    "刚才的需求确认还没有做完(上次在中途停下了)。接着做完它,不要从头开始:已经问过、答过的不要再问,"
    "已经查过的不用再查。最后照原来的格式回复完整的需求确认书,四节都要填写。"
)
# ("The clarification you were doing was interrupted. Finish it, don't start over: don't ask
# again what was asked and answered, don't re-read what you read. Then reply with the complete
# brief in the same format, all four sections filled.)
CLARIFY_REPAIR = "需求确认书还缺这几节: {missing}。补上它们,然后重新回复完整的确认书(四节都要有)。"
# ("The brief still lacks these sections: ... Fill them in and reply with the whole brief.")
GOAL_RULES = """\
## 设定目标
你把一份需求确认书变成 目标.md:一句目标陈述,加一份判定清单。清单会交给一个独立判定者,它只看工作区里的实际状态判断目标是否达成。
- 先读一读工作区,弄清现状。你不实现、不改任何文件。
- 每条判定具体、可检查(文件在不在、内容是什么、命令的退出码),一条只查一件事。
- 需求里「唤醒时追加」「运行中补充」的话也是需求,要写进清单。
- 这个环境里无法验证的条目照写,但在行末标上 [此环境无法验证:原因]。
- 最后的回复只包含下面格式的 目标.md:

# 目标

<一句话:做完是什么样子>

# 判定清单

- <一条可检查的判定>
"""
# (Setting the goal: turn the brief into 目标.md — one statement and a checklist an independent
# judge verifies by looking at the workspace. Read the workspace first; do not implement or edit.
# Each check concrete and checkable, one thing per check. Words under 唤醒时追加 / 运行中补充 are
# requirements too. Mark checks this environment cannot verify with [此环境无法验证:reason].
# The final reply is only 目标.md in this format.)
GOAL_PROMPT = "照这份需求确认书设定目标,写出 目标.md:\n\n{brief}"
# ("Set the goal from this brief and write 目标.md: ...")
GOAL_REPAIR = "目标.md 不完整: {missing}。照格式重新回复完整的 目标.md(# 目标 一句话,# 判定清单 至少一条)。"
# ("目标.md is incomplete: ... Reply again with the whole 目标.md in the format.")
WORK_INSTRUCTIONS = "你负责把需求做完。需求确认书和目标在任务里;判定清单会由一个独立判定者逐条检查。"
# (You see the requirement through to done. The brief and the goal are in the task; an
# independent judge checks the checklist item by item.)
WORK_PROMPT = "照这份需求做:\n\n{brief}"
# ("Do this requirement: ...")
WORK_GOAL = "\n\n目标和判定清单(做完后由独立判定者逐条检查):\n\n{goal}"
# ("The goal and checklist (an independent judge checks them when you are done): ...")
WORK_RESUME = (
    "接着上次的工作继续。先看看工作区和工作台里已经有什么,把没做完的做完;如果都做完了,简短说明现状。"
)
# ("Continue where you left off. Look at what the workspace and the workbench hold, finish what
# is unfinished; if everything is done, say briefly where things stand.")
WAKE_PROMPT = "用户补充了一句(已追加到 需求.md 的「唤醒时追加」,目标.md 已按它重新设定):\n\n{words}"
# ("The person added this (appended to 需求.md under 唤醒时追加; 目标.md was re-derived from it): ...")
CODER_DESCRIPTION = "动手实现:写代码、改文件、跑命令和测试。要动手的活派给它。"
# (Hands-on work: write code, edit files, run commands and tests. Dispatch hands-on work to it.)
CODER_PROMPT = "你负责动手实现。每改一处就验证一次(读回文件、跑一下命令或测试),别攒到最后。"
# (You implement. Verify after every change — read the file back, run the command or tests.)
JUDGE_PROMPT = "检查这个工作区是否达成了下面这份 目标.md({path}),按格式给出结论。\n\n{goal}"
# ("Check whether this workspace achieves the 目标.md below, and answer in the format.")
UNREACHABLE_QUESTION = (
    "判定者认为「{step}」的目标在这个环境里无法达成: {reason}\n"
    "回 1 = 接受现状,算完成;回 2 加一句话 = 改目标;回 3 = 判定者错了,继续做。不回答就停下。"
)
# ("The judge finds the goal of <step> unreachable here: <reason>. 1 = accept as done; 2 + words =
# change the goal; 3 = the judge is wrong, keep going. No answer stops the step.")
OVERRULED = (
    "用户认为判定者错了,目标在这个环境里可以达成。继续做,把判定清单上没通过的补齐。判定者的理由是: {reason}"
)
# ("The person says the judge was wrong and the goal is reachable here. Carry on and close the
# failing checks. The judge's reasoning was: ...")
GOAL_CHANGED = "用户修改了目标: {words}\n按修改后的目标继续做。"
# ("The person changed the goal: ... Carry on towards the changed goal.")
CHANGED_MARK = "(用户修改: {words})"  # appended to the goal statement: "(changed by the person: ...)"

# -- starter.brief ------------------------------------------------------------------------------

BRIEF_HEADER = "# 需求确认书"
BRIEF_SECTIONS = ("目标", "验收标准", "边界", "未知与假设")
EMPTY_MARK = "(未填)"
WAKE_HEADING = "唤醒时追加"
RUN_HEADING = "运行中补充"

# -- starter.goal -------------------------------------------------------------------------------

GOAL_HEADING = "目标"
CHECKS_HEADING = "判定清单"
VERDICT_FORMAT = """\
只按下面的格式作答,三个小节都要有:

## 结论
achieved | not_yet | unreachable (只写其中一个)

## 理由
<两三句话:你检查了什么,看到了什么>

## 未通过
- <没通过的那条判定,原样抄写> —— <你实际看到的情况>
(全部通过时写「无」)
"""
# ("Answer in exactly this format: 结论 = one of achieved / not_yet / unreachable; 理由 = what you
# checked and saw; 未通过 = one failed check per bullet, copied verbatim, with what you saw; 无 if none.")

# -- starter.channel ----------------------------------------------------------------------------

# What the model reads. Upstream's language is Chinese; the English meaning is in each comment.
NO_ANSWER = (
    "没有人会回答这个问题(无人值守或等待超时)。不要再等,也不要换个说法再问:"
    "自己做出最合理的决定,把它作为假设记录下来(写进「未知与假设」),然后继续。"
)  # Nobody will answer (unattended or timed out). Don't wait or re-ask: decide, record the assumption, proceed.
DECLINED = "对方选择不回答这个问题。自己做出最合理的决定,把它作为假设记录下来,然后继续。"
# The person chose not to answer. Decide yourself, record the assumption, proceed.
BUDGET_SPENT = "提问次数已用完(question budget exhausted):自己决定,并把假设记录下来,然后继续。"
# Question budget exhausted: decide yourself and record the assumption, then proceed.
ANSWERED = "对方的回答:\n{answer}"  # The person's answer:
INBOX_EMPTY = "(没有新消息)"  # (no new messages)
INBOX_HEAD = "对方在你工作期间发来的消息(按时间先后),请纳入考虑:"  # Messages the person sent meanwhile, oldest first; take them into account:
ASK_DESCRIPTION = (
    "向用户提一个问题并等待回答。只问只有用户能决定的事(目标、取舍、偏好),一次只问一件事,"
    "问题要自足。可能没有人回答:那时按工具结果的指示自己决定并记录假设。"
)  # Ask the person one self-contained question only they can decide; maybe nobody answers.
INBOX_DESCRIPTION = "读取用户在你工作期间发来的新消息(读过即清空)。在阶段之间调用一次。"
# Read the messages the person sent while you worked (read once). Call it between phases.

# -- starter.roles ------------------------------------------------------------------------------

WORKTREES = ".flower/worktrees"
WORKER_RULES = """\
## 干活规则
- 你拿到的任务是自足的:背景写在任务说明里,或在它指给你的文件里。缺信息就按最合理的理解去做,并在回复里写明这个假设。
- 长输出(日志、报告、长列表,超过 2000 字符)写进文件(工作台的 artifacts/ 或任务指定的位置),回复里只给路径。
- 不要把日志、大段代码或命令输出原样贴进回复。
- 回复不超过 30 行,固定四段:
  结论: 一两句话,做成了什么、没做成什么
  证据: 你实际运行或检查过的东西(命令、退出码、测试通过数),一行一条
  产出: 新建或改动的文件路径
  未验证: 没能验证的地方;没有就写「无」"""
# (Work rules: the task is self-contained — background is in the brief or in files it names;
# when something is missing, take the most reasonable reading and state the assumption. Long
# outputs (over 2,000 chars) go to files, reply with the path. Never paste logs or command output.
# Reply in at most 30 lines: conclusion / evidence / output / unverified.)
WORKTREE_PATH_SLOT, WORKTREE_BRANCH_SLOT = "⟦path⟧", "⟦branch⟧"  # filled in per worker (roles._name_worktree)
ISOLATE_HEADING = "## 隔离工作区"  # the heading that marks an isolated worker's prompt (roles.is_isolated)
ISOLATE_RULES = (
    ISOLATE_HEADING
    + """
- 你的所有改动只落在 git worktree `⟦path⟧`(分支 `⟦branch⟧`)里,不要改主工作区的文件。
- 开始前确认它存在;不存在就在仓库根目录运行 `git worktree add -b ⟦branch⟧ ⟦path⟧`(分支已存在时用 `git worktree add ⟦path⟧ ⟦branch⟧`)。
- 在 worktree 里提交你的改动(`git -C ⟦path⟧ commit`);合并不归你管,不要合并。"""
)
# (Isolation: all your changes land in git worktree <path> on branch <branch>, never in the main
# checkout; create it if missing; commit there; merging is the workflow's job, not yours.)
COORDINATOR_RULES = """\
## 协调规则
- 你是协调者:拆分任务、派活、核对结果。你自己不写、不改文件(Write/Edit 会被拒绝);要动手的活用 Agent 工具派给 worker。
- 派出去的任务必须自足:worker 看不到你的上下文。把目标、相关文件路径、约束和怎样算做完写进任务说明,或让它先读某个文件。
- worker 的回复是摘要;要核对就自己读它给出的文件。
- 用 TodoWrite 维护进度,一次只推进一件事。"""
# (Coordination: split, dispatch, verify. You never write files yourself (Write/Edit are denied);
# dispatch hands-on work with the Agent tool. Dispatched tasks are self-contained — workers don't
# see your context. Worker replies are summaries: verify by reading the files they name.)
GLANCE_RULES = "- Bash 只用来快速看一眼(ls、git status、跑一下测试),不要用它改文件。"
# (Bash is for a quick look only — ls, git status, run the tests — never to change files.)
CHANNEL_RULES = """\
- 只有用户能决定的事(目标、取舍、偏好)才用 mcp__human__ask 问,一次一个问题;没人回答就自己决定并记录假设。
- 每完成一个阶段调用一次 mcp__human__inbox,看用户有没有补充。"""
# (Ask only what only the person can decide, one question at a time; if nobody answers, decide
# and record the assumption. Check mcp__human__inbox after each phase.)
CLARIFY_RULES = """\
## 确认需求
你的任务是把用户的请求整理成一份需求确认书,不是去实现它。
- 先读一读工作区,弄清现状;能从文件里查到的事不要问用户。
- 只有用户能决定的事才用 mcp__human__ask 问,一次一个问题,总共尽量不超过三个。没人回答就按最合理的理解写进「未知与假设」。
- 最后的回复只包含下面这份确认书,四节都要填写,不要贴代码:

"""
# (Clarify: turn the request into a requirement brief, do not implement it. Read the workspace
# first; don't ask what the files answer. Ask only what only the person can decide, one at a
# time, three at most; unanswered -> write the assumption under 未知与假设. The final reply is only
# the brief below, all four sections filled, no code.)
JUDGE_RULES = """\
## 独立判定
你是独立判定者。对照 目标.md 的判定清单,逐条检查工作区里的实际状态,判断目标是否达成。
- 只相信你亲自看到的证据,不要采信干活的人自己的说法。
- 你只判定,不修复:不要改任何文件。
- 标着 [此环境无法验证:…] 的条目跳过,不算未通过。
- 任何一条可验证的判定没通过,结论就是 not_yet;全部通过才是 achieved;只有在这个环境里根本不可能达成时才写 unreachable,并在理由里说明原因。
"""
# (Independent judge: check every item of 目标.md's checklist against the workspace; trust only
# what you see yourself, never the worker's claims; judge, don't fix; skip unverifiable items;
# any failed verifiable check -> not_yet; all passed -> achieved; unreachable only when it is
# impossible in this environment, with the reason.)
JUDGE_NO_RUN = "- 你不能运行命令。需要运行才能确认的条目,依据代码和工作台里留下的证据(日志、报告)判断;证据不足就算未通过,并写明缺什么证据。\n"
# (You cannot run commands: judge such items from code and the evidence left in the workbench;
# missing evidence counts as not passed — say which evidence is missing.)
JUDGE_CAN_RUN = "- 你可以用 Bash 运行测试或命令来验证,但不要用它改文件。\n"
# (You may run tests or commands with Bash to verify, but never to change files.)
ORACLE_RULES = """\
## 旁路问答
你回答关于这个工作区的问题。只读不改,回答简短,给出依据(文件路径和行号)。查不到就直说查不到。"""
# (Side questions: answer about this workspace, read-only, briefly, with evidence (path:line);
# say so when you cannot find out.)
DELEGATE_REASON = "协调者不亲自改文件({tool} 被拒绝)。把这件事写成自足的任务,用 Agent 工具派给 worker。"
# (The coordinator does not edit files itself ({tool} denied). Write it up as a self-contained
# task and dispatch it to a worker with the Agent tool.)
WHITELIST_REASON = "这个角色不能用 {tool}。可用的工具: {allowed}。"
# (This role may not use {tool}. Allowed tools: {allowed}.)

# -- context.handoff --------------------------------------------------------------------------

HANDOFF_SECTIONS = ("现在在做什么", "已经定下的", "走不通的路", "下一步", "现场")
HANDOFF_REQUIRED = ("现在在做什么", "下一步")
# Asked of the session whose context is full. It answers with the document as its reply; the
# runtime writes the file, so a read-only role can hand over too.
HANDOFF_WRITE_PROMPT = """\
上下文快满了，这个会话要交给一个全新的会话接着做。请现在写交接文档，直接把文档全文作为你的回复（不要调用工具，不要写别的），
它会被保存到 {path}。接手的人只看得到这份文档和原始任务，看不到我们之间的对话。用下面五个小节，每节写实在的内容：

## 现在在做什么
(正在进行的事，做到了哪一步)

## 已经定下的
(已经确认的决定、约定、关键事实；已经产出的文件和它们的路径)

## 走不通的路
(试过但行不通的做法，以及为什么，免得重走)

## 下一步
(接手后第一件要做的事，然后是后面几步)

## 现场
(相关的文件、命令、报错原文、要注意的状态)
"""
# The successor's first prompt: the document inline (no Read permission needed) plus the task.
HANDOFF_SEED_PROMPT = """\
你在接手一个进行中的任务。上一个会话的上下文满了，它把进展写进了交接文档 {path}，全文如下：

{doc}

原始任务：
{task}

从「下一步」接着做，不要从头开始；「走不通的路」里的做法不要再试。"""

# -- context.pruning --------------------------------------------------------------------------

# Upstream's wording, plus a clause because a stopped call may have had effects: "[the previous
# round was cut off here; this tool result was never produced; the call may have partly run]".
INTERRUPTED_NOTE = "[上一轮在这里被中断，这个工具结果没有产生；这个调用可能已经部分执行]"
# "[the previous round stopped here]"
CUT_OFF_NOTE = "[上一轮在这里中断]"

# -- runtime.resilience -----------------------------------------------------------------------

# Said to the model when a broken round is resumed. Upstream's wording; deliberately no error
# details. ("The last round was cut off before it finished. Check what is already recorded in
# the workbench and continue from where it stopped. Do not start over.")
RESUME_PROMPT = (
    "上一轮在中途被中断，没有完成。先查看工作台里已经记下的内容，从中断的地方接着做，不要从头开始。"
)

# -- cli.terminal -----------------------------------------------------------------------------

WAKE_QUESTION = "接着上次? 直接回车 = 接着做;也可以说点新的;/new = 重开一件事(Ctrl-C 退出)\n> "
# ("Continue? Enter = go on; or say something new; /new = start something else (Ctrl-C quits)")
TASK_PROMPT = "要做什么? 一句话就够,回车开始(Ctrl-C 退出)\n> "
# ("What shall I do? One sentence is enough; Enter starts (Ctrl-C quits)")
ADD_PROMPT = "补充一句? 回车 = 直接接着做 (再按 Ctrl-C 退出)\n> "
# ("Add a word? Enter = just continue (Ctrl-C again quits)")

# -- flows.continuity -------------------------------------------------------------------------

CONTINUITY_FILE = "continuity.json"

# -- exitinfo ---------------------------------------------------------------------------------

EXIT_FILE = ".exit.json"


# -- what the person sees on the terminal ------------------------------------------------------
# (flower.cli.display, flower.cli.go_printer, flower.starter.wake, flower.runtime.signals)

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
INTERRUPT_NOTICE = "flower: 收到 Ctrl-C，在下一个消息边界停下 (再按一次 Ctrl-C 退出)"
# (Ctrl-C received: stopping at the next message boundary; press again to quit)
INTERRUPT_PROMPT = "补充一句? 回车 = 直接接着做 (Ctrl-C 退出)\n> "  # add a word? Enter = just continue

# -- more step and file names -----------------------------------------------------------------

JUDGE_SUFFIX = "·判定"  # a judge's run is named <step>·判定#N; never a lineage key
HANDOFF_FILE = "交接-{step}.md"  # the handoff document of <step>, in the notes
WRAP_UP_FILE = "收尾-{step}.md"  # the notes <step> wrote when its time was up
COORDINATOR = "协调者"  # the starter flow's work coordinator
ORACLE = "旁路问答"  # the default oracle role's name


# -- context.workbench: INDEX.md and the agent's workbench block ------------------------------

WORKBENCH_SUBDIRS = {  # what each directory of the workbench is for, as INDEX.md says it
    "scripts": "可复用的脚本",  # reusable scripts
    "artifacts": "产出物: 超过 {threshold} 字符的输出放这里",  # outputs over 2,000 chars
    "notes": "笔记: 需求、目标、问答记录、交接文档",  # notes: brief, goal, Q&A log, handoffs
}
WORKBENCH_COUNTED = {  # directories other parts of flower own; INDEX.md only counts their entries
    "spill": "被截出的长工具结果",  # long tool results spilled out of the context
    "worktrees": "各 worker 的 git worktree",  # the workers' git worktrees (isolate=True)
}
INDEX_HEAD = ["# 工作台索引", "", "由 flower 自动生成,每个文件一行。", ""]
# ("Workbench index, generated by flower, one line per file.")
INDEX_COUNT = "- `{sub}/` — {what} ({count} 项)"  # N entries
INDEX_EMPTY = "(还没有文件)"  # (no files yet)
INDEX_MORE = "- …… 另有 {more} 个文件未列出"  # … N more files
BINARY_FILE = "二进制, {size} 字节"  # binary, N bytes
EMPTY_FILE = "(空文件)"  # (empty file)
WORKBENCH_BLOCK = (
    "## 工作台 `{where}/`\n"
    "- `{where}/INDEX.md`: 工作台里有什么,先读它。\n"
    "- `{where}/scripts/`: 可复用的脚本放这里。\n"
    "- `{where}/artifacts/`: 超过 {threshold} 字符的输出(日志、报告、长列表)写成文件放这里,"
    "回复里只给路径和一句话结论。\n"
    "- `{where}/notes/`: 需求、目标、问答记录和交接文档。"
)
# ("Workbench: INDEX.md says what is where, read it first; scripts/ for reusable scripts;
# outputs over 2,000 chars go to artifacts/ as files and replies give only the path and a
# one-line conclusion; notes/ holds the brief, the goal, the Q&A log, handoffs.")

# -- starter.channel: 问答记录.md and the terminal question ---------------------------------------

QA_STATUS = {  # how a question ended, as 问答记录.md records it (by Exchange.status)
    "answered": "答",  # answered
    "declined": "对方拒答",  # the person declined
    "timeout": "无人回答(超时或没有终端)",  # nobody answered (timeout or no terminal)
    "auto": "全自动模式,无人回答",  # fully automatic: nobody answers
    "budget": "提问次数已用完,未转给用户",  # question budget spent: not passed on
    "cancelled": "提问被中断",  # the question was interrupted
}
QA_HEADER = "# 问答记录\n\n"
QA_QUESTION = "### 问 {index} · {asked_at}\n\n{question}\n\n{tail}\n"  # question N · time
QA_ANSWER = "**答** ({answered_at}):\n\n{answer}"  # the answer
QA_OTHER = "**{label}** ({answered_at})"
QA_INTERJECTION = "### 插话 · {stamp}\n\n{text}\n"  # the person typed while the agent worked
TTY_QUESTION = "\n❓ {question}\n   (回车提交;空行=不回答;{wait}内无回答则由 agent 自行决定)\n> "

# -- context.handoff and the runtime's handoff ---------------------------------------------------

HANDOFF_TITLE = "# 交接: {step}\n\n"  # a handoff document's title
HANDOFF_OWN_REPLY = "\n### 会话自己的交接回复\n\n"  # the session's own (unusable) handoff reply
HANDOFF_SEE_DOC = "(见交接文档)"  # (see the handoff document)
TRUNCATED = "\n…(截断)"  # (cut)

# -- cli.go_printer ---------------------------------------------------------------------------

ANSWER_LINES = {  # how a question to the person ended, by Exchange.status
    "answered": "   ✓ 收到回答",  # answer received
    "auto": "   (全自动: 没人回答, agent 自己决定并记下假设)",  # fully automatic: the agent decides
    "timeout": "   (没等到回答: agent 自己决定并记下假设)",  # no answer in time
    "declined": "   (不回答: agent 自己决定)",  # declined
    "budget": "   (提问次数用完, 没有转给你)",  # question budget spent
}


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

# -- starter.flow: warnings, the unreachable dialogue, repair lists ------------------------------

LIST_SEPARATOR = "、"  # between the names of missing sections in a repair prompt
ALL_SECTIONS = "全部"  # "all of them": the missing list when the parser found nothing
GOAL_UNRECOGNISED = "格式无法识别"  # (the format was not recognised)
PERSON_ADDED = "\n\n用户补充: {words}"  # appended to the clarify resume prompt: "the person adds: ..."
BRIEF_INCOMPLETE = "{file} 缺 {missing}: 先照现有的做; 它没有冻结, 下次运行会接着确认"
# (the brief lacks ...: working from what there is; it is not frozen, the next run clarifies again)
NO_GOAL_TO_JUDGE = (
    "没有完整的 {file}, 「{step}」这一轮不做判定"  # no complete 目标.md: this round is not judged
)
JUDGE_UNFINISHED = "判定者没能跑完: {error}"  # the judge did not finish
JUDGE_NO_REASON = "(判定者没有说明)"  # (the judge gave no reason)
UNREACHABLE_UNANSWERED = "判定者认为目标无法达成, 无人回答: {reason}"  # unreachable, and nobody answered
ACCEPT_WORDS = ("accept", "接受")  # the person's answer 1, in words
OVERRULE_WORDS = ("wrong", "判定者错了")  # the person's answer 3, in words: "the judge is wrong"
ANSWER_SEPARATORS = " :：,，"  # stripped between "2" and the changed goal
ACCEPTED_AS_DONE = "用户接受现状: 「{step}」算完成"  # the person accepts things as they are: done

# -- context.handoff: the document the runtime writes itself (degraded handoff) --------------------

DEGRADED_NO_CALLS = "- (无)"  # (none)
DEGRADED_NOTHING_SAID = "(没有)"  # (nothing)
DEGRADED_PREVIOUS = "\n\n### 上一份交接文档\n\n{doc}"  # the previous handoff document
# What both documents the runtime writes itself say after "doing" (settled: not summarised;
# dead ends: unknown; next: carry on from what the workspace holds; the scene).
_FACTS_ONLY_BODY = """## 已经定下的
(会话没能总结；看工作区里已经改动和产出的文件)

## 走不通的路
(不清楚)

## 下一步
先查看工作区和工作台里已有的产出，确认做到了哪里，然后从那里接着做原始任务，不要从头开始。

## 现场
原始任务：
{task}

最近的工具调用：
{calls}{earlier}

(写于 {written:%Y-%m-%d %H:%M:%S})
"""
DEGRADED_DOC = (
    """\
# 交接: {step} (降级交接)

> 这份文档是运行时代写的：会话的上下文已经装不下任何新请求 ({error})，
> 它没能自己写交接。下面只有运行时确切知道的事实；请先核对工作区的现状。

## 现在在做什么
在做原始任务 (见下)，做到一半时上下文满了。最后说的话：
{last_words}

"""
    + _FACTS_ONLY_BODY
)
# (Handoff: <step> (degraded). Written by the runtime: the session's context could hold no new
# request (...) and it could not write its own handoff; only facts the runtime knows for sure —
# check the workspace first. Doing: the original task, cut off halfway; its last words. Settled:
# (not summarised; see the files changed). Dead ends: (unknown). Next: look at what the workspace
# and the workbench already hold and carry on the original task from there, don't start over.
# Scene: the original task, the recent tool calls, the previous document, when it was written.)

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
    + _FACTS_ONLY_BODY
)
# The step's error when the deadline ended it (manifest.json, .exit.json, flower-batch's record).
LIMITS_TIMED_OUT = "timeout: the deadline passed"
