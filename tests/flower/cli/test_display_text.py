"""Text is text (issue 11.6) in flower's display: step names, tool names and errors are printed as
they are, never read as rich markup."""

from __future__ import annotations

from rich.console import Console

from flower.cli.display import Display
from flower.result import StepResult


def test_flowers_display_prints_step_names_and_tools_as_text() -> None:
    console = Console(record=True, width=200)
    display = Display(console=console)
    display.event("tool", {"name": "[bold]Read", "input": {"file_path": "[x]"}})
    display.step_done("[b]fix", StepResult(step="[b]fix", ok=False, error="[red]no[/red]"))
    text = console.export_text()
    assert "[bold]Read" in text and "[x]" in text and "[b]fix" in text and "[red]no[/red]" in text
