"""Where the project's shipped files are: the repository, its configs/ and data/ (or their copies in a wheel
install), the GroUSE unit tests of `judge.preflight.tests: builtin`. The bottom of pipelines/: it imports
nothing of the project, so the run config (pipelines/config.py) and the run extensions it reads
(pipelines/extensions/) both find these paths here."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# configs/ and the demo sample (data/bioasq-sample): in a checkout (or an editable install) the repository's
# own folders; in a wheel install the copies packaged under ccrs_eval/resources (pyproject.toml).
RESOURCE_ROOT = REPO_ROOT if (REPO_ROOT / "configs").is_dir() else REPO_ROOT / "ccrs_eval" / "resources"
# `judge.preflight.tests: builtin` and `ccrs meta-eval`'s default: the shipped GroUSE-format BioASQ unit tests
BUILTIN_UNIT_TESTS = RESOURCE_ROOT / "data" / "grouse-bioasq" / "test.jsonl"


def unit_tests_path(tests: str) -> Path:
    """`builtin` (BUILTIN_UNIT_TESTS), or a path: absolute, else from the working directory, else from the
    project's resources (as dataset paths are found)."""
    if tests == "builtin":
        return BUILTIN_UNIT_TESTS
    path = Path(tests)
    if path.is_absolute() or (Path.cwd() / path).exists():
        return path.resolve()
    return RESOURCE_ROOT / path
