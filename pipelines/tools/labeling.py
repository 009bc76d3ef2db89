"""The labeling page's core (`ccrs label RUN_DIR`): which metric is labeled on which scale, the run's
questions with each system's answer, the seeded question order, the labels store and the HTTP server
the page talks to, which answers only requests that name it, come from its own origin and carry its token
(docs/human-labels.md).

Every file is a path of `RunLayout` (labels/labels.jsonl, skips.jsonl, metrics.json, order.json). A mark or
a skip is appended, flushed and fsynced before its HTTP request is answered, so a killed server loses
nothing that the page was told is saved. The page is blind: it sees "Answer 1..k" in an order drawn per
question from the seed; only this module maps an answer back to its system.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import math
import os
import random
import re
import secrets
import socket
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse, urlsplit

import numpy as np
import pandas as pd

from pipelines.options import UsageError
from pipelines.tools.labeling_page import PAGE
from tasks.reduce import ANSWER_DIGEST, answer_digest
from tasks.runtime.layout import RunLayout

MAX_BUTTONS = 11  # an integer scale with more marks than this gets a slider beside the typed digits
ALPHA_LEVEL = "interval"
MAX_ANNOTATOR_CHARS = 100


@dataclass(frozen=True)
class LabelMetric:
    """What is labeled: `name` on `scale` (the raw marks), calibrating the judge metric `predicted_by`
    (the metric itself for a registered judge metric); `description` is the construct the page shows."""

    name: str
    scale: tuple[float, float]
    predicted_by: str
    description: str

    @property
    def integer(self) -> bool:
        return all(float(bound).is_integer() for bound in self.scale)

    @property
    def buttons(self) -> bool:
        return self.integer and self.scale[1] - self.scale[0] + 1 <= MAX_BUTTONS

    def record(self) -> dict[str, Any]:
        return {"scale": [_plain(bound) for bound in self.scale], "predicted_by": self.predicted_by,
                "description": self.description}

    def checked_mark(self, mark: Any) -> float | int:
        """The mark as stored: a number on the scale (an integer on an integer scale), else LabelError."""
        if isinstance(mark, bool) or not isinstance(mark, int | float) or not math.isfinite(mark):
            raise LabelError(f"a mark must be a number, got {mark!r}")
        low, high = self.scale
        if not low <= mark <= high or (self.integer and not float(mark).is_integer()):
            kind = "an integer" if self.integer else "a number"
            raise LabelError(f"a mark of {self.name} must be {kind} in {_scale_text(self.scale)}, got {mark}")
        return int(mark) if self.integer else float(mark)

    def page_record(self) -> dict[str, Any]:
        return {"name": self.name, **self.record(), "integer": self.integer, "buttons": self.buttons}


@dataclass(frozen=True)
class Answer:
    system: str
    text: str
    contexts: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    query_id: str
    text: str
    reference: str
    answers: tuple[Answer, ...]  # the systems that answered (failed generations have nothing to label)


class LabelError(ValueError):
    """A request the store refuses (HTTP 400, or 409 where the page is behind): one line for the page."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.status = status


# --- the metric ---------------------------------------------------------------------------------------

def scored_metrics(layout: RunLayout) -> list[str]:
    """The metrics of the run's scores files, suite by suite (RunLayout.judged_suites)."""
    found: dict[str, None] = {}
    for suite in layout.judged_suites():
        metrics = pd.read_parquet(layout.scores(suite), columns=["metric"])["metric"].astype(str)
        found.update(dict.fromkeys(metrics.unique()))
    return list(found)


def read_metrics_file(layout: RunLayout) -> dict[str, dict]:
    return json.loads(layout.labels_metrics.read_text()) if layout.labels_metrics.exists() else {}


def resolve_metric(layout: RunLayout, name: str | None, scale: Sequence[float] | None,
                   predicted_by: str | None, describe: str | None) -> LabelMetric:
    """The metric to label: a registered judge metric (scale and construct from its declaration; default
    the first judged metric the run scored) or a human metric of its own (--scale, --predicted-by, a
    metric of the run's scores; both may come from labels/metrics.json when it was labeled before)."""
    from judges.suite import all_metrics

    registered = {metric.name: metric for metric in all_metrics()}
    scored = scored_metrics(layout)
    if name is None:
        judged = [metric.name for metric in registered.values() if metric.judged and metric.name in scored]
        if not judged:
            raise UsageError(f"{layout.root} has no judged metric's scores; name one with --metric (a human "
                             "metric of its own also needs --scale LOW HIGH and --predicted-by JUDGE_METRIC)")
        name = judged[0]
    stored = read_metrics_file(layout).get(name)
    if name in registered:
        metric = _judge_metric(registered[name], scale, predicted_by, scored)
    else:
        metric = _human_metric(name, scale, predicted_by, describe, stored, scored)
    if stored is not None:
        _check_same(metric, stored)
    return metric


