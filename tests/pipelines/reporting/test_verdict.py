"""The verdict (summary.md) of a run directory with real statistics of planted scores (no LLM)."""
import json

import pandas as pd
import pytest

from pipelines.extensions import verdict_sections
from stats.analysis import compute_all
from pipelines.reporting.failures import write_failure_report
from tasks.reduce import load_hypotheses
from tasks.runtime.layout import RunLayout
from tasks.reduce import load_scores
from tasks.runtime.stage import MANIFEST
from pipelines.reporting.verdict import (
    VerdictError,
    build_stats_summary,
    build_summary,
    k_text,
    letter_groups,
    write_summary,
)
from tests.conftest import BIOASQ_SAMPLE
from tests.stats.conftest import make_repeated_scores, make_scores
from tests.tasks.test_reduce import CCRS, _scores

HYPOTHESES = """hypotheses:
  - name: H1
    description: the Mistral systems beat the extractive ones on CC
    pairs: [[A, C]]
    metrics: [CC]
    direction: greater
  - name: H2
    description: BM25 and kNN differ for the extractive top-3 reader
    pairs: [[E, F]]
    metrics: [QR]
"""


def make_judged_run(root, hypotheses=None):
    """Six systems on the BioASQ sample's questions, A and B planted 0.2 higher on every CCRS metric."""
    query_ids = [q["id"] for q in json.loads(BIOASQ_SAMPLE.read_text())["questions"]]
    layout = RunLayout(root)
    layout.judge_dir("ccrs").mkdir(parents=True)
    _scores(CCRS, query_ids, 0).to_parquet(layout.scores("ccrs"))
    (layout.judge_dir("ccrs") / MANIFEST).write_text(json.dumps(
        {"stage": "judge_ccrs", "summary": {"judge_model": "smollm2-135m-instruct", "prompt_version": "v1",
                                            "scoring_counts": {"expected": 955, "integer_fallback": 2}}}))
    layout.generations.parent.mkdir()
    readers = {"A": ("bm25", "mistral"), "B": ("knn", "mistral"),
               "C": ("bm25", "extractive-top1"), "D": ("knn", "extractive-top1"),
               "E": ("bm25", "extractive-top3"), "F": ("knn", "extractive-top3")}
    # Mistral's window held 19 of the 20 chunks for the first question (status ok), a failed A answer
    # (20 chunks fitted) is left out of k
    pd.DataFrame([{"query_id": q, "system": s, "retriever": r, "reader": m, "status": "ok",
                   "n_chunks_used": 19 if (s == "A" and i == 0) else 20} for i, q in enumerate(query_ids)
                  for s, (r, m) in readers.items()]
                 + [{"query_id": "extra", "system": "A", "retriever": "bm25", "reader": "mistral",
                     "status": "failed", "n_chunks_used": 1}]).to_parquet(layout.generations)
    hypotheses_path = None
    if hypotheses:
        hypotheses_path = root / "hypotheses.yaml"
        hypotheses_path.write_text(hypotheses)
    hypothesis_set = load_hypotheses(hypotheses_path) if hypotheses_path else None
    stats = compute_all(load_scores(layout.scores("ccrs")), hypothesis_set, b=500, seed=0, alpha=0.05,
                        metric_order=CCRS)
    layout.stats_json.parent.mkdir()
    layout.stats_json.write_text(json.dumps(stats))  # what the reduce stage writes (without its plots)
    layout.config_json.write_text(json.dumps({"name": "planted", "stats": {"hypotheses": (
        str(hypotheses_path) if hypotheses_path else None)}}))
    write_failure_report(root, {
        "generate": {"rows": 192, "failed": {}},
        "judge_ccrs": {"judgments": 960, "status_counts": {"ok": 957, "failed": 3},
                       "failure_reasons": {"no integer in 0-100 after 2 re-asks": 3},
                       "requests": {"client": {"attempts": 966, "retries": 2}}},
    })
    return layout


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    return make_judged_run(tmp_path_factory.mktemp("verdict") / "run", HYPOTHESES)


