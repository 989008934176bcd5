"""What the commands share (commands/common.py): the async runner says our errors in one line."""

from __future__ import annotations

import pytest


def test_run_async_says_an_exception_group_of_our_errors_in_one_line(capsys) -> None:
    import typer

    from flower_batch.commands.common import run_async
    from flower_batch.errors import GatewayError

    async def boom() -> None:
        raise ExceptionGroup(
            "task group", [GatewayError("the gateway\ndid not start"), GatewayError("again")]
        )

    with pytest.raises(typer.Exit) as exit_info:
        run_async(boom)
    assert exit_info.value.exit_code == 3  # the exit code the error carries: a gateway's is infrastructure
    assert capsys.readouterr().err.strip() == "flower-batch: the gateway did not start"