def _judge_metric(declared, scale, predicted_by, scored: list[str]) -> LabelMetric:
    if predicted_by not in (None, declared.name):
        raise UsageError(f"{declared.name} is a judge metric: its labels calibrate its own scores; "
                         "--predicted-by is for a human metric of its own")
    if scale is not None and tuple(map(float, scale)) != tuple(map(float, declared.scale)):
        raise UsageError(f"{declared.name} is marked on its declared scale {_scale_text(declared.scale)}, "
                         f"not {_scale_text(scale)}; a human metric of its own takes a name of its own")
    if not all(math.isfinite(bound) for bound in declared.scale):
        raise UsageError(f"{declared.name} has no finite scale {_scale_text(declared.scale)} to mark on")
    if declared.name not in scored:
        raise UsageError(f"{declared.name} is not in the run's scores; scored: {', '.join(scored) or 'none'}")
    return LabelMetric(declared.name, tuple(declared.scale), declared.name, declared.description)


def _human_metric(name: str, scale, predicted_by, describe, stored: dict | None,
                  scored: list[str]) -> LabelMetric:
    scale = scale if scale is not None else (stored or {}).get("scale")
    predicted_by = predicted_by or (stored or {}).get("predicted_by")
    if scale is None or predicted_by is None:
        raise UsageError(f"{name} is no registered judge metric: a human metric of its own needs --scale "
                         "LOW HIGH and --predicted-by JUDGE_METRIC (`ccrs metrics` lists the judge metrics)")
    low, high = (float(bound) for bound in scale)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise UsageError(f"--scale needs finite LOW < HIGH, got {_scale_text(scale)}")
    if predicted_by not in scored:
        raise UsageError(f"--predicted-by {predicted_by} is not in the run's scores; scored: "
                         f"{', '.join(scored) or 'none'}")
    description = describe or (stored or {}).get("description") or f"{name} (no construct given: --describe)"
    return LabelMetric(name, (low, high), predicted_by, description)


def _check_same(metric: LabelMetric, stored: dict) -> None:
    if [float(bound) for bound in stored.get("scale", ())] != [float(b) for b in metric.scale]:
        raise UsageError(f"{metric.name} was labeled on the scale {_scale_text(stored.get('scale'))} "
                         f"(labels/metrics.json), not {_scale_text(metric.scale)}")
    if stored.get("predicted_by") != metric.predicted_by:
        raise UsageError(f"{metric.name} was labeled as predicted by {stored.get('predicted_by')} "
                         f"(labels/metrics.json), not {metric.predicted_by}")


def record_metric(layout: RunLayout, metric: LabelMetric) -> None:
    """labels/metrics.json with this metric merged in (resolve_metric checked it against what is there)."""
    known = read_metrics_file(layout)
    known[metric.name] = {**known.get(metric.name, {}), **metric.record()}
    _write_json(layout.labels_metrics, known)


# --- the questions and their order --------------------------------------------------------------------

def load_questions(layout: RunLayout) -> list[Question]:
    """The run's questions in queries order, each with its systems' answers and the contexts each reader
    saw (the judge stage's samples: tasks.runtime.judge_session.load_samples)."""
    from tasks.runtime.judge_session import load_samples

    for path in (layout.queries, layout.generations):
        if not path.exists():
            raise UsageError(f"{layout.root} is not a run folder with answers: {path} is missing")
    queries = pd.read_parquet(layout.queries)
    generations = pd.read_parquet(layout.generations)
    retrieved = (pd.read_parquet(layout.retrieved) if layout.retrieved.exists()
                 else pd.DataFrame(columns=["query_id", "retriever", "rank", "text"]))
    top_k = int(retrieved["rank"].max()) if len(retrieved) else 0  # the reader's own n_chunks_used cuts it
    samples, _ = load_samples(queries, retrieved, generations, top_k)
    answers: dict[str, list[Answer]] = {}
    for sample in samples:
        answers.setdefault(sample.query_id, []).append(Answer(sample.system, sample.response,
                                                              tuple(sample.context)))
    return [Question(str(row.query_id), str(row.text), str(getattr(row, "answer", "") or ""),
                     tuple(sorted(answers.get(str(row.query_id), []), key=lambda a: a.system)))
            for row in queries.itertuples(index=False)]


