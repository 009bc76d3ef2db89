"""`ccrs load-test`: argument handling (the real run is in tests/pipelines/tools/load/test_run.py)."""
import pytest

from pipelines.cli import main
from pipelines.load_cmd import format_table
from pipelines.tools.load.measure import RequestRecord, summarize_level


def test_help_lists_load_test(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "load-test" in capsys.readouterr().out


@pytest.mark.parametrize("levels", ["0,2", "1,x", ""])
def test_bad_levels_are_a_usage_error(levels, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["load-test", "--levels", levels, "--llm-base-url", "http://127.0.0.1:9/v1"])
    assert exit_info.value.code == 2 and "--levels" in capsys.readouterr().err


def test_zero_requests_is_an_error_before_any_call(capsys):
    assert main(["load-test", "--requests", "0", "--llm-base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "requests_per_level" in capsys.readouterr().err


def test_table_lists_error_kinds():
    record = RequestRecord("limited", 2, 1, 0, "q/gold-w0/CC", False, 1.0, 0.0, 1.0, 5, 4, 0, 0, False, False,
                           "gave up: HTTP 503")
    table = format_table([summarize_level([record], "limited", 2, 1)])
    assert "100.0%" in table and "{'gave up: HTTP 503': 1}" in table
