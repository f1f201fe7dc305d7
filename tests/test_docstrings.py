"""Every public function, class and method of `qs` has its numpydoc sections: Parameters when
it takes any, Returns (or Yields) when it returns a value, and Examples, which
tests/test_doctests.py runs. Public: a module and a name without a leading underscore, in the
module's ``__all__`` where it has one, defined in that module."""

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
import textwrap

import pytest

import qs

#: without an example yet: their packages (LibAUC, torchsort) replace or fail to build the
#: CPU torch of the project's environment, so an example could not be run where it is written
NO_EXAMPLES = {
    "qs.surrogates.outside.LibAUCAPLoss",
    "qs.surrogates.outside.LibAUCAPLoss.forward",
    "qs.surrogates.outside.LibAUCNDCGLoss",
    "qs.surrogates.outside.LibAUCNDCGLoss.forward",
    "qs.surrogates.outside.LibAUCRetrievalAPLoss",
    "qs.surrogates.outside.LibAUCRetrievalAPLoss.forward",
    "qs.surrogates.outside.soft_rank_ap_loss",
    "qs.surrogates.outside.soft_rank_spearman_loss",
}
_SECTION = re.compile(r"^\s*(\w[\w ]*)\n\s*-{3,}\s*$", re.M)


def sections(obj):
    """The numpydoc section titles of an object's own docstring."""
    return set(_SECTION.findall(inspect.cleandoc(obj.__doc__ or "")))


def _takes_parameters(obj):
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):  # a builtin's
        return False
    return any(name not in ("self", "cls") for name in parameters)


def _returns_value(fn):
    """Whether a function's own body returns something other than None (or yields)."""
    if inspect.isgeneratorfunction(fn):
        return True
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    own = tree.body[0]
    nodes = [own]
    while nodes:
        node = nodes.pop()
        value = node.value if isinstance(node, ast.Return) else None
        if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
            return True
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                nodes.append(child)
    return False


def missing_sections(obj, is_class=False):
    """The sections an object's docstring lacks."""
    have, missing = sections(obj), []
    if is_class:
        if (
            _takes_parameters(obj)
            and not {"Parameters", "Attributes"} & have
            and not getattr(obj, "_is_protocol", False)
        ):
            missing.append("Parameters")
    else:
        if _takes_parameters(obj) and "Parameters" not in have:
            missing.append("Parameters")
        if _returns_value(obj) and not {"Returns", "Yields"} & have:
            missing.append("Returns")
    if "Examples" not in have:
        missing.append("Examples")
    return missing


def public_objects(module):
    """``(qualified name, object, is a class)`` of a module's public functions and classes,
    and of their classes' public methods."""
    names = getattr(module, "__all__", None)
    for name, obj in vars(module).items():
        if name.startswith("_") or (names is not None and name not in names):
            continue
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if obj.__module__ != module.__name__:  # imported from elsewhere
            continue
        qualified = f"{module.__name__}.{name}"
        yield qualified, obj, inspect.isclass(obj)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if not attr.startswith("_") and inspect.isfunction(member):
                    yield f"{qualified}.{attr}", member, False


def _public_modules():
    names = ["qs"]
    for info in pkgutil.walk_packages(qs.__path__, prefix="qs."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return sorted(names)


def _import(name):
    if importlib.util.find_spec("torch") is None and name.startswith(
        ("qs.torch", "qs.nets", "qs.surrogates")
    ):
        pytest.skip("torch is not installed")
    return importlib.import_module(name)


@pytest.mark.parametrize("name", _public_modules())
def test_public_objects_have_their_sections(name):
    lacking = [
        f"{qualified}: {', '.join(missing)}"
        for qualified, obj, is_class in public_objects(_import(name))
        if (missing := missing_sections(obj, is_class))
        and (qualified not in NO_EXAMPLES or missing != ["Examples"])
    ]
    assert not lacking, "numpydoc sections missing:\n" + "\n".join(lacking)


def test_the_objects_without_examples_still_lack_them():
    """An entry of NO_EXAMPLES is removed once its object has examples (or is gone)."""
    module = _import("qs.surrogates.outside")
    found = {q: missing_sections(o, c) for q, o, c in public_objects(module)}
    stale = sorted(q for q in NO_EXAMPLES if found.get(q) != ["Examples"])
    assert not stale, f"remove from NO_EXAMPLES: {stale}"


def test_the_check_sees_a_missing_section():
    def documented(x):
        """Double.

        Parameters
        ----------
        x : int
            A number.

        Returns
        -------
        int
            Twice ``x``.

        Examples
        --------
        >>> documented(2)
        4
        """
        return 2 * x

    def loose(x):
        """Double ``x``."""
        return 2 * x

    def quiet():
        """Nothing.

        Examples
        --------
        >>> quiet()
        """

    assert missing_sections(documented) == []
    assert missing_sections(loose) == ["Parameters", "Returns", "Examples"]
    assert missing_sections(quiet) == []
