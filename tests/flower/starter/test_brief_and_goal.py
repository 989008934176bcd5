"""需求.md, 目标.md and verdict parsing: pure functions, many shapes of model output."""

from __future__ import annotations

from datetime import datetime

import pytest

from flower.catalogue.starter import BRIEF_HEADER as HEADER
from flower.catalogue.starter import BRIEF_SECTIONS as SECTIONS
from flower.catalogue.starter import EMPTY_MARK as EMPTY
from flower.catalogue.starter import VERDICT_FORMAT
from flower.starter.brief import (
    Brief,
    append_to_section,
    append_wake_words,
    parse_brief,
    read_brief,
    render_brief,
    section_of,
    strip_fences,
    write_brief,
)
from flower.starter.goal import (
    ACHIEVED,
    NOT_YET,
    UNREACHABLE,
    Goal,
    Unverifiable,
    parse_goal,
    parse_verdict,
    render_goal,
)

FULL = """# 需求确认书

## 目标
hello.txt 里写 hi

## 验收标准
- hello.txt 存在
- 内容是 hi

## 边界
只动 hello.txt

## 未知与假设
假设用 UTF-8
"""


# -- brief: parsing -----------------------------------------------------------------------------


def test_full_brief_is_complete():
    b = parse_brief(FULL)
    assert b.complete and b.missing == []
    assert b["目标"] == "hello.txt 里写 hi"
    assert b["验收标准"] == "- hello.txt 存在\n- 内容是 hi"
    assert list(b) == list(SECTIONS)


@pytest.mark.parametrize(
    "title, key",
    [
        ("目标", "目标"),
        ("Goal", "目标"),
        ("goals", "目标"),
        ("1. 目标", "目标"),
        ("一、目标", "目标"),
        ("**目标**", "目标"),
        ("目标 (Goal)", "目标"),
        ("目标：", "目标"),
        ("Acceptance criteria", "验收标准"),
        ("验收条件", "验收标准"),
        ("Definition of Done", "验收标准"),
        ("Scope / Boundaries", "边界"),
        ("Scope", "边界"),
        ("范围", "边界"),
        ("Boundaries", "边界"),
        ("Unknowns and assumptions", "未知与假设"),
        ("Unknowns & Assumptions", "未知与假设"),
        ("未知和假设", "未知与假设"),
        ("假设", "未知与假设"),
        ("Open questions", "未知与假设"),
        ("唤醒时追加", "唤醒时追加"),
        ("备注", None),
        ("Goal setting process", None),
    ],
)
def test_section_aliases(title, key):
    assert section_of(title) == key


def test_english_brief_any_heading_level():
    text = "### Goal\nship it\n### Acceptance Criteria\ntests pass\n### Scope\nonly src/\n#### Unknowns and assumptions\nnone known\n"
    b = parse_brief(text)
    assert b.complete
    assert b["边界"] == "only src/" and b["未知与假设"] == "none known"


def test_placeholder_and_blank_sections_are_empty():
    text = FULL.replace("假设用 UTF-8", "(未填)").replace("只动 hello.txt", "  ")
    b = parse_brief(text)
    assert not b.complete
    assert b.missing == ["边界", "未知与假设"]
    assert b["边界"] == "" and b["未知与假设"] == ""


def test_none_is_an_answer_not_a_blank():
    b = parse_brief(FULL.replace("假设用 UTF-8", "无"))
    assert b["未知与假设"] == "无" and b.complete


def test_fenced_code_is_stripped_before_parsing():
    text = FULL.replace("只动 hello.txt", "只动 hello.txt\n```python\n## 目标\nprint('pasted code')\n```\n")
    text = "说明:\n```\n## 验收标准\nfake\n```\n" + text
    b = parse_brief(text)
    assert b["目标"] == "hello.txt 里写 hi"
    assert b["验收标准"].startswith("- hello.txt 存在")
    assert "pasted code" not in render_brief(b)
    assert b["边界"] == "只动 hello.txt"


