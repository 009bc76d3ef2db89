"""Builds ragas-two-systems.jsonl: real outputs of two small real RAG systems on real BioASQ questions, in
RAGAS column names (user_input, response, retrieved_contexts, reference) plus `system`.

Questions, contexts and references come unchanged from data/bioasq-sample (BioASQ 12b, CC BY 2.5): the
contexts are each question's first three gold snippets (the "retrieval"), the reference its first ideal
answer. The two systems are this project's extractive reader (judges/readers.py) over those contexts:
`top1-sentence` answers with the best-matching sentence, `top3-sentences` with the best three.

    python examples/build_example.py        # rewrites examples/ragas-two-systems.jsonl
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from judges.readers import extractive_answer

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent / "data" / "bioasq-sample" / "12B1_golden_sample.json"
QUESTIONS = 8
SYSTEMS = {"top1-sentence": 1, "top3-sentences": 3}


def _field(value):
    return ast.literal_eval(value) if isinstance(value, str) and value[:1] in "[{" else value


def rows() -> list[dict]:
    out = []
    for question in json.loads(SAMPLE.read_text())["questions"][:QUESTIONS]:
        contexts = [snippet["text"] for snippet in _field(question["snippets"])][:3]
        ideal = _field(question["ideal_answer"])
        reference = ideal[0] if isinstance(ideal, list) else str(ideal)
        for system, sentences in SYSTEMS.items():
            out.append({"system": system, "user_input": question["body"],
                        "response": extractive_answer(question["body"], contexts, sentences),
                        "retrieved_contexts": contexts, "reference": reference})
    return out


if __name__ == "__main__":
    target = HERE / "ragas-two-systems.jsonl"
    target.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    print(f"wrote {target}")
