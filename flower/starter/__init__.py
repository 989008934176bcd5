"""The ready-made starter flow (确认需求 → 设定目标 → 干活 with judge rounds), built on flower/flows/.

    flow      starter_flow and its steps (clarify_step, goal_step, with_goal)
    brief     需求.md: the brief the clarify step writes
    goal      目标.md and the judge's verdict
    roles     coordinator, worker, clarify, judge, oracle and their guards
    channel   HumanChannel: the person as an MCP server
    wake      the read-only probe of what is on disk, and the wake banner

Nothing is imported here, so each module loads alone (see docs/architecture.md).
"""