def question_order(layout: RunLayout, query_ids: Sequence[str], seed: int) -> list[str]:
    """The seeded random order of the run's questions: labels/order.json when there (drawn with the same
    seed, of the same questions), else drawn from `seed` and written."""
    if layout.labels_order.exists():
        stored = json.loads(layout.labels_order.read_text())
        if seed != stored["seed"]:
            raise UsageError(f"{layout.labels_order} holds the order of seed {stored['seed']}, not {seed}: "
                             f"give --seed {stored['seed']} (a new order would make the labeled set no "
                             "uniform sample)")
        if sorted(stored["question_ids"]) != sorted(query_ids):
            raise UsageError(f"{layout.labels_order} lists other questions than the run's "
                             f"({len(stored['question_ids'])} against {len(query_ids)})")
        return list(stored["question_ids"])
    order = [str(query_ids[i]) for i in np.random.default_rng(seed).permutation(len(query_ids))]
    _write_json(layout.labels_order, {"seed": seed, "question_ids": order})
    return order


def blinded(question: Question, seed: int) -> list[Answer]:
    """The question's answers in the page's order ("Answer 1..k"): shuffled by (seed, question id)."""
    answers = list(question.answers)
    random.Random(f"{seed}:{question.query_id}").shuffle(answers)
    return answers


# --- the files ----------------------------------------------------------------------------------------

def read_jsonl(path: Path, repair: bool = False) -> tuple[list[dict], int]:
    """(records, unfinished tail lines) of a JSON-lines file; a last line without its newline is a write
    the server was killed in, never answered: dropped from the file when `repair`, else left out."""
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]  # a killed write may even end inside a UTF-8 character
    if len(complete) < len(data) and repair:
        with path.open("r+b") as handle:
            handle.truncate(len(complete))
    records = []
    for number, line in enumerate(complete.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path} line {number} is no JSON record: {exc}") from None
    return records, int(len(complete) < len(data))


def append_jsonl(path: Path, records: Iterable[dict]) -> None:
    """Appended, flushed and fsynced: on disk before the caller answers anyone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))
        handle.flush()
        os.fsync(handle.fileno())


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- agreement ----------------------------------------------------------------------------------------

def annotator_agreement(records: Iterable[dict], metric: str) -> dict[str, Any]:
    """Krippendorff's alpha (interval, on the raw marks) of the metric's annotators over the answers
    labeled by two or more of them (an annotator's last mark of an answer counts)."""
    from stats.agreement import krippendorff_alpha

    last: dict[tuple[str, str], dict[str, float]] = {}
    for record in records:
        if record.get("metric") == metric:
            unit = (str(record["question_id"]), str(record["system"]))
            last.setdefault(unit, {})[str(record.get("annotator") or "")] = float(record["label"])
    annotators = sorted({name for marks in last.values() for name in marks})
    matrix = np.array([[marks.get(name, np.nan) for name in annotators] for marks in last.values()],
                      dtype=float).reshape(len(last), len(annotators))
    alpha = krippendorff_alpha(matrix, ALPHA_LEVEL)
    return {"metric": metric, "annotators": annotators, "answers_by_2plus": alpha.n_units, **alpha.as_dict()}


def agreement_rows(layout: RunLayout) -> list[dict[str, Any]]:
    """`ccrs label --agreement`: one row per labeled metric."""
    records, _ = read_jsonl(layout.labels_file)
    metrics = dict.fromkeys(str(record.get("metric")) for record in records)
    return [annotator_agreement(records, metric) for metric in metrics]


# --- the store ----------------------------------------------------------------------------------------

class LabelStore:
    """One metric's labels and skips of a run, in memory beside their files; thread-safe."""

    def __init__(self, layout: RunLayout, metric: LabelMetric, questions: Sequence[Question],
                 order: Sequence[str], seed: int):
        self.layout, self.metric, self.seed = layout, metric, seed
        self.questions = {question.query_id: question for question in questions}
        self.order = list(order)
        self._lock = threading.Lock()
        labels, dropped = read_jsonl(layout.labels_file, repair=True)
        skips, dropped_skips = read_jsonl(layout.labels_skips, repair=True)
        self.repaired = dropped + dropped_skips  # unfinished lines a killed server left (never answered)
        self._records = [record for record in labels if record.get("metric") == metric.name]
        self._marks: dict[tuple[str, str], dict[str, Any]] = {}  # (annotator, question) -> {system: mark}
        for record in self._records:
            self._marks.setdefault((str(record.get("annotator") or ""), str(record["question_id"])), {})[
                str(record["system"])] = record["label"]
        self._skips = {(str(record.get("annotator") or ""), str(record["question_id"])) for record in skips
                       if record.get("metric") == metric.name}

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
                                "time": _now(), ANSWER_DIGEST: answer_digest(answer.text)})
            append_jsonl(self.layout.labels_file, records)
            self._marks[(annotator, query_id)] = {**marked, **{r["system"]: r["label"] for r in records}}
            self._records.extend(records)
        return self.state(annotator)

    def skip(self, annotator: str, query_id: str) -> dict[str, Any]:
        annotator = _annotator(annotator)
        with self._lock:
            self._expected(annotator, query_id)
            append_jsonl(self.layout.labels_skips, [{"question_id": query_id, "metric": self.metric.name,
                                                      "annotator": annotator, "time": _now()}])
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


