import logging
import os

import pytest

from infra import secrets
from infra.secrets import SecretsFileError, load_secrets, parse_secrets, scrub


def _write(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_dotenv_lines_quotes_export_and_comments():
    text = ("# opensearch\nexport OPENSEARCH_PASSWORD='p@ss word'\nCCRS_LLM_API_KEY=\"sk-abc\"\n\n"
            "AWS_KEY=plain\n")
    assert parse_secrets(text) == {"OPENSEARCH_PASSWORD": "p@ss word", "CCRS_LLM_API_KEY": "sk-abc",
                                   "AWS_KEY": "plain"}


def test_a_malformed_line_is_named_without_echoing_it():
    with pytest.raises(SecretsFileError, match="line 2: expected NAME=value") as err:
        parse_secrets("A=1\nthis is hunter2\n", "s.env")
    assert "hunter2" not in str(err.value)


def test_a_file_readable_by_others_is_refused(tmp_path):
    path = _write(tmp_path / "secrets.env", "X_PASSWORD=abcd1234\n", 0o644)
    with pytest.raises(SecretsFileError, match="chmod 600"):
        load_secrets(path)


def test_environment_wins_and_values_are_masked(tmp_path, monkeypatch):
    path = _write(tmp_path / "secrets.env", "CCRS_T_PASSWORD=from-file-7781\nCCRS_T_TOKEN=file-token-5512\n")
    monkeypatch.setenv("CCRS_T_TOKEN", "env-token-0042")
    # set, then deleted: monkeypatch records the original state and undoes what load_secrets sets
    monkeypatch.setenv("CCRS_T_PASSWORD", "")
    monkeypatch.delenv("CCRS_T_PASSWORD")
    assert load_secrets(path) == ["CCRS_T_PASSWORD"]
    assert os.environ["CCRS_T_PASSWORD"] == "from-file-7781"
    assert os.environ["CCRS_T_TOKEN"] == "env-token-0042"
    assert scrub("url https://u:from-file-7781@host and file-token-5512") == "url https://u:***@host and ***"


def test_missing_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CCRS_HOME", str(tmp_path))
    monkeypatch.delenv("CCRS_SECRETS_FILE", raising=False)
    assert load_secrets() == []  # no default file: nothing to load
    with pytest.raises(SecretsFileError, match="does not exist"):
        load_secrets(tmp_path / "nope.env")


def test_log_records_are_redacted(caplog):
    secrets.register_secret("log-secret-3141")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "connecting with %s", ("log-secret-3141",),
                               None)
    assert secrets.RedactingFilter().filter(record)
    assert record.getMessage() == "connecting with ***"


def test_cli_refuses_an_unsafe_secrets_file(tmp_path, capsys):
    from pipelines.cli import main

    path = _write(tmp_path / "secrets.env", "X_PASSWORD=abcd1234\n", 0o640)
    assert main(["--secrets-file", str(path), "run", "--check-config"]) == 2
    assert "chmod 600" in capsys.readouterr().err
