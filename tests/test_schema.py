"""Declared configs (pipelines/_schema.py): leaf types, one-line errors, --set parsing, help."""

from typing import Literal

import pytest
import yaml
from pydantic import conint

from qsrank.pipelines import _schema as S


class Inner(S.Section):
    folds: conint(ge=2) = S.key(5, "folds")
    grid: S.C_GRID = S.key([1.0, 10.0], "C values")


class Model(S.Section):
    name: Literal["a", "b"] = S.key("a", "a name")
    C: S.real(gt=0) | Literal["cv"] = S.key("cv", "C or cv")
    data: str | None = S.key(None, "a folder or null")
    fast: bool = S.key(False, "a flag")
    items: S.distinct(Literal["x", "y", "z"]) = S.key(["x"], "letters")
    inner: Inner = S.key(Inner, "a section")


def test_defaults_and_values_keep_their_type():
    assert S.validate(Model, {}) == {
        "name": "a",
        "C": "cv",
        "data": None,
        "fast": False,
        "items": ["x"],
        "inner": {"folds": 5, "grid": [1.0, 10.0]},
    }
    cfg = S.validate(Model, {"C": 10, "inner": {"folds": 3}})
    assert cfg["C"] == 10 and type(cfg["C"]) is int
    assert cfg["inner"] == {"folds": 3, "grid": [1.0, 10.0]} and type(cfg["inner"]["folds"]) is int
    assert S.validate(Model, cfg) == cfg  # a resolved config resolves to itself
    # defaults are fresh copies
    S.validate(Model, {})["items"].append("y")
    assert S.validate(Model, {})["items"] == ["x"]


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"colour": 1},
            "unknown config key 'colour'; allowed keys: name, C, data, fast, items, inner",
        ),
        ({"inner": {"k": 1}}, "unknown config key 'inner.k'; allowed keys in 'inner': folds, grid"),
        ({"inner": 3}, "inner: expected a mapping of keys; got 3"),
        ({"name": "c"}, "name: expected one of a, b; got 'c'"),
        ({"C": 0}, "C: expected a value > 0 or 'cv'; got 0"),
        ({"C": True}, "C: expected a number or 'cv'; got True"),
        ({"C": float("nan")}, "C: expected a finite number or 'cv'; got nan"),
        ({"data": 3}, "data: expected a string; got 3"),
        ({"fast": "yes"}, "fast: expected true or false; got 'yes'"),
        ({"items": ["x", "w"]}, "items.1: expected one of x, y, z; got 'w'"),
        ({"items": ["x", "x"]}, "items: expected no repeated entries; got ['x', 'x']"),
        ({"items": []}, "items: expected a list of 1 or more; got []"),
        (
            {"inner": {"folds": 1}},
            "inner.folds: expected a value >= 2; got 1",
        ),
        ({"inner": {"folds": 2.0}}, "inner.folds: expected an integer; got 2.0"),
        ({"inner": {"grid": [1, 0]}}, "inner.grid.1: expected a value > 0; got 0"),
        (
            {"inner": {"grid": [1.0, 1.0]}},
            "inner.grid: expected no repeated entries; got [1.0, 1.0]",
        ),
        ([1, 2], "config must be a mapping of keys; got [1, 2]"),
    ],
)
def test_errors_are_one_line_naming_path_expected_and_given(config, message):
    with pytest.raises(ValueError) as err:
        S.validate(Model, config)
    assert str(err.value) == message


def test_a_huge_given_value_is_cut():
    with pytest.raises(ValueError) as err:
        S.validate(Model, {"name": "n" * 10_000})
    assert str(err.value).startswith("name: expected one of a, b; got 'nnn")
    assert str(err.value).endswith("...") and len(str(err.value)) < 120


def test_parse_sets_reads_dotted_paths_and_yaml_values():
    assert S.parse_sets(
        ["C=10", "inner.folds=3", "inner.grid=[1, 2]", "data=/x/y", "fast=true", "name="]
    ) == {
        "C": 10,
        "inner": {"folds": 3, "grid": [1, 2]},
        "data": "/x/y",
        "fast": True,
        "name": None,
    }
    assert S.parse_sets(["C=1e-5"]) == {"C": 1e-5}  # a float, as in a config file
    assert S.validate(Model, S.parse_sets(["inner.folds=3"]))["inner"]["folds"] == 3
    for bad, message in [
        ("C", "expected KEY=VALUE"),
        (".C=1", "expected KEY=VALUE"),
        ("C=[1", "expected ',' or ']'"),
        ("C=&a 1", "anchors and aliases"),
        ("C.x=2", "is set to a value above"),
    ]:
        with pytest.raises(ValueError, match=message):
            S.parse_sets(["C=1", bad] if message.endswith("above") else [bad])


def test_help_lines_are_yaml_of_the_defaults_with_one_comment_per_key():
    lines = S.help_lines(Model)
    assert yaml.safe_load("\n".join(lines)) == S.validate(Model, {})
    assert lines[0] == "name: a  # a name"
    assert "inner:  # a section" in lines and "  folds: 5  # folds" in lines
    assert len(lines) == 8


def test_with_defaults_changes_only_the_defaults():
    Three = S.with_defaults(Inner, folds=3)

    class Outer(S.Section):
        inner: Three = S.key(Three, "x")

    assert S.validate(Outer, {}) == {"inner": {"folds": 3, "grid": [1.0, 10.0]}}
    assert S.validate(Outer, {"inner": {"grid": [2]}})["inner"] == {"folds": 3, "grid": [2]}
    with pytest.raises(ValueError, match=r"^inner.folds: expected a value >= 2; got 1$"):
        S.validate(Outer, {"inner": {"folds": 1}})
    assert S.help_lines(Outer)[1] == "  folds: 3  # folds"


def test_with_defaults_takes_keys_without_checks_of_their_own():
    """A section key is a plain type (no checks beside it): it takes another default too."""
    Three = S.with_defaults(Inner, folds=3)
    Other = S.with_defaults(Model, inner=Three, name="b")
    assert S.validate(Other, {})["inner"] == {"folds": 3, "grid": [1.0, 10.0]}
    assert S.validate(Other, {})["name"] == "b"
    with pytest.raises(ValueError, match=r"^name: expected one of a, b"):
        S.validate(Other, {"name": "c"})