def test_tilde_fences_and_unclosed_fence():
    assert strip_fences("a\n~~~\nb\n~~~\nc") == "a\nc"
    assert strip_fences("a\n```sh\nb\nc") == "a"
    assert strip_fences("a\n````\n```\nx\n```\n````\nz") == "a\nz"  # a longer fence holds shorter ones


def test_brief_wrapped_in_a_markdown_fence_is_unwrapped():
    b = parse_brief("这是需求:\n\n```markdown\n" + FULL + "```\n")
    assert b.complete and b["目标"] == "hello.txt 里写 hi"


def test_code_fence_with_sections_is_not_unwrapped_when_brief_is_outside():
    text = FULL + "\n```markdown\n## 目标\nsomething else\n```\n"
    assert parse_brief(text)["目标"] == "hello.txt 里写 hi"


def test_preamble_unknown_sections_and_subheadings():
    text = (
        "好的,我整理如下。\n\n"
        + FULL.replace("## 边界", "### 细节\n写一行\n\n## 备注\n不相关\n\n## 边界")
        + "\n## 附录\n大段日志\n"
    )
    b = parse_brief(text)
    assert "### 细节\n写一行" in b["验收标准"]
    assert "不相关" not in str(dict(b)) and "大段日志" not in str(dict(b))
    assert "好的" not in str(dict(b))


def test_restated_section_keeps_last_non_empty_version():
    text = "## 目标\n草稿\n\n## 目标\n定稿\n\n## 目标\n(未填)\n"
    assert parse_brief(text)["目标"] == "定稿"


def test_garbage_and_empty_input():
    for text in ("", "just words, no headings", "# 需求确认书\n", None):
        b = parse_brief(text)  # type: ignore[arg-type]
        assert not b.complete and b.missing == list(SECTIONS)


def test_brief_rejects_unknown_keys():
    with pytest.raises(KeyError, match="验收标准"):
        Brief({"目的地": "x"})


# -- brief: rendering and files --------------------------------------------------------------------


def test_render_round_trip_and_empty_marker():
    b = parse_brief(FULL)
    text = render_brief(b)
    assert text.startswith(HEADER + "\n")
    assert parse_brief(text) == b
    empty = render_brief(Brief())
    assert empty.count(EMPTY) == 4
    assert [line for line in empty.splitlines() if line.startswith("## ")] == [f"## {s}" for s in SECTIONS]


def test_render_plain_dict():
    text = render_brief({"目标": "x"})
    assert "## 目标\n\nx" in text and text.count(EMPTY) == 3


def test_write_and_read_brief(tmp_path):
    path = write_brief(tmp_path / "notes" / "需求.md", parse_brief(FULL))
    assert read_brief(path) == parse_brief(FULL)
    assert read_brief(tmp_path / "missing.md") is None
    assert not list((tmp_path / "notes").glob("*.tmp"))


def test_append_wake_words_creates_section_and_keeps_order(tmp_path):
    path = tmp_path / "需求.md"
    path.write_text(FULL, encoding="utf-8")
    e1 = append_wake_words(path, "also add bye.txt", when=datetime(2024, 5, 1, 9, 0, 0))
    e2 = append_wake_words(path, "两行\n第二行", when=datetime(2024, 5, 2, 9, 0, 0))
    assert e1 == "- [2024-05-01 09:00:00] also add bye.txt"
    assert e2 == "- [2024-05-02 09:00:00] 两行\n  第二行"
    text = path.read_text(encoding="utf-8")
    assert text.count("## 唤醒时追加") == 1
    assert text.index(e1) < text.index(e2)
    b = parse_brief(text)
    assert b.complete and b["未知与假设"] == "假设用 UTF-8"  # the four sections are untouched
    assert b.appendix["唤醒时追加"] == e1 + "\n" + e2
    assert "also add bye.txt" in b.prompt_block()
    assert parse_brief(render_brief(b)) == b and parse_brief(render_brief(b)).appendix == b.appendix


