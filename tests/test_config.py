"""The config helpers shared by the pipelines (pipelines/_config.py)."""

import numpy as np
import pytest
import yaml

from pipelines._config import check_choice, check_keys, check_number, dump_config, load_config


def test_numpy_numbers_pass_the_checks_and_are_written_as_plain_numbers():
    check_number(np.int64(3), "seed", integer=True, low=0)
    with pytest.raises(ValueError, match="seed must be a finite integer >= 0; got True"):
        check_number(True, "seed", integer=True, low=0)
    with pytest.raises(ValueError, match="tol must be a finite number"):
        check_number(np.float64(np.nan), "tol")
    text = dump_config({"seed": np.int64(2), "grid": [np.float64(0.5)], "cv": {"k": np.int32(5)}})
    assert yaml.safe_load(text) == {"seed": 2, "grid": [0.5], "cv": {"k": 5}}


def test_unreadable_or_unknown_config_names_the_problem(tmp_path):
    def resolve(cfg):
        check_keys(cfg, ("seed",), "")
        return cfg

    with pytest.raises(ValueError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml", {"seed": 0}, resolve, {})
    bad = tmp_path / "bad.yaml"
    bad.write_text("colour: 1\n")
    with pytest.raises(ValueError, match=r"config .*bad.yaml: unknown config key\(s\) 'colour'"):
        load_config(bad, {"seed": 0}, resolve, {})
    assert load_config(None, {"seed": 0}, resolve, {"seed": 4}) == {"seed": 4}


@pytest.mark.parametrize("check", [
    lambda v: check_number(v, "seed", integer=True, low=0),
    lambda v: check_choice(v, "loss", ("ap", "ndcg")),
    lambda v: check_keys({v: 1}, ("seed",), "scores"),
])
def test_an_error_never_prints_a_whole_value(check):
    with pytest.raises(ValueError) as err:
        check("x" * 100_000)
    assert len(str(err.value)) < 300 and "..." in str(err.value)
