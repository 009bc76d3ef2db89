"""One metric's labels and skips of a run, in memory beside their files: what the page shows an annotator
next, and the marks and skips it sends, checked and written before they are answered."""
from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from pipelines.tools.label_designs import UNIFORM
from pipelines.tools.labeling.active import check_design_options, served_questions
from pipelines.tools.labeling.agreement import annotator_agreement
from pipelines.tools.labeling.files import append_jsonl, read_jsonl, utc_now
from pipelines.tools.labeling.metric import LabelError, LabelMetric, record_metric
from pipelines.tools.labeling.questions import Question, blinded, question_order
from pipelines.tools.labeling.stopline import StopLine
from tasks.runtime.labels import ANSWER_DIGEST, answer_digest
from tasks.runtime.layout import RunLayout

MAX_ANNOTATOR_CHARS = 100


def _of_this_answer(record: dict, answers: dict[tuple[str, str], str]) -> bool:
    """Whether a label marks the answer the run holds now (one without a fingerprint is taken as it)."""
    digest = record.get(ANSWER_DIGEST)
    return digest is None or answers.get((str(record["question_id"]), str(record["system"]))) == digest


class LabelStore:
    """One metric's labels and skips of a run, in memory beside their files; thread-safe."""

    def __init__(self, layout: RunLayout, metric: LabelMetric, questions: Sequence[Question],
                 order: Sequence[str], seed: int, stop_line: StopLine | None = None):
        """`order`: the questions served, in order (an active design's: the drawn ones); `stop_line`: an
        active design's decisions (None: a uniform design, no decisions)."""
        self.layout, self.metric, self.seed, self.stop_line = layout, metric, seed, stop_line
        self.questions = {question.query_id: question for question in questions}
        self.order = list(order)
        self._lock = threading.Lock()
        labels, dropped = read_jsonl(layout.labels_file, repair=True)
        skips, dropped_skips = read_jsonl(layout.labels_skips, repair=True)
        self.repaired = dropped + dropped_skips  # unfinished lines a killed server left (never answered)
        answers = {(question.query_id, answer.system): answer_digest(answer.text) for question in questions
                   for answer in question.answers}
        # a mark of another answer than the run holds now (an earlier night's, in a reused folder) is not
        # this answer's: it is served again, as the statistics leave that mark out (tasks/runtime/labels.py)
        self._records = [record for record in labels if record.get("metric") == metric.name
                         and _of_this_answer(record, answers)]
        self._marks: dict[tuple[str, str], dict[str, Any]] = {}  # (annotator, question) -> {system: mark}
        for record in self._records:
            self._marks.setdefault((str(record.get("annotator") or ""), str(record["question_id"])), {})[
                str(record["system"])] = record["label"]
        self._skips = {(str(record.get("annotator") or ""), str(record["question_id"])) for record in skips
                       if record.get("metric") == metric.name}

    @classmethod
    def for_design(cls, layout: RunLayout, metric: LabelMetric, questions: Sequence[Question],
                   args: argparse.Namespace) -> LabelStore:
        """`ccrs label`'s store of `metric` on the questions its --design serves (the seeded order of them
        all, or an active design's draw with its stop line: active.py), the design's options checked before
        anything is written and the metric recorded."""
        check_design_options(args.design, args.label_budget, args.label_floor, args.label_margin,
                             len(questions))
        order = question_order(layout, [question.query_id for question in questions], args.seed)
        served, stop_line = served_questions(layout, metric, order, args.seed, args.design, args.label_budget,
                                             args.label_floor, args.label_margin)
        record_metric(layout, metric)
        return cls(layout, metric, questions, served, args.seed, stop_line)

    # -- reading
    def done(self, annotator: str, query_id: str) -> bool:
        """Labeled for every system that answered, or skipped, by this annotator."""
        if (annotator, query_id) in self._skips:
            return True
        marked = self._marks.get((annotator, query_id), {})
        return all(answer.system in marked for answer in self.questions[query_id].answers) and bool(marked)

    def next_question(self, annotator: str) -> Question | None:
        return next((self.questions[qid] for qid in self.order if not self.done(annotator, qid)), None)

    def progress(self, annotator: str) -> dict[str, int]:
        skipped = sum((annotator, qid) in self._skips for qid in self.order)
        done = sum(self.done(annotator, qid) for qid in self.order)
        return {"labeled": done - skipped, "skipped": skipped, "total": len(self.order)}

    def state(self, annotator: str) -> dict[str, Any]:
        """What the page shows this annotator: the metric, the next question (blind), progress, agreement."""
        annotator = annotator.strip()
        with self._lock:
            question = self.next_question(annotator) if annotator else None
            state = {"metric": self.metric.page_record(), "annotator": annotator,
                     "progress": self.progress(annotator), "question": self._shown(annotator, question),
                     "agreement": self._agreement()}
        return state

    def design_note(self) -> str:
        """What the start line says of the design after the metric's scale ("" for a uniform one)."""
        return "" if self.stop_line is None else self.stop_line.start_note()

    def decisions(self) -> dict[str, Any]:
        """Which comparisons the labels so far settle (an active design), for the page after each question."""
        if self.stop_line is None:
            return {"design": UNIFORM}
        with self._lock:
            return self.stop_line.status(list(self._records), {query_id for _, query_id in self._skips})

    def _shown(self, annotator: str, question: Question | None) -> dict[str, Any] | None:
        if question is None:
            return None
        marked = self._marks.get((annotator, question.query_id), {})
        return {"query_id": question.query_id, "text": question.text, "reference": question.reference,
                "position": self.order.index(question.query_id) + 1,
                "answers": [{"slot": slot, "text": answer.text, "contexts": list(answer.contexts),
                             "labeled": marked.get(answer.system)}
                            for slot, answer in enumerate(blinded(question, self.seed), 1)]}

    def _agreement(self) -> dict[str, Any] | None:
        annotators = {record.get("annotator") for record in self._records}
        return annotator_agreement(self._records, self.metric.name) if len(annotators) >= 2 else None

    # -- writing
    def label(self, annotator: str, query_id: str, marks: dict[str, Any]) -> dict[str, Any]:
        """Marks {slot ("1".."k"): mark} of the annotator's next question: appended (every answer not yet
        marked by this annotator must have one), then the annotator's next state."""
        annotator = _annotator(annotator)
        with self._lock:
            question = self._expected(annotator, query_id)
            if not question.answers:
                raise LabelError("no system answered this question: nothing to mark, skip it (s)")
            answers = blinded(question, self.seed)
            marked = self._marks.get((annotator, query_id), {})
            unknown = sorted(set(map(str, marks)) - {str(slot) for slot in range(1, len(answers) + 1)})
            if unknown:
                raise LabelError(f"no answer {', '.join(unknown)} on this question")
            records = []
            for slot, answer in enumerate(answers, 1):
                if answer.system in marked:
                    continue
                if str(slot) not in marks:
                    raise LabelError(f"Answer {slot} has no mark yet")
                records.append({"question_id": query_id, "system": answer.system, "metric": self.metric.name,
                                "label": self.metric.checked_mark(marks[str(slot)]), "annotator": annotator,
                                "time": utc_now(), ANSWER_DIGEST: answer_digest(answer.text)})
            append_jsonl(self.layout.labels_file, records)
            self._marks[(annotator, query_id)] = {**marked, **{r["system"]: r["label"] for r in records}}
            self._records.extend(records)
        return self.state(annotator)

    def skip(self, annotator: str, query_id: str) -> dict[str, Any]:
        annotator = _annotator(annotator)
        with self._lock:
            self._expected(annotator, query_id)
            append_jsonl(self.layout.labels_skips, [{"question_id": query_id, "metric": self.metric.name,
                                                      "annotator": annotator, "time": utc_now()}])
            self._skips.add((annotator, query_id))
        return self.state(annotator)

    def _expected(self, annotator: str, query_id: str) -> Question:
        """The question must be the annotator's next one: the page cannot pick which questions get labels."""
        question = self.next_question(annotator)
        if question is None or question.query_id != query_id:
            shown = "none left" if question is None else f"it is {question.query_id}"
            raise LabelError(f"question {query_id} is not {annotator}'s next one ({shown}); reload the page",
                             HTTPStatus.CONFLICT)
        return question


def _annotator(name: Any) -> str:
    name = str(name or "").strip()
    if not name:
        raise LabelError("give your name (annotator) first")
    if len(name) > MAX_ANNOTATOR_CHARS:
        raise LabelError(f"an annotator name has at most {MAX_ANNOTATOR_CHARS} characters")
    return name

