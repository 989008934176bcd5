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


def test_sigterm_stops_a_command_like_ctrl_c_with_exit_143(capsys) -> None:
    import os
    import signal

    import anyio
    import pytest
    import typer

    from flower_batch.commands.common import run_async

    cleaned: list[bool] = []

    async def work() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the signal watcher runs first: its receiver is set
            await anyio.sleep(60)
        finally:
            cleaned.append(True)  # a job's containers are stopped and its record written here

    with pytest.raises(typer.Exit) as stopped:
        run_async(work)
    assert stopped.value.exit_code == 143 and cleaned == [True]
    said = capsys.readouterr().err
    assert "stopped by SIGTERM; the jobs' containers are stopped and their records written" in said
