"""The test suite's warning filters (pyproject.toml, [tool.pytest.ini_options]) hide only the
warnings that tests cause on purpose: the same category with another message, or another
category, still shows."""

import warnings
from pathlib import Path

import pytest
from _pytest.config import parse_warning_filter
from sklearn.exceptions import ConvergenceWarning

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]


def shown(message, category):
    """Whether a warning passes the suite's filters."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lines = config["tool"]["pytest"]["ini_options"]["filterwarnings"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for line in lines:
            warnings.filterwarnings(*parse_warning_filter(line, escape=False))
        warnings.warn(message, category, stacklevel=1)
    return bool(seen)


@pytest.mark.parametrize(
    "message,category,expected",
    [
        (
            "subgradient stopped at max_iter=50 before meeting tol=0.001 (duality gap 0.08)",
            ConvergenceWarning,
            False,
        ),
        (
            "cutting_plane stopped at max_iter=50 before meeting tol=0.001",
            ConvergenceWarning,
            False,
        ),
        (
            (
                "the latent objective did not settle (decrease below C x tol) within max_outer=1 outer "
                "steps; raise max_outer or tol."
            ),
            ConvergenceWarning,
            False,
        ),
        (
            "cutting_plane stopped at max_iter=1000 before meeting tol=0.001",
            ConvergenceWarning,
            True,
        ),
        (
            (
                "the latent objective did not settle (decrease below C x tol) within max_outer=400 "
                "outer steps"
            ),
            ConvergenceWarning,
            True,
        ),
        ("cutting_plane stopped at max_iter=50 before meeting tol=0.001", UserWarning, True),
        ("liblinear failed to converge", ConvergenceWarning, True),
    ],
)
def test_only_the_warnings_tests_cause_on_purpose_are_filtered(message, category, expected):
    assert shown(message, category) is expected
