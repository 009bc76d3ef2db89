import json

from judges.suite import all_metrics, suites
from pipelines.cli import main


def test_metrics_lists_every_registered_metric_of_the_five_suites(capsys):
    assert main(["metrics", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {row["suite"] for row in rows} == {"ccrs", "grouse", "vera", "ragchecker", "gqm"} == set(suites())
    assert [row["metric"] for row in rows] == [metric.name for metric in all_metrics()]
    ccrs = {row["metric"]: row for row in rows if row["suite"] == "ccrs"}
    assert list(ccrs) == ["CC", "QR", "ID", "AC", "IR"]
    assert ccrs["ID"]["inputs"] == "question, context, response" and ccrs["ID"]["scale"] == "0-100"
    assert all(row["prompt_version"] for row in rows)


def test_metrics_table_and_unknown_suite(capsys):
    assert main(["metrics", "--suite", "ccrs"]) == 0
    out = capsys.readouterr().out
    assert "Contextual Coherence" in out and "grouse" not in out
    assert main(["metrics", "--suite", "nope"]) == 2
