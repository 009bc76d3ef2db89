"""`ccrs vera`: the VERA prompt version a judging command uses, named, with the option for the paper's."""
import argparse

import pytest


def _parsed(*argv: str) -> argparse.Namespace:
    from pipelines.vera_cmd import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("command", [["score", "runs/x"], ["qrels", "--qrels", "q.txt"], ["topicality"]])
def test_the_vera_prompt_version_is_one_option_away_and_named(command):
    from pipelines.config import load_config
    from pipelines.vera_cmd import prompts_named, vera_overrides

    default = load_config(None, vera_overrides(_parsed(*command))).judge
    assert prompts_named(default) == "VERA prompts v2; the paper's: --vera-prompt-version paper"
    paper = load_config(None, vera_overrides(_parsed(*command, "--vera-prompt-version", "paper"))).judge
    assert paper.vera.prompt_version == "paper" and prompts_named(paper) == "VERA prompts paper"
    with pytest.raises(SystemExit):
        _parsed(*command, "--vera-prompt-version", "v9")


@pytest.mark.parametrize("command", [["score", "runs/x"], ["qrels", "--qrels", "q.txt"], ["topicality"]])
def test_the_paper_preset_judges_with_the_papers_prompts_unless_a_version_is_given(command):
    from pipelines.config import load_config
    from pipelines.vera_cmd import bootstrap_settings, vera_overrides

    preset = bootstrap_settings(_parsed(*command, "--preset", "paper"))
    assert load_config(None, vera_overrides(preset)).judge.vera.prompt_version == "paper"
    mine = _parsed(*command, "--preset", "paper", "--vera-prompt-version", "v2")
    assert load_config(None, vera_overrides(mine)).judge.vera.prompt_version == "v2"
    if command[0] == "score":  # the paper's top 5 passages; --top-k still wins
        assert preset.top_k == 5
        assert bootstrap_settings(_parsed(*command, "--preset", "paper", "--top-k", "3")).top_k == 3


def _scores_file(tmp_path, n_queries: int):
    import pandas as pd

    path = tmp_path / "scores.parquet"
    pd.DataFrame({"query_id": [f"q{i}" for i in range(n_queries)], "system": "a",
                  "metric": "vera_faithfulness", "score": [i / n_queries for i in range(n_queries)]}
                 ).to_parquet(path)
    return path


def test_an_n_above_the_observations_is_refused_in_one_line_with_exit_2(tmp_path, capsys):
    from pipelines.vera_cmd import main

    args = _parsed("bootstrap", str(_scores_file(tmp_path, 20)), "--n", "50", "--out", str(tmp_path / "o"))
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("ccrs vera: bootstrap sample size n = 50 exceeds the 20 observations: resamples larger "
                   "than the data understate the standard error; give n <= 20")
    assert not (tmp_path / "o").exists()


def test_the_paper_preset_on_20_observations_draws_5_and_says_so(tmp_path, capsys):
    import json

    from pipelines.vera_cmd import main

    out = tmp_path / "o"
    assert main(_parsed("bootstrap", str(_scores_file(tmp_path, 20)), "--preset", "paper", "--out",
                        str(out))) == 0
    note = "n = 50 asked but only 20 observations: drawn n = 5, the paper's ratio n/N = 0.25"
    assert f"note: {note}" in capsys.readouterr().out
    report = json.loads((out / "bootstrap.json").read_text())
    entry = report["systems"]["a"]["vera_faithfulness"]
    assert (report["n"], report["b"], entry["n"], entry["n_observed"]) == (50, 500, 5, 20)
    assert entry["sample_size_note"] == note
    assert report["n_above_observations"] == "drawn at the paper's ratio n/N = 0.25"


def test_score_refuses_an_n_above_the_runs_queries_before_any_call(tmp_path, capsys):
    import pandas as pd

    from pipelines.vera_cmd import main
    from tasks.runtime.layout import RunLayout

    layout = RunLayout(tmp_path / "run")
    layout.queries.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"query_id": [f"q{i}" for i in range(20)], "text": "?"}).to_parquet(layout.queries)
    unreachable = ("--llm-base-url", "http://127.0.0.1:9/v1")  # never asked: refused first
    assert main(_parsed("score", str(layout.root), "--n", "30", *unreachable)) == 2
    assert "ccrs vera: bootstrap sample size n = 30 exceeds the 20 " in capsys.readouterr().err
    assert main(_parsed("score", str(layout.root), "--n", "10", "--limit", "5", *unreachable)) == 2
    assert "n = 10 exceeds the 5 observations" in capsys.readouterr().err
