"""The gate tests' MLflow store (tests/pipelines/tools/gate/fakes.py Store), one per test."""
from __future__ import annotations

import pytest

from tests.pipelines.tools.gate.fakes import Store


@pytest.fixture
def store(tmp_path, mlflow_db):
    """A new store in tmp_path (mlflow_db: a copy of the session's empty one, placed at Store's path)."""
    return Store(tmp_path)
