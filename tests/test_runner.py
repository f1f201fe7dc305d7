"""The experiment runner (pipelines/_runner.py) on a toy experiment: units run once and
resume, outputs and provenance are written, a bad config writes nothing."""

import json
from typing import Literal

import pytest
import yaml
from pydantic import conint

from qsrank.pipelines import _runner
from qsrank.pipelines import _schema as S

CALLS = []


class Toy(S.Section):
    experiment: Literal["toy"] = S.key("toy", "the pipeline")
    seed: conint(ge=0) = S.key(0, "seed")
    items: S.distinct(Literal[tuple("abcd")]) = S.key(["a", "b"], "units")
    scale: S.real() = S.key(1.0, "scales every value")
    force: bool = S.key(False, "rerun finished units")


def _unit(run, unit):
    CALLS.append(unit)
    return {"item": unit[0], "value": run.data[unit[0]] * run.cfg["scale"]}


def _write(run, records):
    (run.out / "table.md").write_text(
        "\n".join(f"{r['item']} {r['value']}" for r in records) + "\n"
    )


TOY = _runner.Experiment(
    name="toy",
    schema=Toy,
    load_data=lambda cfg: {"a": 1, "b": 2, "c": 3, "d": 4},
    settings=lambda cfg, data: {"data": "toy data", "data_sha256": "0" * 64, "scale": cfg["scale"]},
    units=lambda cfg, data: [(item,) for item in cfg["items"]],
    run_unit=_unit,
    write=_write,
    warm_up=lambda cfg, units: CALLS.append(("warm", len(units))),
)


@pytest.fixture(autouse=True)
def _clear():
    CALLS.clear()


def test_units_run_once_then_resume(tmp_path, capsys):
    out = _runner.run(TOY, {}, tmp_path / "run", overrides=["scale=1"])
    assert CALLS == [("warm", 2), ("a",), ("b",)]
    assert (out / "table.md").read_text() == "a 1.0\nb 2.0\n"
    assert yaml.safe_load((out / "config.yaml").read_text())["items"] == ["a", "b"]
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["overrides"] == ["scale=1"] and provenance["data"] == "toy data"
    CALLS.clear()
    _runner.run(TOY, {"items": ["a", "b", "c"]}, out)
    assert CALLS == [("warm", 1), ("c",)]
    assert "toy: resuming: 2 of 3 units done" in capsys.readouterr().err
    CALLS.clear()
    _runner.run(TOY, {"items": ["c", "a"]}, out)
    err = capsys.readouterr().err
    assert CALLS == [] and "toy: up to date: all 2 units done" in err
    assert "0unit" not in err and "?unit/s" not in err  # no empty progress bar
    assert (out / "table.md").read_text() == "c 3.0\na 1.0\n"  # the units' order


def test_changed_settings_or_force_rerun(tmp_path):
    out = _runner.run(TOY, {}, tmp_path / "run", progress=False)
    CALLS.clear()
    _runner.run(TOY, {"scale": 2.0}, out, progress=False)
    assert CALLS == [("warm", 2), ("a",), ("b",)]
    assert (out / "table.md").read_text() == "a 2.0\nb 4.0\n"
    CALLS.clear()
    _runner.run(TOY, {"scale": 2.0, "force": True}, out, progress=False)
    assert CALLS == [("warm", 2), ("a",), ("b",)]


def test_a_bad_config_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match="^unknown config key 'colour'"):
        _runner.run(TOY, {"colour": 1}, tmp_path / "run")
    with pytest.raises(ValueError, match="^items.0: expected one of a, b, c, d; got 'e'$"):
        _runner.run(TOY, {"items": ["e"]}, tmp_path / "run")
    assert not (tmp_path / "run").exists() and CALLS == []


def test_load_config_lays_sets_over_the_file(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text("experiment: toy\nitems: [d]\nscale: 3\n")
    cfg = _runner.load_config(TOY, path, {"scale": 5}, seed=2)
    assert (cfg["items"], cfg["scale"], cfg["seed"]) == (["d"], 5, 2)
    # the file is valid: the bad value is the --set's, and the message says so
    with pytest.raises(ValueError, match=r"^in --set: scale: expected a number; got 'x'"):
        _runner.load_config(TOY, path, {"scale": "x"})


def test_an_interrupted_run_is_recorded_so(tmp_path):
    def stop_at_b(run, unit):
        if unit == ("b",):
            raise KeyboardInterrupt
        return _unit(run, unit)

    toy = _runner.Experiment(**{**TOY.__dict__, "run_unit": stop_at_b})
    with pytest.raises(KeyboardInterrupt):
        _runner.run(toy, {}, tmp_path / "run", progress=False)
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert provenance["status"] == "interrupted: KeyboardInterrupt"
    assert [c["status"] for c in provenance["commands"]] == ["interrupted: KeyboardInterrupt"]
    assert not (tmp_path / "run" / "table.md").exists()  # no table from a part of the units
    out = _runner.run(TOY, {}, tmp_path / "run", progress=False)  # resumes, finishes
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["status"] == "complete"
    assert [c["status"] for c in provenance["commands"]] == [
        "interrupted: KeyboardInterrupt",
        "complete",
    ]
    assert CALLS == [("warm", 2), ("a",), ("warm", 1), ("b",)]


def test_a_failing_unit_is_recorded_with_its_error(tmp_path):
    def fail(run, unit):
        raise ValueError("features.npz: NaN in row 3")

    toy = _runner.Experiment(**{**TOY.__dict__, "run_unit": fail})
    with pytest.raises(ValueError):
        _runner.run(toy, {}, tmp_path / "run", progress=False)
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert provenance["status"] == "interrupted: ValueError: features.npz: NaN in row 3"


def test_resume_status_lines():
    assert _runner.resume_status(80, 60) == "resuming: 20 of 80 units done"
    assert _runner.resume_status(80, 0) == "up to date: all 80 units done"
    assert _runner.resume_status(80, 80) is None
    assert _runner.resume_status(5, 2, "points") == "resuming: 3 of 5 points done"


def test_the_progress_bar_names_the_unit_under_way(tmp_path, capsys):
    from dataclasses import replace

    _runner.run(TOY, {}, tmp_path / "plain")
    assert "a]" in capsys.readouterr().err
    named = replace(TOY, unit_text=lambda unit: f"letter {unit[0]}")
    _runner.run(named, {}, tmp_path / "named")
    err = capsys.readouterr().err
    assert "letter a" in err and "letter b" in err
