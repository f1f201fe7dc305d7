"""The cold-start benchmark (pipelines/cold_start.py, `qsrank bench cold-start`): its cases
and one fresh-process probe."""

import os

from click.testing import CliRunner

from qs.inference import METHODS
from qsrank.main import main
from qsrank.pipelines import cold_start


def test_cases_cover_every_method_and_loss_but_brute():
    cases = cold_start.cases()
    assert {m for m, _ in cases} == set(METHODS) - {"brute"}
    assert ("yue", "ap") in cases and ("chakrabarti", "ndcg") in cases
    assert ("zero_one", "01") in cases and ("yue", "ndcg") not in cases


def test_a_probe_times_import_and_two_calls_in_a_fresh_process():
    timings = cold_start.probe("zero_one", "01", dict(os.environ))
    assert set(timings) == {"import", "first", "second"}
    assert all(t > 0 for t in timings.values())


def test_cli_prints_one_row_per_case(monkeypatch):
    monkeypatch.setattr(cold_start, "cases", lambda: [("zero_one", "01")])
    result = CliRunner().invoke(main, ["bench", "cold-start", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.count("| zero_one") == 1 and "first call s (max)" in result.output
