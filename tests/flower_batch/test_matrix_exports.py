"""flower_batch.matrix's public names are exactly its __all__."""

from __future__ import annotations

import flower_batch.matrix as matrix


def test_all_lists_the_public_names():
    public = {name for name in dir(matrix) if not name.startswith("_")}
    assert public == set(matrix.__all__)
    assert all(getattr(matrix, name) is not None for name in matrix.__all__)