def test_summary_holds_means_cis_letters_hypotheses_failures_and_judge(judged_run):
    text = write_summary(judged_run.root).read_text()
    assert judged_run.summary_md.read_text() == text
    stats = json.loads(judged_run.stats_json.read_text())
    assert text.startswith("# Verdict: planted\n")
    assert f"{stats['n_queries']} questions, 6 systems, judge `smollm2-135m-instruct`" in text
    assert "| ccrs | smollm2-135m-instruct | v1 | expected 955, integer_fallback 2 |" in text
    cc_row = next(line for line in text.splitlines() if line.startswith("| CC |"))
    cells = [cell.strip() for cell in cc_row.strip("|").split("|")]
    mean_a, (low_a, high_a) = stats["per_metric"]["CC"]["means"]["A"], stats["per_metric"]["CC"]["ci95"]["A"]
    assert cells[1].startswith(f"{mean_a:.2f} [{low_a:.2f}, {high_a:.2f}]")
    letters = letter_groups(stats["per_metric"]["CC"], 0.05)
    # The planted 0.2 advantage of A and B: no letter shared with any extractive system.
    assert all(not set(letters[top]) & set(letters[low]) for top in "AB" for low in "CDEF")
    assert cells[1].endswith(f" {letters['A']}") and cells[3].endswith(f" {letters['C']}")
    n = stats["n_queries"]
    assert f"| A | bm25 | mistral | 19-20 (mean {(19 + 20 * (n - 1)) / n:.2f}) |" in text
    assert "| B | knn | mistral | 20 |" in text and "k: the chunks each answer's prompt held" in text
    h1 = next(line for line in text.splitlines() if line.startswith("| H1 |"))
    assert "the Mistral systems beat the extractive ones on CC" in h1 and "**supported**" in h1
    assert f"{stats['hypotheses']['H1']['adjusted_p']:.4f}" in h1
    assert "not supported" in next(line for line in text.splitlines() if line.startswith("| H2 |"))
    assert "| judge_ccrs | 960 | 3 | 2 | no integer in 0-100 after 2 re-asks (3) |" in text
    assert "| ccrs | smollm2-135m-instruct | v1 |" in text


def test_a_run_without_statistics_is_a_clear_error(tmp_path):
    with pytest.raises(VerdictError, match="did not reach the statistics"):
        build_summary(tmp_path)


def test_k_text_says_how_many_chunks_the_answers_received():
    assert k_text([20, 20]) == "20" and k_text([]) == ""
    assert k_text([19, 20, 20, 20]) == "19-20 (mean 19.75)"


def test_a_pair_at_p_equal_to_alpha_shares_a_letter():
    block = {"means": {"A": 0.9, "B": 0.2}, "pairwise": [{"a": "A", "b": "B", "p_value": 0.05}]}
    assert letter_groups(block, 0.05) == {"A": "a", "B": "a"}
    assert letter_groups(block, 0.0501) == {"A": "a", "B": "b"}


def test_a_metric_without_complete_queries_has_no_letters():
    block = {"means": {"A": None, "B": None}, "pairwise": [{"a": "A", "b": "B", "p_value": None}]}
    assert letter_groups(block, 0.05) == {}


def test_the_verdict_of_repeated_judgments_names_the_judge_noise_and_each_flaky_pair():
    scores = make_repeated_scores(n_queries=30, effects={"C": 0.06}, judge_sd=0.15, seed=0)
    stats = json.loads(json.dumps(compute_all(scores, b=300, seed=0)))  # as read from stats.json
    noise = stats["per_metric"]["CC"]["judge_noise"]
    assert noise["flaky_pairs"] == [["A", "C"]]
    text = build_stats_summary(stats, "repeated", sections=verdict_sections())  # judge.repeats' section
    assert "## Judge noise" in text
    row = next(line for line in text.splitlines() if line.startswith("| CC | 3 |"))
    low, high = noise["reliability_ci95"]
    assert f"{noise['reliability']:.2f} [{low:.2f}, {high:.2f}]" in row and row.endswith("| A vs C |")
    assert f"{100 * noise['residual_share']:.0f}%" in row and "| 2/3 |" in row
    assert "**Flaky:** A vs C (CC)" in text
    assert "Judge noise" not in build_stats_summary(compute_all(make_scores(), b=50), "plain",
                                                    sections=verdict_sections())


def one_system_scores(n_questions: int) -> pd.DataFrame:
    return make_scores(n_queries=n_questions, systems=("prod",))


def test_the_verdict_of_one_system_has_means_and_cis_and_one_line_for_what_needs_two():
    stats = compute_all(one_system_scores(8), b=200)
    text = build_stats_summary(stats, "prod.csv")
    cc, qr = (stats["per_metric"][m] for m in ("CC", "QR"))
    cell = "{:.2f} [{:.2f}, {:.2f}]".format
    assert text == (
        "# Verdict: prod.csv\n\n8 questions, 1 system (prod); 95% bootstrap CIs from B = 200 resamples.\n\n"
        "## Means and 95% CIs\n\n"
        "One system (prod): the HSD groups, discriminative power and hypotheses compare systems and need two "
        "or more.\n\n| metric | prod |\n| --- | --- |\n"
        f"| CC | {cell(cc['means']['prod'], *cc['ci95']['prod'])} |\n"
        f"| QR | {cell(qr['means']['prod'], *qr['ci95']['prod'])} |\n")


