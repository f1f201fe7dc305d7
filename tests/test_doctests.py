"""The Examples sections of the library's docstrings run, and print what they show: each with
its module's names in scope, as pytest's --doctest-modules runs them."""

import doctest
import importlib
import importlib.util
import pkgutil

import numpy as np
import pytest

import qs

#: modules that import torch at their top; their examples run when torch is installed
_TORCH = ("qs.torch", "qs.nets", "qs.surrogates")
#: without torch, the examples of other modules that import it (`qs.validation`'s tensor
#: checks) are left out, the rest of their module's examples run
_NO_TORCH = importlib.util.find_spec("torch") is None


def _needs_torch(test):
    return any("import torch" in example.source for example in test.examples)


def _modules():
    names = ["qs"]
    for info in pkgutil.walk_packages(qs.__path__, prefix="qs."):
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_examples_run(name):
    if name.startswith(_TORCH):
        pytest.importorskip("torch")
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with np.printoptions(legacy=False):
        for test in finder.find(module, name, globs={**vars(module), "np": np}):
            if test.filename and not test.filename.startswith(qs.__path__[0]):
                continue  # found through a re-export of another package
            if _NO_TORCH and _needs_torch(test):
                continue
            runner.run(test)
    assert runner.failures == 0, f"{runner.failures} example(s) of {name} failed; see above"


def test_an_example_that_imports_torch_is_told_apart():
    """The examples left out without torch are those that import it (a test that can fail if
    the check stops seeing them)."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = {t.name: t for t in finder.find(importlib.import_module("qs.validation"))}
    assert _needs_torch(found["qs.validation.check_scores"])
    assert not _needs_torch(found["qs.validation.as_positive_mask"])


def test_examples_are_found():
    """The finder sees the examples (a test that can fail if the collection breaks)."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = finder.find(importlib.import_module("qs.metrics"), "qs.metrics")
    assert sum(len(t.examples) for t in found) >= 7
