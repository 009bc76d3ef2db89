"""What a ccrs process settles once, at its start, in this one place.

`configure_process()` is called by the process entry points: the `ccrs` command (`pipelines/cli.py`
`main`), the Python API's doors (`ccrs_eval.evaluate`) and the test session (tests/conftest.py). It only
fills in environment defaults the user has not set (PROCESS_ENV_DEFAULTS), so calling it again changes
nothing. No other module of the project writes the environment: Hugging Face loads are kept off the Hub
by `local_files_only=True` arguments, seeds are passed as local `torch.Generator`s.

Ray workers need none of these defaults: MLflow is only reached from the driver (the track stage and the
commands), and a Ray started here inherits the driver's environment anyway.
"""
from __future__ import annotations

import os
from pathlib import Path

# MLflow's REST client retries 7 times with exponential backoff (minutes) before it gives up on a dead
# server; keep the retries and the timeout short. MLflow reads these at every request, from the environment
# only (its client takes no such arguments).
PROCESS_ENV_DEFAULTS: dict[str, str] = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "60",
}


def configure_process() -> None:
    """Fill in the environment defaults the user has not set (idempotent)."""
    for name, value in PROCESS_ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)


def ccrs_home() -> Path:
    """The folder of the user's ccrs state: $CCRS_HOME, else ~/.cache/ccrs (models, judgment cache, secrets,
    logs of commands without an output folder, the detached Ray head's record)."""
    return Path(os.environ.get("CCRS_HOME") or Path.home() / ".cache" / "ccrs")
