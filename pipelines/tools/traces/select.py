"""Which traces a run judges: an MLflow experiment's traces (`--traces EXPERIMENT`, by name or id) that match
MLflow's filter string (`--filter`), started since a time (`--since 24h`, `7d` or an ISO time), the newest
`--max-traces`, then a uniform random sample of them (`--sample N --seed S`). What was selected and sampled
is recorded (SelectedTraces.record) for the run.

The traces' summaries are searched first without their spans (MLflow's search leaves out a trace whose spans
it cannot load, which would drop it silently); the spans of the chosen ones are fetched after, and a trace
the store returns without them stays in the list, spanless, to be counted by mapping.trace_rows.
"""
from __future__ import annotations

import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipelines.tools.traces.mapping import TraceInputError, TraceMapping, system_source

if TYPE_CHECKING:
    from mlflow.entities import Trace, TraceInfo

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
DURATION_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
SEARCH_PAGE = 500  # trace summaries per search request
FETCH_BATCH = 100  # traces whose spans are fetched per request
HEALTH_TIMEOUT_S = 5.0  # an http(s) tracking server that does not answer /health in this time is unreachable


class TraceSelection(BaseModel):
    """The options of `--traces` (docs/traces.md), as the command passes them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment: str = Field(min_length=1)  # name or id
    tracking_uri: str | None = None  # None: MLflow's own default (MLFLOW_TRACKING_URI, else ./mlruns)
    filter_string: str | None = None
    since: str | None = None  # a duration back from now ("24h", "7d") or an ISO time
    max_traces: int | None = Field(default=None, ge=1)  # the newest N of the matching traces
    sample: int | None = Field(default=None, ge=1)  # a uniform random sample of N of those
    seed: int = 0
    # tag:NAME | metadata:NAME | attribute:NAME; None: one system named after the experiment
    system_from: str | None = None
    mapping: TraceMapping = Field(default_factory=TraceMapping)

    @field_validator("since")
    @classmethod
    def _known_time(cls, value: str | None) -> str | None:
        if value is not None:
            since_ms(value, datetime.now(UTC))
        return value

    @field_validator("system_from")
    @classmethod
    def _known_source(cls, value: str | None) -> str | None:
        system_source(value)
        return value


@dataclass(frozen=True)
class SelectedTraces:
    """The chosen traces (oldest first), the experiment they are in, and the record of the choice."""

    traces: list[Trace]
    experiment_id: str
    experiment_name: str
    record: dict[str, Any]


def since_ms(since: str, now: datetime) -> int:
    """`since` as epoch milliseconds: a duration back from `now` or an ISO time (UTC where it names none)."""
    duration = DURATION.match(since)
    if duration:
        start = now - timedelta(**{DURATION_UNITS[duration.group(2)]: float(duration.group(1))})
    else:
        try:
            start = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"--since must be a duration (30m, 24h, 7d, 2w) or an ISO time "
                             f"(2026-11-28T06:00:00Z), got {since!r}") from None
        start = start if start.tzinfo else start.replace(tzinfo=UTC)
    return int(start.timestamp() * 1000)


def select_traces(selection: TraceSelection, now: datetime | None = None) -> SelectedTraces:
    """The selected traces with their spans; TraceInputError (one line) for an unreachable store, an unknown
    experiment, a filter MLflow refuses, or a selection that matches no trace."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    now = now or datetime.now(UTC)
    _check_reachable(selection.tracking_uri)
    client = MlflowClient(selection.tracking_uri)
    experiment = _experiment(client, selection)
    query = effective_filter(selection, now)
    try:
        infos = _matching(client, experiment.experiment_id, query, selection.max_traces)
    except MlflowException as exc:
        raise TraceInputError(f"--filter {query!r}: {_first_line(exc)}") from exc
    if not infos:
        raise TraceInputError(f"no trace of experiment {experiment.name!r} matches"
                              f"{f' {query!r}' if query else ''}")
    chosen = sample_of(infos, selection.sample, selection.seed)
    try:
        traces = _with_spans(client, chosen)
    except MlflowException as exc:
        raise TraceInputError(f"tracking store {client.tracking_uri}: {_first_line(exc)}") from exc
    return SelectedTraces(traces, experiment.experiment_id, experiment.name,
                          _record(selection, client, experiment, query, len(infos), chosen))


