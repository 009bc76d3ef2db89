"""The wheel holds every package of the code: pyproject.toml lists packages by name (the resources are
mapped from configs/ and data/), so a new subpackage left off the list would be missing from `pip install .`
while every test run from the checkout still imports it."""
from __future__ import annotations

import tomllib

from tests.conftest import REPO

CODE = ("ccrs_eval", "pipelines", "tasks", "judges", "retrievers", "stats", "infra")


def code_packages() -> set[str]:
    return {".".join(init.parent.relative_to(REPO).parts)
            for top in CODE for init in (REPO / top).rglob("__init__.py")}


def test_pyproject_lists_every_code_package():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert not code_packages() - listed, f"packages missing from pyproject.toml: {code_packages() - listed}"
