from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.runner import Served, serving


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """`manage.py serve` on the test database, filled by tests.contract.world."""
    with serving(tmp_path) as served:
        yield served
