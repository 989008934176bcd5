"""Where flower keeps things, and what its steps are called: every file, directory and step
name flower and flower_batch share (sessions.db, manifest.json, lineage.json, continuity.json,
.exit.json, `.flower/notes`, 确认需求/设定目标/干活, 需求.md, 目标.md, 交接-<step>.md).
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

# -- the starter flow's steps and files ---------------------------------------------------------
CLARIFY = "确认需求"
GOAL = "设定目标"
WORK = "干活"
BRIEF_FILE = "需求.md"
GOAL_FILE = "目标.md"
QA_FILE = "问答记录.md"
ARCHIVE_DIR = "archive"

# -- flows.continuity -------------------------------------------------------------------------

CONTINUITY_FILE = "continuity.json"

# -- exitinfo ---------------------------------------------------------------------------------

EXIT_FILE = ".exit.json"


# -- more step and file names -----------------------------------------------------------------

JUDGE_SUFFIX = "·判定"  # a judge's run is named <step>·判定#N; never a lineage key
HANDOFF_FILE = "交接-{step}.md"  # the handoff document of <step>, in the notes
WRAP_UP_FILE = "收尾-{step}.md"  # the notes <step> wrote when its time was up
COORDINATOR = "协调者"  # the starter flow's work coordinator
ORACLE = "旁路问答"  # the default oracle role's name
