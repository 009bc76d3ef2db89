"""Secrets (OpenSearch passwords, AWS keys, LLM API keys) from the environment or a secrets file.

The file is dotenv-style (`NAME=value`, `export NAME=value`, `#` comments, optional quotes) and must be
readable by its owner only (chmod 600), like an SSH key. It is `--secrets-file`, else $CCRS_SECRETS_FILE,
else $CCRS_HOME/secrets.env (default ~/.cache/ccrs/secrets.env) when it exists. A variable already set in
the environment wins over the file. Every loaded value is registered for redaction: `scrub` masks it in
any text, and `install_log_redaction` masks it in log records.
"""
from __future__ import annotations

import logging
import os
import re
import stat
import threading
from pathlib import Path

from infra.process import ccrs_home

MASK = "***"
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_registered: set[str] = set()
_lock = threading.Lock()


class SecretsFileError(RuntimeError):
    """The secrets file is unreadable, malformed or readable by others."""


def default_secrets_file() -> Path:
    return Path(os.environ.get("CCRS_SECRETS_FILE") or ccrs_home() / "secrets.env")


def parse_secrets(text: str, source: str = "secrets file") -> dict[str, str]:
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise SecretsFileError(f"{source}, line {number}: expected NAME=value")  # never echo the line
        name, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def read_secrets_file(path: Path) -> dict[str, str]:
    path = Path(path)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretsFileError(f"{path} is accessible by group or others (mode {stat.filemode(mode)}); "
                               f"run: chmod 600 {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretsFileError(f"{path}: unreadable ({type(exc).__name__})") from None
    return parse_secrets(text, str(path))


def load_secrets(path: Path | None = None) -> list[str]:
    """Export the file's variables not already in the environment; returns the names loaded. A missing
    default file is fine; a missing file named explicitly is an error."""
    explicit = path is not None or "CCRS_SECRETS_FILE" in os.environ
    path = Path(path) if path is not None else default_secrets_file()
    if not path.exists():
        if explicit:
            raise SecretsFileError(f"secrets file {path} does not exist")
        return []
    loaded = []
    for name, value in read_secrets_file(path).items():
        register_secret(value)
        if name not in os.environ:
            os.environ[name] = value
            loaded.append(name)
    return loaded


def register_secret(value: str | None) -> None:
    if value and len(value) >= 4:  # masking 1-3 characters would shred ordinary text
        with _lock:
            _registered.add(value)


SECRET_ENV_NAME = re.compile(
    r"(password|passwd|secret|token|api_key|apikey|access_key|credential)", re.IGNORECASE
)


def register_env_secrets() -> list[str]:
    """Register the values of secret-looking environment variables (AWS_SECRET_ACCESS_KEY,
    OPENSEARCH_PASSWORD, CCRS_LLM_API_KEY, MLFLOW_TRACKING_TOKEN, ...); returns their names."""
    names = [name for name in os.environ if SECRET_ENV_NAME.search(name)]
    for name in names:
        register_secret(os.environ[name])
    return names


def scrub(text: str) -> str:
    """`text` with every registered secret value replaced by ***."""
    with _lock:
        values = sorted(_registered, key=len, reverse=True)
    for value in values:
        text = text.replace(value, MASK)
    return text


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_redaction() -> None:
    """Mask registered secrets in every record that reaches the root logger's handlers."""
    root = logging.getLogger()
    for handler in root.handlers or [logging.lastResort]:
        if handler is not None and not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
