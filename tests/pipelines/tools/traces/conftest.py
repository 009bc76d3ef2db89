"""The traced app's store, logged once for the package (logging it is most of these tests' time); a test
that writes to a store gets its own copy of the file."""
from __future__ import annotations

import os
import shutil
from dataclasses import replace

import pytest

from tests.conftest import copy_empty_mlflow_db, process_state_restored
from tests.pipelines.tools.traces.app import AppStore, log_app


@pytest.fixture(scope="package")
def app_store(tmp_path_factory, empty_mlflow_db) -> AppStore:
    import mlflow

    root = tmp_path_factory.mktemp("traced-app")
    copy_empty_mlflow_db(empty_mlflow_db, root / "mlflow.db")  # the app's new store, without its migrations
    with process_state_restored():
        os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # each trace in the store on return
        try:
            store = log_app(root)
        finally:
            mlflow.tracing.reset()  # the tracer set up for this store is not left to later tests
            mlflow.tracing.fluent._set_last_active_trace_id(None)  # nor the app's last trace id
    return store


@pytest.fixture
def writable_store(app_store, tmp_path) -> AppStore:
    """A copy of the app's store that the test may write to."""
    shutil.copy(app_store.root / "mlflow.db", tmp_path / "mlflow.db")
    return replace(app_store, uri=f"sqlite:///{tmp_path / 'mlflow.db'}", root=tmp_path)
