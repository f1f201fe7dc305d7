"""The Examples sections of the library's docstrings run, and print what they show: each with
its module's names in scope, as pytest's --doctest-modules runs them."""

import doctest
import importlib
import importlib.util
import pkgutil
import re

import numpy as np
import pytest

import qs

#: modules that import torch at their top; their examples run when torch is installed
_TORCH = ("qs.torch", "qs.nets", "qs.surrogates")
#: the top-level package of each ``import X`` or ``from X import`` line of an example
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.M)


def _missing_packages(test):
    """The packages a docstring's examples import that are not installed (an optional
    extra's: torch, lightgbm, statsmodels): its examples are then left out, the rest of the
    module's run."""
    names = {m.group(1) for example in test.examples for m in _IMPORT.finditer(example.source)}
    return sorted(name for name in names if importlib.util.find_spec(name) is None)


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
            if _missing_packages(test):
                continue
            runner.run(test)
    assert runner.failures == 0, f"{runner.failures} example(s) of {name} failed; see above"


def test_the_examples_of_a_missing_package_are_told_apart():
    """An example importing a package that is not installed is left out, one importing only
    installed packages is not (a test that can fail if the check stops seeing imports)."""
    parser = doctest.DocTestParser()
    missing = parser.get_doctest(
        ">>> import numpy\n>>> from no_such_package import x\n", {}, "a", None, 0
    )
    present = parser.get_doctest(
        ">>> import numpy as np\n>>> from scipy import sparse\n", {}, "b", None, 0
    )
    assert _missing_packages(missing) == ["no_such_package"]
    assert _missing_packages(present) == []


def test_examples_are_found():
    """The finder sees the examples (a test that can fail if the collection breaks)."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = finder.find(importlib.import_module("qs.metrics"), "qs.metrics")
    assert sum(len(t.examples) for t in found) >= 7
