"""Builds the VERA data of this folder from BioASQ 12b (README.md says what each file is for).

    .venv/bin/python data/vera-bioasq/build.py [--golden /work/shared/data/bioasq-12b]

- minority-colorectal.json: the colorectal-cancer questions of BioASQ 12b test batches 2 and 3 (body
  matches MINORITY_TOPIC), in the official BioASQ JSON format, trimmed to id, type, body, exact_answer and
  the first ideal answer (the one the loader takes as ground truth; the golden files hold up to 26 per
  question); documents and snippets are left out (they are not part of the repository).
- qrels.txt: TREC qrels (`qid 0 docid grade`) over the repository of data/bioasq-sample: per question its
  first RELEVANT_PER_QUERY gold snippets graded 1, and NONRELEVANT_PER_QUERY snippets of other questions
  graded 0, drawn with a seeded generator among the snippets from PubMed documents the question does not
  cite. Doc ids are the loader's passage ids (retrievers.loaders.snippet_doc_id), so the sample's
  passages are the corpus and its questions the queries.
Prints the share of the repository's passages on the minority topic.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from retrievers.loaders import load_bioasq_json  # noqa: E402

SAMPLE = REPO / "data" / "bioasq-sample"
MINORITY_TOPIC = re.compile(r"colorectal|\bcolon\b|\brectal\b", re.IGNORECASE)
MINORITY_BATCHES = ("12B2_golden.json", "12B3_golden.json")
KEPT_FIELDS = ("id", "type", "body", "exact_answer")
RELEVANT_PER_QUERY = 5
NONRELEVANT_PER_QUERY = 5
SEED = 0


def minority_questions(golden: Path, exclude: set[str]) -> list[dict]:
    questions = []
    for name in MINORITY_BATCHES:
        for question in json.loads((golden / name).read_text())["questions"]:
            if question["id"] not in exclude and MINORITY_TOPIC.search(question["body"]):
                kept = {k: question[k] for k in KEPT_FIELDS if k in question}
                questions.append({**kept, "ideal_answer": question["ideal_answer"][:1]})
    return questions


def qrels_lines(sample: Path, seed: int = SEED) -> list[str]:
    dataset = load_bioasq_json(sample)
    passages = dataset.passages.to_pandas()
    queries = dataset.queries.to_pylist()
    pmid = {row.doc_id: json.loads(row.metadata)["pmid"] for row in passages.itertuples()}
    rng = np.random.default_rng(seed)
    lines = []
    for query in queries:
        cited, judged = set(query["relevant_pmids"]), set(query["relevant_doc_ids"])
        relevant = query["relevant_doc_ids"][:RELEVANT_PER_QUERY]
        others = [d for d in passages["doc_id"] if pmid[d] not in cited and d not in judged]
        drawn = rng.choice(len(others), size=min(NONRELEVANT_PER_QUERY, len(others)), replace=False)
        lines += [f"{query['query_id']} 0 {doc} 1" for doc in relevant]
        lines += [f"{query['query_id']} 0 {others[i]} 0" for i in sorted(drawn)]
    return lines


def minority_share(sample: Path) -> tuple[int, int]:
    texts = load_bioasq_json(sample).passages.column("text").to_pylist()
    return sum(bool(MINORITY_TOPIC.search(t)) for t in texts), len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", type=Path, default=Path("/work/shared/data/bioasq-12b"),
                        help="folder with the official BioASQ 12b golden files")
    args = parser.parse_args()
    sample_ids = {q["id"] for q in json.loads((SAMPLE / "12B1_golden_sample.json").read_text())["questions"]}
    minority = minority_questions(args.golden, sample_ids)
    (HERE / "minority-colorectal.json").write_text(json.dumps({"questions": minority}, indent=1) + "\n")
    lines = qrels_lines(SAMPLE)
    (HERE / "qrels.txt").write_text("\n".join(lines) + "\n")
    on_topic, total = minority_share(SAMPLE)
    print(f"minority-colorectal.json: {len(minority)} questions; qrels.txt: {len(lines)} judgments; "
          f"repository passages on the minority topic: {on_topic} of {total}")


if __name__ == "__main__":
    main()
