"""Dataset loaders into the normalized schema (retrievers/schema.py).

Two layouts:
- the official BioASQ JSON (`{"questions": [...]}`; a file or a folder of *.json): the corpus is made of
  all unique snippets, one passage per unique (PubMed document, snippet text);
- the `rag-mini-bioasq` layout the paper used: Parquet `text-corpus` (passage, id) and
  `question-answer-passages` (question, answer, relevant_passage_ids, id), as files or folders of shards;
  an optional `question_type` column (`ccrs gqm testset`'s) becomes the question's qtype.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from retrievers.config import DatasetConfig
from retrievers.schema import DatasetError, Passage, Query, passages_table, queries_table, to_json

RAG_MINI_CORPUS = "text-corpus"
RAG_MINI_QA = "question-answer-passages"
# Names in the Hugging Face repository: configs as folders (`text-corpus/passages/0000.parquet`) on the
# parquet-converter branch, `data/passages.parquet/part.0.parquet` and `data/test.parquet/...` on main.
RAG_MINI_ALIASES = {RAG_MINI_CORPUS: (RAG_MINI_CORPUS, "passages"), RAG_MINI_QA: (RAG_MINI_QA, "test")}


@dataclass
class LoadedDataset:
    passages: pa.Table
    queries: pa.Table
    counts: dict[str, int] = field(default_factory=dict)


def load_dataset(config: DatasetConfig) -> LoadedDataset:
    """All questions and the whole corpus (DatasetConfig.limit is applied later, on queries only)."""
    path = Path(config.path)
    if not path.exists():
        raise DatasetError(f"{path}: dataset path does not exist")
    fmt = detect_format(path) if config.format == "auto" else config.format
    return LOADERS[fmt](path)


def detect_format(path: Path) -> str:
    if path.is_file() and path.suffix == ".json":
        return "bioasq-json"
    if path.is_dir():
        if all(_rag_mini_source(path, name) for name in (RAG_MINI_CORPUS, RAG_MINI_QA)):
            return "rag-mini-bioasq"
        if any(path.glob("*.json")):
            return "bioasq-json"
    raise DatasetError(
        f"{path}: cannot tell the dataset format (want a BioASQ *.json file or folder, or a folder with "
        f"{RAG_MINI_CORPUS!r} and {RAG_MINI_QA!r} Parquet data); set dataset.format"
    )


# ---------------------------------------------------------------- BioASQ JSON


def pmid_from_url(url: str) -> str:
    """'http://www.ncbi.nlm.nih.gov/pubmed/37341887' -> '37341887' (other strings are kept whole)."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def snippet_doc_id(pmid: str, text: str) -> str:
    """PubMed id + a short stable suffix from the snippet text: one passage per (document, snippet)."""
    return f"{pmid}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def bioasq_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise DatasetError(f"{path}: no *.json files")
    return files


