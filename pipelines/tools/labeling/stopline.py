"""Which comparisons the labels of an active design have settled, at any look (docs/human-labels.md):
per pair of systems, stats.active's anytime-valid interval (a confidence sequence) of the mean human
difference, over the design's questions in its order up to the first drawn question no one has labeled or
skipped yet, at alpha / (pairs x metrics of the run's designs) (Bonferroni, as sequential judging
controls its family), decided by stats.active.decide_pairs: `different`, `equivalent` (inside the margin)
or `open`. The page shows it after every question (GET /api/decisions) and `ccrs stats` writes it into
stats.json, with whether labeling can stop: every comparison settled, or every drawn question labeled or
skipped (the design has nothing more to serve; open comparisons then need a larger design). A drawn
question that was skipped counts as not drawn (counted: skips chosen by content bias the estimate)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

import numpy as np

from pipelines.tools.label_designs import ACTIVE
from pipelines.tools.labeling.design import ActiveDesign
from stats.active import DIFFERENCE_SCALE, active_confidence_sequence, decide_pairs

OPEN = "open"
SETTLED, EXHAUSTED = "settled", "exhausted"  # why labeling can stop (stop_reason)
PLAN_COMMAND = "ccrs plan labels --design active"  # what forecasts the labels a settled verdict needs


def reached(drawn: Sequence[bool], labeled: Sequence[bool], skipped: Sequence[bool]) -> int:
    """How many questions of the order the labels cover: up to the first drawn one neither labeled nor
    skipped by anyone."""
    for index, (is_drawn, is_labeled, is_skipped) in enumerate(zip(drawn, labeled, skipped)):
        if is_drawn and not is_labeled and not is_skipped:
            return index
    return len(drawn)


def pair_decisions(labels: np.ndarray, judged: np.ndarray, design: ActiveDesign, systems: Sequence[str],
                   covered: int, family: int) -> list[dict]:
    """Per pair (a < b in `systems`' order): the anytime interval of mean(label a - label b) after the first
    `covered` questions of the design's order and its decision. labels, judged: (questions in the design's
    order, systems) on [0, 1], NaN where unlabeled / not judged."""
    probabilities = np.asarray(design.probabilities)[:covered]
    lowest = float(np.min(design.probabilities))
    pairs = []
    for a, b in combinations(range(len(systems)), 2):
        rows = np.isfinite(judged[:covered, a]) & np.isfinite(judged[:covered, b])
        y = labels[:covered, a][rows] - labels[:covered, b][rows]
        entry = {"a": systems[a], "b": systems[b], "labels": int(np.isfinite(y).sum())}
        if not rows.any():
            pairs.append({**entry, "ci": list(DIFFERENCE_SCALE), "decision": OPEN})
            continue
        f = judged[:covered, a][rows] - judged[:covered, b][rows]
        sequence = active_confidence_sequence(y[:, None], f[:, None], probabilities[rows], floor=lowest,
                                              alpha=design.alpha, family_size=family,
                                              scale=DIFFERENCE_SCALE, method=design.method)
        low, high = float(np.ravel(sequence.lower[-1])[0]), float(np.ravel(sequence.upper[-1])[0])
        decision = str(decide_pairs(np.array([low]), np.array([high]), design.margin)[0])
        pairs.append({**entry, "ci": [low, high], "decision": decision})
    return pairs


def stop_reason(n_pairs: int, open_pairs: int, covered: int, n_questions: int) -> str | None:
    """Why labeling can stop: SETTLED (no comparison open), EXHAUSTED (some open, but every question the
    design drew is labeled or skipped: it has nothing more to serve), else None (label on)."""
    if n_pairs and not open_pairs:
        return SETTLED
    return EXHAUSTED if covered >= n_questions else None


def summary(pairs: list[dict], design: ActiveDesign, covered: int, labeled_questions: int,
            skipped_drawn: int, family: int) -> dict:
    """What the page and stats.json say: the pairs, how many are open, and whether labeling can stop
    (`stop`: stop_reason's)."""
    open_pairs = sum(pair["decision"] == OPEN for pair in pairs)
    return {"design": ACTIVE, "method": design.method, "alpha": design.alpha, "family_size": family,
            "margin": design.margin, "questions_covered": covered, "labeled_questions": labeled_questions,
            "drawn": sum(design.drawn), "skipped_drawn": skipped_drawn, "pairs": pairs, "open": open_pairs,
            "settled": len(pairs) - open_pairs,
            "stop": stop_reason(len(pairs), open_pairs, covered, len(design.question_ids))}


def decisions_of(design: ActiveDesign, systems: Sequence[str], judged: np.ndarray, labels: np.ndarray,
                 skipped_questions: Iterable[str], family: int) -> dict:
    """The summary from labels (design order x systems on [0, 1], NaN unlabeled) and the skipped
    questions (by any annotator)."""
    skipped_set = set(skipped_questions)
    labeled = np.isfinite(labels).any(axis=1)
    skipped = np.array([q in skipped_set for q in design.question_ids]) & ~labeled
    drawn = np.array(design.drawn)
    covered = reached(drawn, labeled, skipped)
    usable = np.where((drawn & labeled)[:, None], labels, np.nan)  # a label the draw did not ask: refused
    pairs = pair_decisions(usable, judged, design, systems, covered, family)
    return summary(pairs, design, covered, int((drawn & labeled)[:covered].sum()),
                   int((drawn & skipped)[:covered].sum()), family)


def label_grid(records: Iterable[dict], question_ids: Sequence[str], systems: Sequence[str],
               scale: tuple[float, float]) -> np.ndarray:
    """(questions, systems) mean mark over annotators mapped onto [0, 1] from `scale`, NaN unlabeled;
    an annotator's last mark of an answer counts."""
    q_index = {q: i for i, q in enumerate(question_ids)}
    s_index = {s: j for j, s in enumerate(systems)}
    last: dict[tuple[int, int], dict[str, float]] = {}
    for record in records:
        i, j = q_index.get(str(record["question_id"])), s_index.get(str(record["system"]))
        if i is not None and j is not None:
            last.setdefault((i, j), {})[str(record.get("annotator") or "")] = float(record["label"])
    grid = np.full((len(question_ids), len(systems)), np.nan)
    low, high = scale
    for (i, j), marks in last.items():
        grid[i, j] = (np.mean(list(marks.values())) - low) / (high - low)
    return grid


class StopLine:
    """The decisions of one metric's active design as its labels come in (the page's /api/decisions)."""

    def __init__(self, design: ActiveDesign, systems: Sequence[str], judged: np.ndarray,
                 scale: tuple[float, float], family: int):
        self.design, self.systems, self.judged = design, tuple(systems), judged
        self.scale, self.family = scale, family

    def status(self, records: Iterable[dict], skipped_questions: Iterable[str]) -> dict:
        labels = label_grid(records, self.design.question_ids, self.systems, self.scale)
        return decisions_of(self.design, self.systems, self.judged, labels, skipped_questions, self.family)

    def start_note(self) -> str:
        """What `ccrs label`'s start line adds after the metric's scale: what drew the questions."""
        design = self.design
        return (f", active design: {sum(design.drawn)} of {len(design.drawn)} questions drawn by the "
                f"{design.source}, floor {design.rule['floor']:.3g}")