def _plain(number: float) -> float | int:
    return int(number) if float(number).is_integer() else float(number)


def _scale_text(scale: Sequence[float] | None) -> str:
    return "none" if scale is None else "-".join(f"{float(bound):g}" for bound in scale)


# --- the HTTP server ----------------------------------------------------------------------------------

MAX_BODY_BYTES = 64 * 1024  # a question's marks are a few hundred bytes
TOKEN_HEADER = "X-CCRS-Token"  # or `Authorization: Bearer TOKEN`; the page itself also takes ?token=
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,256}")  # URL-safe: it goes into the printed URL as it is
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HOST_CHARACTERS = re.compile(r"[a-z0-9.:\[\]_-]+")


def checked_token(token: str | None) -> str:
    """The server's secret: `token` (--token) when given, checked, else a fresh random one."""
    if token is None:
        return secrets.token_urlsafe(32)
    if not TOKEN_PATTERN.fullmatch(token):
        raise UsageError("--token needs 16 to 256 characters among A-Z a-z 0-9 _ - (it goes into the URL)")
    return token


@dataclass(frozen=True)
class Access:
    """Who the page's server answers: a request whose Host names this server (a DNS-rebinding page's
    Host names its own domain), that comes from no other origin, and that carries the server's token."""

    token: str = field(repr=False)  # kept out of its repr (a log line)
    port: int
    names: frozenset[str]  # the host names a Host header may give
    any_address: bool = False  # bound to every interface: any IP address names it too

    @classmethod
    def of(cls, given_host: str, bound: str, port: int, token: str) -> Access:
        address = ipaddress.ip_address(bound)
        names = {given_host.strip("[]").lower(), str(address)}
        if address.is_loopback or address.is_unspecified:
            names |= LOOPBACK_NAMES
        if address.is_unspecified:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        return cls(token, port, frozenset(names - {""}), address.is_unspecified)

    def names_this_server(self, host_header: str | None) -> bool:
        name, port = _name_and_port(host_header or "")
        return port == self.port and (name in self.names or (self.any_address and _is_address(name)))

    def same_origin(self, origin: str, host_header: str) -> bool:
        scheme, _, rest = origin.partition("://")
        return scheme.lower() == "http" and _name_and_port(rest) == _name_and_port(host_header)

    def holds_token(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _name_and_port(value: str) -> tuple[str, int | None]:
    """("host", port) of a Host header or an origin's host[:port] (port 80 when none); ("", None) if bad."""
    value = value.strip().lower()
    if not HOST_CHARACTERS.fullmatch(value):
        return "", None
    try:
        parts = urlsplit(f"//{value}")
        return parts.hostname or "", parts.port or 80
    except ValueError:
        return "", None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _lan_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing), None when offline."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never reached, only routed
            return probe.getsockname()[0]
        except OSError:
            return None