def _read_questions(file: Path) -> list[Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetError(f"{file}: not valid JSON: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise DatasetError(f"{file}: expected an object with a 'questions' list (official BioASQ format)")
    return data["questions"]


def _require(obj: Any, key: str, kind: type | tuple, where: str) -> Any:
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise DatasetError(f"{where}: missing field {key!r}")
    if not isinstance(obj[key], kind):
        raise DatasetError(f"{where}: field {key!r} has type {type(obj[key]).__name__}")
    return obj[key]


class _SnippetCorpus:
    """Unique snippets as passages, in first-seen order."""

    def __init__(self) -> None:
        self.passages: dict[str, Passage] = {}
        self.n_empty_skipped = 0

    def add(self, snippet: Any, where: str) -> str | None:
        text = _require(snippet, "text", str, where).strip()
        url = _require(snippet, "document", str, where)
        if not text:
            self.n_empty_skipped += 1
            return None
        pmid = pmid_from_url(url)
        doc_id = snippet_doc_id(pmid, text)
        known = self.passages.get(doc_id)
        if known is None:
            metadata = _snippet_metadata(snippet, pmid)
            self.passages[doc_id] = Passage(doc_id=doc_id, text=text, metadata=metadata)
        elif known.text != text:
            raise DatasetError(f"{where}: doc_id {doc_id} collides with a different snippet text")
        return doc_id


def _snippet_metadata(snippet: dict, pmid: str) -> str:
    keys = ("document", "beginSection", "offsetInBeginSection", "endSection", "offsetInEndSection")
    return to_json({"pmid": pmid, **{k: snippet[k] for k in keys if k in snippet}})


def _first_answer(ideal: Any) -> str | None:
    if isinstance(ideal, list):
        return str(ideal[0]) if ideal else None
    return None if ideal is None else str(ideal)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _bioasq_query(question: Any, corpus: _SnippetCorpus, where: str) -> Query:
    query_id = _require(question, "id", str, where)
    body = _require(question, "body", str, where).strip()
    if not body:
        raise DatasetError(f"{where}: empty 'body'")
    snippets = question.get("snippets") or []
    documents = question.get("documents") or []
    if not isinstance(snippets, list) or not isinstance(documents, list):
        raise DatasetError(f"{where}: 'snippets' and 'documents' must be lists")
    doc_ids = [corpus.add(s, f"{where}, snippet {j}") for j, s in enumerate(snippets)]
    pmids = [pmid_from_url(str(d)) for d in documents] + [pmid_from_url(s["document"]) for s in snippets]
    return Query(
        query_id=query_id,
        text=body,
        answer=_first_answer(question.get("ideal_answer")),
        exact_answer=to_json(question.get("exact_answer")),
        qtype=question.get("type") if isinstance(question.get("type"), str) else None,
        relevant_doc_ids=_unique([d for d in doc_ids if d]),
        relevant_pmids=_unique(pmids),
    )


def load_bioasq_json(path: Path) -> LoadedDataset:
    corpus = _SnippetCorpus()
    queries: dict[str, Query] = {}
    for file in bioasq_files(path):
        for i, question in enumerate(_read_questions(file)):
            where = f"{file}, question {i}"
            try:
                query = _bioasq_query(question, corpus, where)
            except ValidationError as err:
                raise DatasetError(f"{where}: {err}") from None
            if query.query_id in queries:
                raise DatasetError(f"{where}: duplicate question id {query.query_id}")
            queries[query.query_id] = query
    return _loaded(list(corpus.passages.values()), list(queries.values()), corpus.n_empty_skipped)


def _loaded(passages: list[Passage], queries: list[Query], n_empty: int) -> LoadedDataset:
    known = {p.doc_id for p in passages}
    missing = sum(1 for q in queries for d in q.relevant_doc_ids if d not in known)
    counts = {
        "n_queries": len(queries),
        "n_passages": len(passages),
        "n_empty_skipped": n_empty,
        "n_relevant_not_in_corpus": missing,
        "n_queries_without_relevant": sum(1 for q in queries if not q.relevant_doc_ids),
    }
    return LoadedDataset(passages_table(passages), queries_table(queries), counts)


# ---------------------------------------------------------------- rag-mini-bioasq (Parquet)


def _rag_mini_source(root: Path, name: str) -> Path | None:
    """`<name>.parquet` (a file or a folder of shards) or a `<name>/` folder, under root or root/data."""
    for base in (root, root / "data"):
        for alias in RAG_MINI_ALIASES[name]:
            for candidate in (base / f"{alias}.parquet", base / alias):
                if candidate.is_file() or (candidate.is_dir() and any(candidate.rglob("*.parquet"))):
                    return candidate
    return None


def _parquet_parts(root: Path, name: str) -> list[Path]:
    source = _rag_mini_source(root, name)
    if source is None:
        raise DatasetError(f"{root}: no Parquet data for {name!r} ({name}.parquet or {name}/*.parquet)")
    return [source] if source.is_file() else sorted(source.rglob("*.parquet"))


def _iter_rows(parts: list[Path], columns: list[str], optional: tuple[str, ...] = ()):
    for part in parts:
        try:
            table = pq.read_table(part)
        except (pa.ArrowInvalid, OSError) as err:
            raise DatasetError(f"{part}: unreadable Parquet: {err}") from None
        absent = [c for c in columns if c not in table.column_names]
        if absent:
            raise DatasetError(f"{part}: missing columns {absent} (has {table.column_names})")
        present = columns + [c for c in optional if c in table.column_names]
        for row_number, row in enumerate(table.select(present).to_pylist()):
            yield f"{part}, row {row_number}", row


def _id_string(value: Any, where: str) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DatasetError(f"{where}: empty id")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def _passage_ids(value: Any, where: str) -> list[str]:
    """`relevant_passage_ids` is a list in the Parquet export and a string like '[1, 2]' in some copies."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise DatasetError(f"{where}: relevant_passage_ids is not a list: {value[:80]!r}") from None
    if value is None:
        return []
    if not isinstance(value, list):
        raise DatasetError(f"{where}: relevant_passage_ids has type {type(value).__name__}")
    return _unique([_id_string(v, where) for v in value])


def _rag_mini_passages(root: Path) -> tuple[list[Passage], int]:
    passages: dict[str, Passage] = {}
    n_empty = 0
    for where, row in _iter_rows(_parquet_parts(root, RAG_MINI_CORPUS), ["passage", "id"]):
        doc_id = _id_string(row["id"], where)
        text = row["passage"]
        if text is not None and not isinstance(text, str):
            raise DatasetError(f"{where}: passage has type {type(text).__name__}")
        if doc_id in passages:
            raise DatasetError(f"{where}: duplicate passage id {doc_id}")
        if not (text or "").strip() or text.strip().lower() == "nan":
            n_empty += 1
            continue
        passages[doc_id] = Passage(doc_id=doc_id, text=text.strip(), metadata=to_json({"pmid": doc_id}))
    return list(passages.values()), n_empty


def _rag_mini_queries(root: Path) -> list[Query]:
    queries: dict[str, Query] = {}
    columns = ["question", "answer", "relevant_passage_ids", "id"]
    for where, row in _iter_rows(_parquet_parts(root, RAG_MINI_QA), columns, optional=("question_type",)):
        query_id = _id_string(row["id"], where)
        if query_id in queries:
            raise DatasetError(f"{where}: duplicate question id {query_id}")
        relevant = _passage_ids(row["relevant_passage_ids"], where)
        try:
            queries[query_id] = Query(
                query_id=query_id,
                text=(row["question"] or "").strip(),
                answer=row["answer"],
                qtype=row.get("question_type"),
                relevant_doc_ids=relevant,
                relevant_pmids=relevant,
            )
        except ValidationError as err:
            raise DatasetError(f"{where}: {err}") from None
    return list(queries.values())


def load_rag_mini_bioasq(path: Path) -> LoadedDataset:
    if not path.is_dir():
        raise DatasetError(f"{path}: the rag-mini-bioasq layout is a folder")
    passages, n_empty = _rag_mini_passages(path)
    return _loaded(passages, _rag_mini_queries(path), n_empty)


LOADERS: dict[str, Callable[[Path], LoadedDataset]] = {
    "bioasq-json": load_bioasq_json,
    "rag-mini-bioasq": load_rag_mini_bioasq,
}