def test_append_goes_into_the_section_even_when_not_last(tmp_path):
    path = tmp_path / "需求.md"
    path.write_text("## 唤醒时追加\n\n- [old] first\n\n## 运行中补充\n\n- [x] typed\n", encoding="utf-8")
    append_wake_words(path, "second", when=datetime(2024, 1, 1))
    text = path.read_text(encoding="utf-8")
    assert text.index("second") < text.index("## 运行中补充")
    assert text.index("- [old] first") < text.index("second")
    assert "- [x] typed" in text


def test_append_to_missing_file_and_other_sections(tmp_path):
    path = tmp_path / "sub" / "需求.md"
    append_to_section(path, "运行中补充", "用红色")
    text = path.read_text(encoding="utf-8")
    assert text.startswith(HEADER)
    assert parse_brief(text).appendix["运行中补充"].endswith("用红色")
    with pytest.raises(ValueError, match="empty"):
        append_wake_words(path, "   ")


def test_append_to_empty_section_heading(tmp_path):
    path = tmp_path / "需求.md"
    path.write_text("## 唤醒时追加\n## 目标\nx\n", encoding="utf-8")
    append_wake_words(path, "w", when=datetime(2024, 1, 1))
    text = path.read_text(encoding="utf-8")
    assert "## 唤醒时追加\n\n- [2024-01-01 00:00:00] w\n\n## 目标" in text


# -- goal -------------------------------------------------------------------------------------------

GOAL = """# 目标
hello.txt 说 hi

# 判定清单
- hello.txt 存在
* [ ] 内容恰好是 hi
  (不带换行)
1. 在 GPU 上跑通 [此环境无法验证:没有 GPU]
2) 线上流量正常【此环境无法验证：没有线上环境】
"""


def test_parse_goal_checks_and_unverifiable():
    g = parse_goal(GOAL)
    assert g.statement == "hello.txt 说 hi"
    assert g.checks == ["hello.txt 存在", "内容恰好是 hi (不带换行)", "在 GPU 上跑通", "线上流量正常"]
    assert g.unverifiable == [
        Unverifiable("在 GPU 上跑通", "没有 GPU"),
        Unverifiable("线上流量正常", "没有线上环境"),
    ]
    assert g.verifiable == ["hello.txt 存在", "内容恰好是 hi (不带换行)"]
    assert g.complete
    assert "2 条" in g.warning() and "没有 GPU" in g.warning()


def test_goal_round_trip():
    g = parse_goal(GOAL)
    assert parse_goal(render_goal(g)) == g


def test_goal_english_headings_and_fences():
    text = "Here it is.\n## Goal\nship\n## Checklist\n- tests pass\n```\n- not a check\n```\n- lint clean [unverifiable here: no linter]\n"
    g = parse_goal(text)
    assert g.statement == "ship"
    assert g.checks == ["tests pass", "lint clean"]
    assert g.unverifiable == [Unverifiable("lint clean", "no linter")]


def test_incomplete_goals():
    assert not parse_goal("").complete
    assert not parse_goal("# 目标\nx\n").complete
    assert not parse_goal("# 判定清单\n- a\n").complete
    assert not parse_goal(render_goal(Goal())).complete
    assert parse_goal(render_goal(Goal())) == Goal()
    assert Goal().warning() == ""


def test_marker_must_be_at_the_end():
    g = parse_goal("# 目标\nx\n# 判定清单\n- 说明 [此环境无法验证:原因] 之后还有字\n")
    assert g.unverifiable == [] and len(g.checks) == 1


def test_marker_only_item_is_dropped():
    g = parse_goal("# 目标\nx\n# 判定清单\n- [此环境无法验证:全部]\n- a\n")
    assert g.checks == ["a"] and g.unverifiable == []


