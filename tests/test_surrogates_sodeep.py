"""The package qs.surrogates.sodeep: every public name of its modules is importable from it,
as the same object (the tests of each module are in tests/test_surrogates_sodeep_<module>.py)."""

import importlib

import pytest

pytest.importorskip("torch")
from qs.surrogates import sodeep


@pytest.mark.parametrize("module", ["sorters", "training", "checkpoints", "losses"])
def test_the_package_exports_its_modules_public_names(module):
    mod = importlib.import_module(f"qs.surrogates.sodeep.{module}")
    assert mod.__all__
    for name in mod.__all__:
        assert name in sodeep.__all__, name
        assert getattr(sodeep, name) is getattr(mod, name), name


def test_the_lazy_names_of_qs_surrogates_are_the_packages():
    import qs.surrogates

    for name in qs.surrogates._MODULES["qs.surrogates.sodeep"]:
        assert getattr(qs.surrogates, name) is getattr(sodeep, name), name
