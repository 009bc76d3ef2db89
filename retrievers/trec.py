"""TREC-style relevance judgments and MS MARCO-style TSV files: the qrels a relevance experiment reads
(`ccrs vera qrels`, VERA section 5.1) and the query and passage texts they name, from TSV files or from a
dataset the loaders read (BioASQ JSON, rag-mini-bioasq)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from retrievers.config import DatasetConfig


class QrelsError(ValueError):
    """A qrels, queries or corpus file that cannot be read; the message names the file and line."""


def read_qrels(path: str | Path) -> pd.DataFrame:
    """TREC qrels: one judgment per line, `query_id iteration doc_id grade` (whitespace separated, the
    grade an integer); blank lines skipped. Columns query_id, doc_id, grade, in file order (a pair judged
    twice keeps its last grade)."""
    rows = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4 or not _is_int(fields[3]):
            raise QrelsError(f"{path}:{number}: expected 'query_id iteration doc_id grade' with an integer "
                             f"grade, got {line.strip()[:80]!r}")
        rows.append((fields[0], fields[2], int(fields[3])))
    if not rows:
        raise QrelsError(f"{path}: no judgments")
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
    return frame.drop_duplicates(["query_id", "doc_id"], keep="last").reset_index(drop=True)


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def read_tsv(path: str | Path, keep: set[str] | None = None, columns: int = 2) -> dict[str, list[str]]:
    """id -> the other fields of a tab-separated file (MS MARCO's collection.tsv and queries.tsv: `id<TAB>
    text`; a queries file may add `<TAB>ground truth`); read line by line, only ids in `keep` kept."""
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.rstrip("\n").split("\t")
            if not line.strip():
                continue
            if not 2 <= len(fields) <= columns:
                raise QrelsError(f"{path}:{number}: expected {'2' if columns == 2 else f'2 to {columns}'} "
                                 f"tab-separated fields, got {len(fields)}")
            if keep is None or fields[0] in keep:
                out[fields[0]] = fields[1:]
    return out


def load_qrels_texts(queries_path: str | Path, corpus_path: str | Path, qrels: pd.DataFrame
                     ) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """({query_id: (text, ground truth or "")}, {doc_id: passage text}) for the ids the qrels name, from
    TSV files (MS MARCO layout) or a dataset the loaders read (BioASQ JSON, rag-mini-bioasq)."""
    from retrievers.loaders import load_dataset

    qids, docids = set(qrels["query_id"]), set(qrels["doc_id"])
    if Path(queries_path).suffix == ".tsv":
        queries = {k: (v[0], v[1] if len(v) > 1 else "") for k, v in read_tsv(queries_path, qids, 3).items()}
    else:
        table = load_dataset(DatasetConfig(path=str(queries_path))).queries.to_pandas()
        queries = {str(r.query_id): (str(r.text), str(r.answer or "")) for r in table.itertuples()
                   if str(r.query_id) in qids}
    if Path(corpus_path).suffix == ".tsv":
        corpus = {k: v[0] for k, v in read_tsv(corpus_path, docids).items()}
    else:
        table = load_dataset(DatasetConfig(path=str(corpus_path))).passages.to_pandas()
        corpus = {str(r.doc_id): str(r.text) for r in table.itertuples() if str(r.doc_id) in docids}
    return queries, corpus
