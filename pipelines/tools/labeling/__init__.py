"""The labeling page's core (`ccrs label RUN_DIR`), one module a job: which metric is labeled on which scale
(metric.py), the run's questions with each system's answer and their seeded order (questions.py), the labels
store (store.py) and its files (files.py), the annotators' agreement (agreement.py), the page itself
(page.py) and the HTTP server it talks to (server.py), which answers only requests that name it, come from
its own origin and carry its token (access.py; docs/human-labels.md).

Every file is a path of `RunLayout` (labels/labels.jsonl, skips.jsonl, metrics.json, order.json). A mark or
a skip is appended, flushed and fsynced before its HTTP request is answered, so a killed server loses
nothing that the page was told is saved. The page is blind: it sees "Answer 1..k" in an order drawn per
question from the seed; only the store maps an answer back to its system.
"""
from pipelines.tools.labeling.access import (
    LOOPBACK_NAMES,
    TOKEN_HEADER,
    TOKEN_PATTERN,
    Access,
    checked_token,
)
from pipelines.tools.labeling.agreement import ALPHA_LEVEL, agreement_rows, annotator_agreement
from pipelines.tools.labeling.files import append_jsonl, read_jsonl
from pipelines.tools.labeling.metric import (
    MAX_BUTTONS,
    LabelError,
    LabelMetric,
    read_metrics_file,
    record_metric,
    resolve_metric,
    scored_metrics,
)
from pipelines.tools.labeling.questions import Answer, Question, blinded, load_questions, question_order
from pipelines.tools.labeling.server import MAX_BODY_BYTES, LabelServer, make_server
from pipelines.tools.labeling.store import MAX_ANNOTATOR_CHARS, LabelStore

__all__ = [
    "ALPHA_LEVEL", "LOOPBACK_NAMES", "MAX_ANNOTATOR_CHARS", "MAX_BODY_BYTES", "MAX_BUTTONS", "TOKEN_HEADER",
    "TOKEN_PATTERN", "Access", "Answer", "LabelError", "LabelMetric", "LabelServer", "LabelStore", "Question",
    "agreement_rows", "annotator_agreement", "append_jsonl", "blinded", "checked_token", "load_questions",
    "make_server", "question_order", "read_jsonl", "read_metrics_file", "record_metric", "resolve_metric",
    "scored_metrics",
]