class LabelServer(ThreadingHTTPServer):
    """The page's server: `url` (with the token) is what the start line prints, `access` what every
    request is checked against; `beyond_loopback` when other machines can reach it."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], token: str):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        bound, port = self.server_address[:2]
        self.token = token
        self.access = Access.of(address[0], bound, port, token)
        ip = ipaddress.ip_address(bound)
        self.beyond_loopback = not ip.is_loopback
        shown = (_lan_address() or socket.gethostname()) if ip.is_unspecified else str(ip)
        self.url = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/?token={token}"


def make_server(store: LabelStore, host: str = "127.0.0.1", port: int = 0, default_annotator: str = "",
                token: str | None = None) -> LabelServer:
    """The page's server (port 0: a free one; `server.url` says where, with the token: a fresh random one
    unless `token` is given). The caller runs `serve_forever()` and closes it."""
    token = checked_token(token)

    class Handler(_Handler):
        pass

    Handler.store, Handler.default_annotator = store, default_annotator
    return LabelServer((host, port), Handler, token)


class _Handler(BaseHTTPRequestHandler):
    store: LabelStore
    default_annotator: str
    server: LabelServer
    timeout = 30  # seconds a client may take to send its request: a stalled one holds no thread for long

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        page = url.path in ("/", "/index.html")
        if not self._admitted(parse_qs(url.query).get("token", [None])[0] if page else None):
            return
        if page:
            self._send(HTTPStatus.OK, PAGE.encode("utf-8"), "text/html; charset=utf-8")
        elif url.path == "/api/state":
            annotator = parse_qs(url.query).get("annotator", [""])[0]
            self._json(HTTPStatus.OK, self._with_default(self.store.state(annotator)))
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {url.path}"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if not self._admitted():
            return
        path = urlparse(self.path).path
        if path not in ("/api/label", "/api/skip"):
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}"})
            return
        try:
            body = self._json_body()
            if not isinstance(body, dict):
                raise LabelError("the request must be a JSON object")
            query_id = str(body.get("question_id", ""))
            if path == "/api/label":
                marks = body.get("marks")
                if not isinstance(marks, dict):
                    raise LabelError("marks must be an object {answer number: mark}")
                state = self.store.label(body.get("annotator"), query_id, marks)
            else:
                state = self.store.skip(body.get("annotator"), query_id)
        except LabelError as exc:
            self._json(exc.status, {"error": str(exc)})
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"the request is no JSON: {exc}"})
        else:
            self._json(HTTPStatus.OK, self._with_default(state))

    def _admitted(self, page_token: str | None = None) -> bool:
        """The request names this server, comes from its own origin (or none) and carries the token (a
        header; the page's URL may give it as ?token=); else refused, with nothing read or written."""
        refusal = self._refusal(page_token)
        if refusal:
            self.close_connection = True
            self._json(HTTPStatus.FORBIDDEN, {"error": refusal})
        return refusal is None

    def _refusal(self, page_token: str | None) -> str | None:
        access, host = self.server.access, self.headers.get("Host")
        if not access.names_this_server(host):
            return "refused: the Host header does not name this server (open the URL `ccrs label` printed)"
        origin = self.headers.get("Origin")
        if origin is not None and not access.same_origin(origin, host):
            return "refused: a request from another origin than the page's"
        given = self.headers.get(TOKEN_HEADER) or _bearer(self.headers.get("Authorization")) or page_token
        if given is None:
            return "refused: no token; open the URL `ccrs label` printed (its ?token=... included)"
        if not access.holds_token(given):
            return "refused: wrong token; open the URL the running `ccrs label` printed"
        return None

    def _json_body(self) -> Any:
        """The request's JSON body, read up to its declared length, which must be MAX_BODY_BYTES or less."""
        if self.headers.get_content_type() != "application/json":
            raise LabelError("the request's Content-Type must be application/json",
                             HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
        declared = self.headers.get("Content-Length")
        if declared is None or self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise LabelError("the request needs a Content-Length", HTTPStatus.LENGTH_REQUIRED)
        if not declared.strip().isdigit():
            self.close_connection = True
            raise LabelError(f"bad Content-Length {declared!r}")
        if int(declared) > MAX_BODY_BYTES:
            self.close_connection = True
            raise LabelError(f"the request is over {MAX_BODY_BYTES} bytes",
                             HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        return json.loads(self.rfile.read(int(declared)) or b"{}")

    def _with_default(self, state: dict) -> dict:
        return {**state, "default_annotator": self.default_annotator}

    def _json(self, status: HTTPStatus, data: dict) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        for name, value in (("Content-Type", content_type), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"),
                            ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY")):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Quiet: the console shows the URL and the verdict, not a line per request (nor its token)."""


def _bearer(authorization: str | None) -> str | None:
    scheme, _, value = (authorization or "").partition(" ")
    return (value.strip() or None) if scheme.lower() == "bearer" else None
