"""${{ }} templates in jobs.toml (jobsfile/_templating.py): rendering and errors."""

from __future__ import annotations

import pytest

from flower_batch.errors import TemplateError
from flower_batch.jobsfile import RenderContext, Template


def test_template_rendering_and_errors():
    context = RenderContext(
        {"task": "a", "v": {"name": "Careful", "t": 3}, "flag": True}, "a", "a.careful.r2", 2
    )
    assert (
        Template("${{matrix.v}}/${{ matrix.v.t }}/${{ matrix.flag }}/${{ job.repeat }}", ()).render(context)
        == "Careful/3/true/2"
    )
    assert Template("x ${{ matrix.v }", ()).syntax_problem() == "unclosed `${{`; close it with `}}`"
    assert Template("${{ env.HOME }}", ()).syntax_problem().startswith("unknown reference `${{ env.HOME }}`")
    with pytest.raises(TemplateError) as info:
        Template("${{ matrix.v.nope }}", ()).render(context)
    assert str(info.value) == "`${{ matrix.v.nope }}`: matrix.v has no key `nope` in job a.careful.r2"
    with pytest.raises(TemplateError):
        Template("${{ matrix.v2 }}", ()).render(RenderContext({"v2": {"x": 1}}, "a", "a.r1", 1))
