"""The seed's minimal workflow (workflow design, "how to write it"): `flower run examples/flows.py:main -w DIR`.

Two steps, each a fresh session: 取词 reads seed.txt and answers with the word in it; 造句 gets
that word injected into its prompt (the cheapest way to pass a step's output on). Offline, the
scripted model plays it: examples/scenarios/starter-flows.toml.
"""

from flower import AgentSpec, Step, Workflow

terse = AgentSpec(
    name="terse",
    instructions="回答极简,一行以内,不解释不寒暄。",  # (answer tersely: one line, no explanations)
    allowed_tools=["Read", "Glob"],
    max_turns=4,
)


def main() -> Workflow:
    return Workflow(
        [
            # A new session: it knows only what its prompt says.
            Step("取词", terse, "读 seed.txt,只回文件里那个词。"),
            # Also a new session: the previous step's output is injected into the prompt.
            Step("造句", terse, lambda ctx: f"用「{ctx['取词']}」造一个五字短句,只回短句。"),
        ]
    )
