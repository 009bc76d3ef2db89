"""`ccrs probe`: argument handling and errors (its tiny real run shares the injection-eval test's, in
tests/pipelines/test_injection_cmd.py, one MLflow store and one session endpoint for both commands)."""
import pytest

from pipelines.cli import main


def test_help_lists_probe(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "probe" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["probe"], "--kind"),                                  # a kind must be named
    (["probe", "--kind", "nope"], "invalid choice"),
    (["probe", "--kind", "order", "--templates", "nope"], "invalid choice"),
])
def test_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("option,value", [("--tolerance", "0"), ("--tolerance", "1.5"), ("--sentences", "0"),
                                          ("--b", "10")])
def test_out_of_range_settings_are_one_line(option, value, tmp_path, capsys):
    assert main(["probe", "--kind", "verbosity", option, value, "--out", str(tmp_path)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ccrs probe")]
    assert len(errors) == 1 and errors[0].startswith(f"ccrs probe: error: {option}")


def test_kinds_accumulate_in_order_once_each():
    import argparse

    from pipelines.probe_cmd import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--kind", "order", "verbosity", "--kind", "order", "injection"])
    assert list(dict.fromkeys(args.kinds)) == ["order", "verbosity", "injection"]
    assert str(args.out) == "runs/probes"


def test_missing_dataset_is_an_error(tmp_path, capsys):
    argv = ["probe", "--kind", "order", "--dataset", str(tmp_path / "none"), "--llm-base-url",
            "http://127.0.0.1:9/v1", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert "ccrs probe: error:" in capsys.readouterr().err