# -- verdicts -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, state",
    [
        ("## 结论\nachieved\n## 理由\n都查过了\n## 未通过\n无", ACHIEVED),
        ("## 结论\n已达成\n", ACHIEVED),
        ("## 结论\n**达成**。\n## 未通过\n- 无\n", ACHIEVED),
        ("## 结论\nnot_yet\n## 未通过\n- a\n", NOT_YET),
        ("## 结论\n未达成\n", NOT_YET),
        ("## 结论\nNot yet.\n", NOT_YET),
        ("## 结论\nnot achieved\n", NOT_YET),
        ("## 结论\nunreachable\n## 理由\n没有 GPU\n", UNREACHABLE),
        ("## 结论\n无法达成\n", UNREACHABLE),
        ("## Verdict\nACHIEVED\n## Reason\nok\n## Failed\nnone\n", ACHIEVED),
        ("结论: achieved\n理由: ok\n", ACHIEVED),
        ("**结论**：不可达成\n", UNREACHABLE),
    ],
)
def test_verdict_states(text, state):
    v = parse_verdict(text)
    assert v.state == state and v.note == ""


@pytest.mark.parametrize(
    "text, note_part",
    [
        ("looks fine to me", "没有「结论」"),
        ("", "没有「结论」"),
        ("## 结论\n\n## 理由\nx\n", "无法识别"),
        ("## 结论\nachieved | not_yet | unreachable\n", "含糊"),  # the template echoed back
        ("## 结论\nachieved, or maybe not yet\n", "含糊"),
        ("## 结论\n大概吧\n", "无法识别"),
        ("## 结论\nachieved\n## 未通过\n- hello.txt 存在\n", "未通过项"),
        ("```\n## 结论\nachieved\n```\n", "没有「结论」"),  # a quoted verdict is not a verdict
    ],
)
def test_ambiguous_verdicts_are_not_achieved(text, note_part):
    v = parse_verdict(text)
    assert v.state == NOT_YET and not v.achieved
    assert note_part in v.note


def test_verdict_fields():
    v = parse_verdict(
        "前言\n## 结论\nnot_yet\n## 理由\n文件在,\n内容不对。\n## 未通过\n- 内容恰好是 hi —— 实际是 hello\n"
        "  (多了换行)\n- 有测试\n"
    )
    assert v.state == NOT_YET
    assert v.reason == "文件在,\n内容不对。"
    assert v.missing == ["内容恰好是 hi —— 实际是 hello (多了换行)", "有测试"]


def test_feedback_says_what_is_missing_not_how():
    v = parse_verdict("## 结论\nnot_yet\n## 理由\n你应该用 sed 改一下\n## 未通过\n- hello.txt 存在\n")
    fb = v.feedback()
    assert "- hello.txt 存在" in fb
    assert "sed" not in fb  # the judge's how-to stays out when it named what is missing
    only_reason = parse_verdict("## 结论\nnot_yet\n## 理由\n文件是空的\n").feedback()
    assert "文件是空的" in only_reason
    unclear = parse_verdict("hmm").feedback()
    assert "判定清单" in unclear


def test_verdict_format_lists_three_sections_and_parses_as_ambiguous():
    for part in ("## 结论", "## 理由", "## 未通过", "achieved", "not_yet", "unreachable"):
        assert part in VERDICT_FORMAT
    assert parse_verdict(VERDICT_FORMAT).state == NOT_YET


def test_write_brief_keeps_words_already_appended(tmp_path):
    path = tmp_path / "需求.md"
    append_to_section(path, "运行中补充", "用红色", when=datetime(2024, 1, 1))
    write_brief(path, parse_brief(FULL))
    b = read_brief(path)
    assert b is not None and b.complete
    assert b.appendix == {"运行中补充": "- [2024-01-01 00:00:00] 用红色"}
    write_brief(path, parse_brief(FULL), keep_appendix=False)
    assert read_brief(path).appendix == {}
