from __future__ import annotations

import argparse

import pytest
import yaml

from pipelines import cli
from pipelines.retrieval_cmd import (
    RetrievalCommandConfig,
    add_arguments,
    apply_overrides,
    format_metrics,
    load_command_config,
)
from tests.conftest import REPO

EXAMPLE = REPO / "configs" / "retrieval-cpu.yaml"


def _parse(name: str, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser, name)
    args = parser.parse_args(argv)
    args.command = name
    return args


def test_example_config_validates():
    config = load_command_config(EXAMPLE)
    assert config.chunking.chunk_tokens == 300 and config.chunking.overlap_tokens == 60
    assert config.retrieval.top_k == 20 and config.index.backend == "embedded"


def test_unknown_keys_are_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"dataset": {"path": "x", "limt": 3}}))
    with pytest.raises(ValueError, match="limt"):
        load_command_config(path)
    path.write_text(yaml.safe_dump({"readers": []}))
    with pytest.raises(ValueError, match="readers"):
        load_command_config(path)


def test_flags_override_the_file():
    args = _parse("retrieve", ["--config", str(EXAMPLE), "--dataset", "/data/bioasq", "--limit", "7",
                               "--top-k", "5"])
    config = apply_overrides(load_command_config(args.config), args)
    assert (config.dataset.path, config.dataset.limit, config.retrieval.top_k) == ("/data/bioasq", 7, 5)
    assert config.chunking == load_command_config(EXAMPLE).chunking


def test_index_has_no_top_k_flag():
    with pytest.raises(SystemExit):
        _parse("index", ["--top-k", "5"])


def test_metrics_table():
    table = format_metrics({"bm25": {"R@20": 0.5, "RR@20": 0.25}, "knn": {"R@20": 0.75, "RR@20": 1.0}})
    lines = table.splitlines()
    assert lines[0].split() == ["retriever", "R@20", "RR@20"]
    assert (lines[1].split() == ["bm25", "0.5000", "0.2500"]
            and lines[2].split() == ["knn", "0.7500", "1.0000"])


def test_bad_config_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset: [1, 2")
    assert cli.main(["index", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    assert "bad.yaml" in capsys.readouterr().err


def test_index_then_retrieve(tmp_path, capsys):
    config = tmp_path / "bm25.yaml"
    config.write_text(
        yaml.safe_dump({"dataset": {"path": str(REPO / "data" / "bioasq-sample")},
                        "retrieval": {"retrievers": ["bm25"]}})
    )
    common = ["--config", str(config), "--out", str(tmp_path / "run"), "--limit", "3", "--no-progress"]
    assert cli.main(["index", *common]) == 0
    assert "indexed:" in capsys.readouterr().out
    assert cli.main(["retrieve", *common]) == 0
    out = capsys.readouterr().out
    assert "index                reused" in out
    assert out.splitlines()[-2].split() == ["retriever", "P@20", "R@20", "RR@20", "nDCG@20"]
    assert out.splitlines()[-1].startswith("bm25")
    assert RetrievalCommandConfig().dataset.path == "data/bioasq-sample"


def test_dataset_error_is_reported_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"questions": [{"id": "q1", "body": "What is concizumab?", '
                   '"snippets": [{"text": "x"}]}]}')
    code = cli.main(["index", "--dataset", str(bad), "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 1
    err = capsys.readouterr().err  # beside the line naming the log file of Ray's records
    assert f"\nerror: {bad}, question 0, snippet 0: missing field 'document'\n" in err
    assert "Traceback" not in err and "log records of Ray" in err
