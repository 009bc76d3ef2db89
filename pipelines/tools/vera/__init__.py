"""`ccrs vera` tools, one module a job: the VERA suite over a run's generations and the bootstrap report
(scoring.py), query sets answered, judged and compared (query_sets.py), repository topicality (N query sets
through the run's own retrievers, sections 3.4 / 5.2: topicality.py) and the section 5.1 experiment
(perfectly relevant vs irrelevant contexts from qrels, straight or retrieved per reader x retriever:
qrels.py).

`ccrs vera` (pipelines/vera_cmd.py) reaches them through the names below.
"""
from pipelines.tools.vera.qrels import (
    answer_grid,
    qrels_asks,
    qrels_report,
    retrieved_asks,
    with_grid_columns,
)
from pipelines.tools.vera.query_sets import answer_asks, judged_set_scores, vera_reader
from pipelines.tools.vera.scoring import AGGREGATE_OFF, bootstrap_report, load_aggregator, run_vera
from pipelines.tools.vera.topicality import (
    DEFAULT_SETS,
    hit_score_frame,
    load_query_sets,
    run_retriever_hits,
    topicality_asks,
    topicality_report,
)

__all__ = [
    "AGGREGATE_OFF", "DEFAULT_SETS", "answer_asks", "answer_grid", "bootstrap_report", "hit_score_frame",
    "judged_set_scores", "load_aggregator", "load_query_sets", "qrels_asks", "qrels_report",
    "retrieved_asks", "run_retriever_hits", "run_vera", "topicality_asks", "topicality_report",
    "vera_reader", "with_grid_columns",
]
