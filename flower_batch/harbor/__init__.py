"""Harbor task folders (the Terminal-Bench 2 format) read as flower-batch tasks.

    task_folder  read_task(folder) -> TaskFolder: task.toml, instruction.md, environment/,
                 tests/ and solution/ mapped onto job fields, or one HarborTaskError line
    taskset      task_folders(path) and select(names, include, exclude): the task folders a
                 `[tasksets.NAME] harbor = "..."` names, narrowed by globs on task names
    shown        a Harbor task and a reward for people: what show, the report and the viewer print

jobs.toml's `[tasksets.NAME]` (flower_batch/jobsfile) turns each folder into a task; the mapping
table is docs/harbor-tasks.md. Nothing here touches Docker: a task's Dockerfile is built only
when its jobs run (running/task_images.py), its tests run after the agent (running/).
"""
