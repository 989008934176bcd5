"""What the person's channel says (flower.starter.channel): the answers, the inbox, the tools'
descriptions the model reads, 问答记录.md and the question asked on the terminal.
"""

from __future__ import annotations

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
