"""The Python API's options that become config overrides (pipelines/evaluate.py), read back from the
checked RunConfig: no server, no run."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from pipelines.config import DEFAULT_CONFIG
from pipelines.evaluate import EvaluationInputError, prepare_evaluation
from tests.tasks.test_outputs import EXAMPLE, example_rows


def _sequential(config: Path | None = None, **options):
    run_config, _ = prepare_evaluation(EXAMPLE, limit=2, out="unused", config=config, **options)
    return run_config.extension_block("judge.sequential")


def _config_with_sequential_block(path: Path) -> Path:
    raw = yaml.safe_load(Path(DEFAULT_CONFIG).read_text())
    raw["judge"]["sequential"] = {"margin": 0.1}
    path.write_text(yaml.safe_dump(raw))
    return path


def test_sequential_true_turns_the_block_on_with_its_defaults_and_a_dict_sets_its_fields():
    assert _sequential() is None
    default = _sequential(sequential=True)
    assert default is not None and default.margin == 0.02
    chosen = _sequential(sequential={"margin": 0.05, "look_every": 3})
    assert (chosen.margin, chosen.look_every, chosen.alpha) == (0.05, 3, default.alpha)


def test_a_configs_sequential_block_is_kept_extended_or_turned_off(tmp_path):
    config = _config_with_sequential_block(tmp_path / "config.yaml")
    assert _sequential(config).margin == 0.1
    assert _sequential(config, sequential=True).margin == 0.1
    extended = _sequential(config, sequential={"look_every": 3})
    assert (extended.margin, extended.look_every) == (0.1, 3)
    assert _sequential(config, sequential=False) is None


@pytest.mark.parametrize("bad, says", [("yes", "sequential: expected True, False, None or a dict"),
                                       ({"marginn": 0.1}, "marginn")])
def test_a_bad_sequential_option_is_one_clear_error(bad, says):
    with pytest.raises(EvaluationInputError, match=says):
        _sequential(sequential=bad)


def _dated_file(path: Path) -> Path:
    """One system's answers without a `system` column, as a release job writes them to a dated file."""
    rows = [{k: v for k, v in row.items() if k != "system"} for row in example_rows()
            if row["system"] == "top3-sentences"]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_series_is_the_experiment_unless_named_and_system_names_a_dated_files_one_system(tmp_path):
    config, outputs = prepare_evaluation(_dated_file(tmp_path / "outputs-2026-11-28.jsonl"), out="unused",
                                         experiment="prod-rag-nightly")
    assert (config.mlflow.series, config.mlflow.resolved_series()) == (None, "prod-rag-nightly")
    assert outputs.systems == ["outputs-2026-11-28"]  # the stem: a new system every dated night
    config, outputs = prepare_evaluation(tmp_path / "outputs-2026-11-28.jsonl", out="unused",
                                         experiment="prod-rag-nightly", series="staging", system="prod")
    assert (config.mlflow.resolved_series(), outputs.systems) == ("staging", ["prod"])
    assert config.name == "evaluate-outputs-2026-11-28"  # the MLflow run's name still says tonight's file


@pytest.mark.parametrize("options, says", [({"system": "prod"}, "--system names the one system of the "
                                            "outputs; they hold 2 (top1-sentence, top3-sentences)"),
                                           ({"series": ""}, "series")])
def test_a_system_name_for_several_systems_or_an_empty_series_is_one_clear_error(options, says):
    with pytest.raises(EvaluationInputError, match=re.escape(says)):
        prepare_evaluation(EXAMPLE, limit=2, out="unused", **options)
