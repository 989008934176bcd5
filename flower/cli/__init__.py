"""The `flower` command line. `flower.cli:main` is the console entry point (pyproject.toml)."""

from __future__ import annotations


def main() -> None:
    """Run the `flower` command; the app is assembled in `flower.cli.app` on first use."""
    from flower.cli.app import main as run_app
    from flower.quick_exit import run_then_exit

    run_then_exit(run_app)
