"""No hidden global state: the project's modules load models and tokenizers, seed and reach MLflow without
writing the environment or the process-wide torch RNG, so tests/conftest.py's per-test restore has nothing
of theirs to restore. The settings a process needs are made once, at its start (infra/process.py)."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from infra.process import PROCESS_ENV_DEFAULTS, ccrs_home, configure_process
from tests.conftest import process_state_restored
from tests.test_architecture import REPO, source_files

# Modules that may write os.environ, and why: the start-up defaults; the secrets file (`ccrs --secrets-file`,
# loaded by the CLI at its start); the driver joining the detached Ray head (RAY_AUTH_MODE, as the head has).
ENVIRONMENT_WRITERS = {"infra/process.py", "infra/secrets.py", "infra/ray_runtime.py"}
ENVIRONMENT_WRITES = {"setdefault", "update", "pop", "clear", "putenv", "unsetenv", "__setitem__"}
# What the test session's start sets: removed for the test, so that a module setting one of them shows.
SESSION_SETTINGS = ("HF_HUB_OFFLINE", *PROCESS_ENV_DEFAULTS)


def _environment_writes(tree: ast.AST) -> list[int]:
    """Lines of `os.environ[...] = ...`, `del os.environ[...]`, `os.environ.<write>(...)`, `os.putenv()`."""
    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else []
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        if any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ" for t in targets):
            lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner, method = ast.unparse(node.func.value), node.func.attr
            if method in ENVIRONMENT_WRITES and owner in ("os.environ", "os"):
                lines.append(node.lineno)
    return sorted(lines)


def test_only_the_start_up_modules_write_the_environment():
    found = [f"{path.relative_to(REPO)}:{line}" for path in source_files()
             if str(path.relative_to(REPO)) not in ENVIRONMENT_WRITERS
             for line in _environment_writes(ast.parse(path.read_text()))]
    assert not found, "os.environ written outside infra/process.py (pass the setting instead):\n" + \
        "\n".join(found)


def test_the_checker_sees_every_kind_of_write():
    source = ("import os\nos.environ['A'] = '1'\nos.environ.setdefault('B', '1')\nos.environ.update(C='1')\n"
              "del os.environ['A']\nos.putenv('D', '1')\nos.environ.get('E')\nx = os.environ['F']\n")
    assert _environment_writes(ast.parse(source)) == [2, 3, 4, 5, 6]


def test_configure_process_fills_in_defaults_only_and_once(monkeypatch):
    for name in PROCESS_ENV_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    configure_process()
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "5"  # the user's value wins
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
    configured = dict(os.environ)
    configure_process()
    assert dict(os.environ) == configured


def test_ccrs_home_is_the_variable_else_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("CCRS_HOME", str(tmp_path))
    assert ccrs_home() == tmp_path
    monkeypatch.delenv("CCRS_HOME")
    assert ccrs_home() == Path.home() / ".cache" / "ccrs"


@pytest.fixture
def bare_session_settings(monkeypatch):
    for name in SESSION_SETTINGS:
        monkeypatch.delenv(name, raising=False)


def _load_everything_that_used_to_write_process_state(tmp_path) -> None:
    """What set HF_HUB_OFFLINE, seeded torch or set MLflow's environment before: judges/tokens.py,
    judges/vera.py (embedder, cross-encoder), retrievers/embedders.py, the cost plan's chunking tokenizer
    (retrievers/tokenization.py) and pipelines/reporting/tracking.py's reachability check. Real loads
    (cached loaders
    bypassed), local files only."""
    from judges import tokens, vera
    from retrievers.config import EmbedderConfig
    from retrievers.embedders import SentenceTransformersEmbedder
    from retrievers.tokenization import load_tokenizer
    from pipelines.reporting.tracking import check_tracking_reachable

    minilm = vera.minilm_path()
    assert tokens._load_tokenizer.__wrapped__(minilm).encode("aspirin")
    vera._sentence_transformer(minilm)
    vera.CrossEncoderAggregator(vera.UNTRAINED_DEMO_HEAD)
    SentenceTransformersEmbedder(EmbedderConfig(model=minilm, device="cpu"))
    assert load_tokenizer.__wrapped__(f"hf:{minilm}", local_files_only=True).lengths_batch(["aspirin"])
    with pytest.raises(OSError):  # not cached here: fails at once, the Hub is not asked
        load_tokenizer.__wrapped__("hf:ccrs-test/no-such-tokenizer", local_files_only=True)
    check_tracking_reachable(f"sqlite:///{tmp_path / 'mlflow.db'}")


def _import_the_libraries() -> None:
    """The libraries' own import-time settings are theirs, not ours (importing transformers' AutoTokenizer
    imports scikit-learn, which sets KMP_DUPLICATE_LIB_OK and KMP_INIT_AT_FORK, and torch's inductor, which
    sets TORCHINDUCTOR_CACHE_DIR): made before the snapshot. The project imports them inside functions."""
    import mlflow  # noqa: F401
    import sentence_transformers  # noqa: F401
    from transformers import AutoTokenizer  # noqa: F401


def test_loading_and_tracking_leave_the_environment_and_the_torch_rng_alone(bare_session_settings, tmp_path,
                                                                            monkeypatch):
    import huggingface_hub.constants as hub
    import torch

    from judges import vera

    _import_the_libraries()

    monkeypatch.setattr(vera, "_MODELS", {})  # a real load, not the process's cached model
    environment, rng, hub_offline = dict(os.environ), torch.random.get_rng_state(), hub.HF_HUB_OFFLINE
    with process_state_restored() as restored:
        _load_everything_that_used_to_write_process_state(tmp_path)
    assert not restored, f"conftest's restore had to undo {restored}"
    assert dict(os.environ) == environment
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert hub.HF_HUB_OFFLINE == hub_offline
