import json

from tasks.runtime.layout import RunLayout


def test_judged_suites_are_the_finished_ones_that_the_runs_config_names(tmp_path):
    layout = RunLayout(tmp_path)
    for suite in ("ccrs", "grouse"):
        layout.scores(suite).parent.mkdir(parents=True)
        layout.scores(suite).write_bytes(b"")
    layout.judge_dir("vera").mkdir()  # started, never finished
    assert layout.judged_suites() == ["ccrs", "grouse"]  # a pilot folder: every finished suite
    layout.config_json.write_text(json.dumps({"judges": ["ccrs", "vera"]}))  # the folder's latest run
    assert layout.judged_suites() == ["ccrs"]  # grouse was judged under an earlier config
