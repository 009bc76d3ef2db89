from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """Ray for the stage tests, started once; never shut down here (other fixtures may share it)."""
    from tasks.ray_runtime import ensure_ray

    ensure_ray()
    yield
