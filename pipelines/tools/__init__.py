"""Tools behind the `ccrs` subcommands that are not stages of `ccrs run`, a package per job: the load test
(load/), judge meta-evaluation (meta_eval/), the GQM test set (gqm/), VERA's score, bootstrap, topicality
and qrels experiment (vera/), human labeling (labeling/), the nightly gate (gate/: fetch, decide, alert),
the power, label and cost plans (planning/), and beside them the GQM report.

They may import tasks/, judges/, retrievers/ and stats/ (pipelines -> tasks -> libraries); no stage
imports them.
"""
