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
