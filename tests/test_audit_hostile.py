"""tests/audit_hostile.py (the hostile-input audit, a script) kept working: a handful of its
kinds run as the audit runs them, and its classification of how a case ends."""

import pytest

from tests import audit_hostile as A


def _kind(kinds, name):
    (kind,) = [k for k in kinds if k.name == name]
    return kind


@pytest.fixture
def store(tmp_path):
    return tmp_path


@pytest.mark.parametrize(
    "name",
    [
        "data: fit / NaN cell / csv",
        "data: fit / input a FIFO / svm",
        "out / FIFO / evaluate",
        "out / the second input / evaluate",
        "evaluate / labels: zero rows / npz",
        "configs / a tag / config file",
    ],
)
def test_kinds_of_each_surface_end_clean(store, name):
    kinds = [*A.data_kinds(store), *A.out_kinds(store), *A.evaluate_kinds(), *A.config_kinds()]
    [(_, outcome, why)] = A.run_kind(_kind(kinds, name), store, 120, 6_000_000)
    assert outcome == "clean", why


def test_the_audit_counts_hundreds_of_kinds(store, monkeypatch):
    monkeypatch.setattr(A, "_model_probe", lambda store: _probe(store))
    kinds = A.all_kinds(store)
    assert len({k.name for k in kinds}) == len(kinds)
    assert len(kinds) >= 515


def _probe(store):
    """A model.json with the fields `qsrank fit` writes (for listing the kinds without
    fitting)."""
    model = store / "probe"
    model.mkdir(exist_ok=True)
    keys = ["format", "n_features", "feature_names", "classes", "sha256"]
    (model / "model.json").write_text("{" + ", ".join(f'"{k}": 1' for k in keys) + "}")
    return model


def _outcome(tmp_path, case, before=None):
    before = A._snapshot(tmp_path) if before is None else before
    result = A._run(case.code or A.CODE, case.argv, tmp_path, case.timeout or 60, None)
    return A.classify(case, result, before, tmp_path)


def test_a_traceback_a_hang_and_a_signal_are_told(tmp_path):
    assert _outcome(tmp_path, A.Case(code="raise KeyError('x')"))[0] == "traceback"
    assert _outcome(tmp_path, A.Case(code="import time; time.sleep(30)", timeout=1))[0] == "crash"
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    assert _outcome(tmp_path, A.Case(code=kill))[0] == "crash"
    two = "import sys; print('Error: a\\nError: b', file=sys.stderr); sys.exit(1)"
    assert _outcome(tmp_path, A.Case(code=two))[0] == "traceback"


def test_a_success_due_a_refusal_or_a_file_lost_is_silent(tmp_path):
    assert _outcome(tmp_path, A.Case(code="pass"))[0] == "silent"
    (tmp_path / "kept.txt").write_text("mine\n")
    one = "import sys; open('kept.txt', 'w').close(); print('Error: no', file=sys.stderr)"
    assert _outcome(tmp_path, A.Case(code=one + "; sys.exit(1)"))[0] == "silent"
    (tmp_path / "kept.txt").write_text("mine\n")
    assert _outcome(tmp_path, A.Case(code="pass", expect="warn"))[0] == "silent"
    wrong = A.Case(code="pass", expect="succeed", check=lambda result: "wrong")
    assert _outcome(tmp_path, wrong) == ("silent", "wrong")
    refusal = "import sys; print('Error: no', file=sys.stderr); sys.exit(1)"
    assert _outcome(tmp_path, A.Case(code=refusal)) == ("clean", "Error: no")
    assert _outcome(tmp_path, A.Case(code=refusal, expect="succeed"))[0] == "refused"
