import json

import pytest

from tasks.runtime.stage import code_modules, code_version, file_fingerprint, run_stage, stage_key


def _writer(calls):
    def write(out_dir):
        calls.append(out_dir)
        (out_dir / "part.txt").write_text("done")
        return {"rows": 3}
    return write


def test_same_key_reuses_finished_output(tmp_path):
    calls = []
    first = run_stage(tmp_path, "chunk", "k1", _writer(calls))
    second = run_stage(tmp_path, "chunk", "k1", _writer(calls))
    assert len(calls) == 1
    assert not first.reused and second.reused
    assert second.summary == {"rows": 3}
    assert (tmp_path / "chunk" / "part.txt").read_text() == "done"


def test_changed_key_or_force_recomputes(tmp_path):
    calls = []
    run_stage(tmp_path, "chunk", "k1", _writer(calls))
    run_stage(tmp_path, "chunk", "k2", _writer(calls))
    run_stage(tmp_path, "chunk", "k2", _writer(calls), force=True)
    assert len(calls) == 3
    assert json.loads((tmp_path / "chunk" / "_STAGE.json").read_text())["key"] == "k2"


def test_failed_stage_keeps_previous_output(tmp_path):
    run_stage(tmp_path, "judge", "k1", _writer([]))

    def crash(out_dir):
        (out_dir / "part.txt").write_text("half")
        raise RuntimeError("server died")

    with pytest.raises(RuntimeError):
        run_stage(tmp_path, "judge", "k2", crash)
    assert (tmp_path / "judge" / "part.txt").read_text() == "done"
    assert run_stage(tmp_path, "judge", "k1", _writer([])).reused


def test_stage_key_depends_on_config_upstream_and_code():
    base = stage_key("embed", {"model": "a"}, ["u1"], "c1")
    assert base == stage_key("embed", {"model": "a"}, ["u1"], "c1")
    assert base != stage_key("embed", {"model": "b"}, ["u1"], "c1")
    assert base != stage_key("embed", {"model": "a"}, ["u2"], "c1")
    assert base != stage_key("embed", {"model": "a"}, ["u1"], "c2")


def test_file_fingerprint_tracks_content(tmp_path):
    data = tmp_path / "d.json"
    data.write_text('{"questions": []}')
    before = file_fingerprint(data)
    data.write_text('{"questions": [1]}')
    assert file_fingerprint(data) != before


def test_code_version_follows_the_source_of_the_stage_and_what_it_imports(tmp_path, monkeypatch):
    package = tmp_path / "tasks_probe"
    (package / "sub").mkdir(parents=True)
    for path in (package / "__init__.py", package / "sub" / "__init__.py"):
        path.write_text("")
    (package / "stage_a.py").write_text("from .sub import helper\nVALUE = 1\n")
    (package / "sub" / "helper.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("tasks.runtime.stage.PROJECT_PACKAGES", ("tasks_probe",))
    before = code_version("tasks_probe.stage_a")
    assert before == code_version("tasks_probe.stage_a")
    (package / "sub" / "helper.py").write_text("def f():\n    return 2\n")  # an edit two imports away
    assert code_version("tasks_probe.stage_a") != before
    assert set(code_modules("tasks_probe.stage_a")) == {"tasks_probe.stage_a", "tasks_probe.sub",
                                                         "tasks_probe.sub.helper"}
    (package / "stage_a.py").write_text("VALUE = 1\n")  # its imports edited: walked again, not remembered
    assert set(code_modules("tasks_probe.stage_a")) == {"tasks_probe.stage_a"}


def test_code_version_of_the_real_stages_is_stable_and_distinct():
    assert code_version("tasks.generate") == code_version("tasks.generate")
    assert code_version("tasks.generate") != code_version("tasks.reduce")


def test_checkpoint_keeps_every_save_and_fsyncs_at_most_once_per_interval(tmp_path, monkeypatch):
    import os

    from tasks.runtime.stage import StageCheckpoint

    synced = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    lazy = StageCheckpoint(tmp_path, "judge_ccrs", "k1", fsync_interval_s=3600)
    lazy.save({"A/1/CC": [{"score": 0.5}]})
    lazy.save({"A/1/QR": [{"score": 0.25}]})
    lazy.save({})
    assert len(synced) == 1  # the first save; the next within the interval only reach the OS
    assert lazy.load() == {"A/1/CC": [{"score": 0.5}], "A/1/QR": [{"score": 0.25}]}
    eager = StageCheckpoint(tmp_path, "judge_ccrs", "k2", fsync_interval_s=0)
    eager.save({"A/1/CC": [1]})
    eager.save({"A/1/QR": [2]})
    assert len(synced) == 3
    with open(eager.path, "a", encoding="utf-8") as fh:
        fh.write('{"id": "A/1/ID", "val')  # the line a kill cut short
    assert eager.load() == {"A/1/CC": [1], "A/1/QR": [2]}
