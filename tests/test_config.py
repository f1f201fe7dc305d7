"""The config helpers shared by the pipelines (pipelines/_config.py)."""

import numpy as np
import pytest
import yaml
from pydantic import conint

from qsrank.pipelines import _schema as S
from qsrank.pipelines._config import dump_config, load_config


class Seeded(S.Section):
    seed: conint(ge=0) = S.key(0, "seed")


def test_numpy_numbers_are_written_as_plain_numbers():
    text = dump_config({"seed": np.int64(2), "grid": [np.float64(0.5)], "cv": {"k": np.int32(5)}})
    assert yaml.safe_load(text) == {"seed": 2, "grid": [0.5], "cv": {"k": 5}}


def test_unreadable_or_unknown_config_names_the_problem(tmp_path):
    def resolve(cfg):
        return S.validate(Seeded, cfg)

    with pytest.raises(ValueError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml", {"seed": 0}, resolve, {})
    bad = tmp_path / "bad.yaml"
    bad.write_text("colour: 1\n")
    with pytest.raises(ValueError, match=r"config .*bad.yaml: unknown config key 'colour'"):
        load_config(bad, {"seed": 0}, resolve, {})
    assert load_config(None, {"seed": 0}, resolve, {"seed": 4}) == {"seed": 4}
    assert load_config(None, {"seed": 0}, resolve, {}, {"seed": 3}) == {"seed": 3}


def test_a_bad_set_value_is_blamed_on_set_not_the_file(tmp_path):
    def resolve(cfg):
        return S.validate(Seeded, cfg)

    good = tmp_path / "good.yaml"
    good.write_text("seed: 1\n")
    with pytest.raises(ValueError, match=r"^in --set: seed") as err:
        load_config(good, {"seed": 0}, resolve, {}, {"seed": "abc"})
    assert "good.yaml" not in str(err.value)
    with pytest.raises(ValueError, match=r"^in --set: seed"):
        load_config(None, {"seed": 0}, resolve, {}, {"seed": "abc"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: abc\n")
    with pytest.raises(ValueError, match=r"config .*bad.yaml: seed"):
        load_config(bad, {"seed": 0}, resolve, {}, {"seed": "xyz"})
    assert load_config(bad, {"seed": 0}, resolve, {}, {"seed": 5}) == {"seed": 5}  # mended