def _record(selection: TraceSelection, client, experiment, query: str | None, matched: int,
            chosen: list[TraceInfo]) -> dict[str, Any]:
    """The selection and the sample as recorded with the run; `matched`: found, at most --max-traces."""
    return {"experiment": experiment.name, "experiment_id": experiment.experiment_id,
            "tracking_uri": _without_credentials(client.tracking_uri), "filter": selection.filter_string,
            "since": selection.since, "effective_filter": query, "max_traces": selection.max_traces,
            "matched": matched, "sample": selection.sample,
            "seed": selection.seed if selection.sample else None, "selected": len(chosen),
            "system_from": selection.system_from, "mapping": selection.mapping.model_dump(),
            "trace_ids": [info.trace_id for info in chosen]}


def effective_filter(selection: TraceSelection, now: datetime) -> str | None:
    """The user's filter and the `--since` bound, joined by AND (MLflow's filter grammar has no OR)."""
    given = (selection.filter_string or "").strip()
    parts = [given] if given else []
    if selection.since:
        parts.append(f"timestamp_ms >= {since_ms(selection.since, now)}")
    return " AND ".join(parts) or None


def sample_of(infos: list[TraceInfo], size: int | None, seed: int) -> list[TraceInfo]:
    """A uniform random sample without replacement of `size` of the traces (all when fewer), the same for
    the same traces and seed whatever order the store returned them in; oldest first."""
    ordered = sorted(infos, key=lambda info: (info.request_time, info.trace_id))
    if size is None or size >= len(ordered):
        return ordered
    picked = np.random.default_rng(seed).choice(len(ordered), size=size, replace=False)
    return [ordered[i] for i in sorted(picked)]


def _check_reachable(tracking_uri: str | None) -> None:
    """A tracking server that is down fails here in seconds (MLflow's client retries for minutes)."""
    if not tracking_uri or not tracking_uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(f"{tracking_uri.rstrip('/')}/health", timeout=HEALTH_TIMEOUT_S):
            return
    except urllib.error.HTTPError:
        return  # it answered: a server without /health, or behind a proxy that wants credentials
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ssl.SSLError):
            return  # it answered; MLflow's own TLS settings (MLFLOW_TRACKING_INSECURE_TLS, ...) decide
        raise TraceInputError(f"cannot reach the tracking server at {tracking_uri}: {reason}") from exc


def _experiment(client, selection: TraceSelection):
    from mlflow.exceptions import MlflowException

    name = selection.experiment.strip()
    try:
        experiment = client.get_experiment_by_name(name)
        if experiment is None and name.isdigit():
            experiment = client.get_experiment(name)
    except MlflowException as exc:
        if "RESOURCE_DOES_NOT_EXIST" in str(getattr(exc, "error_code", "")):
            experiment = None
        else:
            raise TraceInputError(f"tracking store {client.tracking_uri}: {_first_line(exc)}") from exc
    if experiment is None:
        raise TraceInputError(f"no experiment named {name!r} (or with that id) in {client.tracking_uri}")
    return experiment


def _matching(client, experiment_id: str, query: str | None, limit: int | None) -> list[TraceInfo]:
    """The summaries (no spans) of the matching traces, newest first, at most `limit`."""
    infos, token = [], None
    while limit is None or len(infos) < limit:
        page = client.search_traces(locations=[experiment_id], filter_string=query,
                                    max_results=SEARCH_PAGE if limit is None else min(SEARCH_PAGE,
                                                                                      limit - len(infos)),
                                    order_by=["timestamp_ms DESC"], page_token=token, include_spans=False)
        infos += [trace.info for trace in page]
        token = page.token
        if not token or not page:
            break
    return infos


def _with_spans(client, infos: list[TraceInfo]) -> list[Trace]:
    """The traces with their spans, in the order of `infos`; a trace still in progress is not asked for,
    and one the store gives back without spans keeps its summary and no spans."""
    from mlflow.entities import Trace, TraceData
    from mlflow.tracing.client import TracingClient

    tracing = TracingClient(client.tracking_uri)
    wanted = [info.trace_id for info in infos if str(info.state) != "IN_PROGRESS"]
    fetched = {trace.info.trace_id: trace for start in range(0, len(wanted), FETCH_BATCH)
               for trace in tracing.batch_get_traces(wanted[start:start + FETCH_BATCH])}
    return [fetched.get(info.trace_id) or Trace(info, TraceData(spans=[])) for info in infos]


def _without_credentials(uri: str) -> str:
    """The URI as recorded with the run: no user or password (http://user:secret@host)."""
    parts = urllib.parse.urlsplit(uri)
    if not parts.password and not parts.username:
        return uri
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port
                                                                           else "")))


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "message", None) or exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