def test_the_verdict_of_one_system_with_repeats_names_its_judge_noise():
    stats = compute_all(make_repeated_scores(n_queries=10, systems=("prod",)), b=200)
    text = build_stats_summary(stats, "prod", sections=verdict_sections())
    noise = stats["per_metric"]["CC"]["judge_noise"]
    low, high = noise["reliability_ci95"]
    assert "Reliability (one system): the share of the spread of the question scores" in text
    assert (f"| CC | 3 | {noise['reliability']:.2f} [{low:.2f}, {high:.2f}] | "
            f"{noise['reliability_one_judgment']:.2f} | {100 * noise['residual_share']:.0f}% |") in text
    assert "stable" not in text and "Hypotheses" not in text


PLAN = "; `ccrs plan power` says how many questions a difference needs."


@pytest.mark.parametrize(("systems", "questions", "line"), [
    (("A", "B"), 4, "**Too few questions:** CC (4), QR (4) rest on fewer than 6 questions each: with 2 "
                    "systems the HSD cannot find any pair different at alpha = 0.05 on fewer than 6" + PLAN),
    (("A", "B", "C"), 4, "**Too few questions:** CC (4), QR (4) rest on fewer than 5 questions each: their "
                         "95% CIs and HSD groups rest on too few questions to be trusted" + PLAN),
    (("prod",), 3, "**Too few questions:** CC (3), QR (3) rest on fewer than 6 questions each: 95% CIs from "
                   "so few are rough, and a night compared with its baseline (`ccrs nightly`) cannot show a "
                   "significant drop on fewer than 6" + PLAN),
    (("A", "B"), 6, None),
    (("A", "B", "C"), 5, None),
])
def test_a_verdict_on_fewer_questions_than_can_separate_anything_says_so_in_one_line(systems, questions,
                                                                                     line):
    text = build_stats_summary(compute_all(make_scores(n_queries=questions, systems=systems), b=100), "few")
    found = [row for row in text.splitlines() if row.startswith("**Too few questions:**")]
    assert found == ([line] if line else [])


def test_the_run_verdict_of_one_system_says_one_system_and_has_no_hypotheses_section(tmp_path):
    layout = RunLayout(tmp_path)
    layout.stats_json.parent.mkdir(parents=True)
    layout.stats_json.write_text(json.dumps(compute_all(one_system_scores(6), b=100)))
    layout.config_json.write_text(json.dumps({"name": "prod-nightly", "stats": {"hypotheses": None}}))
    write_failure_report(tmp_path, {"judge_ccrs": {"judgments": 12, "status_counts": {"ok": 12}}})
    text = build_summary(tmp_path)
    assert text.startswith("# Verdict: prod-nightly\n\n6 questions, 1 system (prod), judge unknown; 95% "
                           "bootstrap CIs from B = 100 resamples.")
    assert "## Means and 95% CIs" in text and "HSD groups, discriminative" in text
    assert "## Hypotheses" not in text


def test_the_human_calibrated_section_orders_each_differing_pair_and_names_the_gaps():
    from pipelines.reporting.human_calibrated import human_calibrated_section

    human = {"human_metric": "CC", "n_labels": {"A": 20, "B": 20, "C": 4}, "n_annotators": 2,
             "means": {"A": 0.4, "B": 0.7}, "ci95": {"A": [0.3, 0.5], "B": [0.6, 0.8]},
             "judge_bias": {"A": 0.05, "B": -0.1, "C": 0.0},
             "judge_bias_ci95": {"A": [0.0, 0.1], "B": [-0.2, 0.0], "C": [-0.3, 0.3]},
             "pairwise": [{"a": "A", "b": "B", "diff": -0.3, "ci95": [-0.45, -0.15], "p_value": 0.001,
                           "significant": True, "judge_only_significant": False, "decision_changed": True}],
             "too_few_labels": ["C"], "pairs_too_few_labels": [["A", "C"], ["B", "C"]], "min_labels": 10}
    judge = {"means": {"A": 0.35, "B": 0.8, "C": 0.5}, "ci95": {"A": [0.3, 0.4], "B": [0.7, 0.9],
                                                                "C": [0.4, 0.6]}, "human_calibrated": human}
    text = human_calibrated_section({"alpha": 0.05, "metrics": ["CC"], "per_metric": {"CC": judge}})
    assert "### CC: 44 labels, 2 annotators" in text
    assert "| A | 20 | 0.35 [0.30, 0.40] | 0.40 [0.30, 0.50] | +0.05 [+0.00, +0.10] |" in text
    assert "| C | 4 | 0.50 [0.40, 0.60] | n/a | +0.00 [-0.30, +0.30] |" in text
    assert "B > A by 0.30 [0.15, 0.45] (adjusted p 0.001)" in text
    assert "A vs B: different with the labels, not different by the judge alone" in text
    assert "**Too few labels:** C (4)" in text and "2 pairs labeled together on fewer than 10" in text
    assert human_calibrated_section({"alpha": 0.05, "metrics": ["CC"], "per_metric": {"CC": {}}}) == ""
