"""Every text the model or the person reads, and the step and file names — one fact, one place,
in the module of whoever owns it.

A module imports the text from its owner's module here instead of writing the literal inline,
so a step name, a file name or a prompt is changed (or translated) in exactly one line. English
glosses follow the Chinese texts as comments. Nothing is imported here: each importer names
the module that defines the name.

* `names.py` — file, directory and step names (sessions.db, manifest.json, 确认需求, 需求.md, …)
* `starter.py` — the starter flow's prompts, roles' rules, 需求.md and 目标.md shapes, warnings
* `channel.py` — the person's channel: answers, inbox, 问答记录.md, the terminal question
* `readback.py` — the words and shapes flower's parsers accept back; verdict notes, feedback
* `context.py` — handoff prompts and documents, pruning's notes, the workbench's INDEX.md
* `runtime.py` — the resume prompt, the limits' wording, the wrap-up notes, Ctrl-C's texts
* `terminal.py` — what the person sees and types: prompts, banners, notices, `go`'s option help
"""
