"""Sparse ``index:value`` feature files, one sample per file, as the AP-SVM papers' released
code writes them (the VOC2011 poselet features and the VOC2007 latent AP-SVM box features).

A file holds 1-based, strictly increasing ``index:value`` pairs, whitespace separated over any
number of lines, each line ended by a newline. The parser checks all of it, since the files
are untrusted input.
"""

import re

import numpy as np

from qs.data.files import check_final_newline, shown

__all__ = ["parse_sparse_features"]

_PAIRS = re.compile(r"\s*(?:\d{1,18}:[^\s:]+\s+)*(?:\d{1,18}:[^\s:]+)?\s*")
_PAIR = re.compile(r"\d{1,18}:[^\s:]+")


def parse_sparse_features(path, text, n_features=None, hint=""):
    """The indices and values of one sparse feature file's text, checked throughout.

    Parameters
    ----------
    path : str or pathlib.Path
        The file, for messages.
    text : str
        Its contents.
    n_features : int or None, default None
        The feature dimension: an index above it is an error; None: no bound.
    hint : str, default ""
        Appended to the message of an index above ``n_features`` (what the dimension means,
        how to load otherwise).

    Returns
    -------
    index : ndarray, int64
        The 1-based indices, strictly increasing.
    value : ndarray, float64
        The values, finite.

    Raises
    ------
    ValueError
        Naming the file, the line and the pair: a malformed pair, index 0, indices that do
        not increase, an index above ``n_features``, a value that is not finite, a last line
        without its newline.

    Examples
    --------
    >>> index, value = parse_sparse_features("img_1.feature", "1:0.5 3:2\\n")
    >>> index.tolist(), value.tolist()
    ([1, 3], [0.5, 2.0])
    >>> parse_sparse_features("img_1.feature", "3:1 2:1\\n")
    Traceback (most recent call last):
        ...
    ValueError: img_1.feature, line 1: pair 2 ('2:1') does not increase the index; ...
    """
    if not _PAIRS.fullmatch(text):
        k = next(k for k, tok in enumerate(text.split()) if not _PAIR.fullmatch(tok))
        _fail(path, text, k, "is not an index:value pair (a positive integer, ':', a number)")
    tokens = text.replace(":", " ").split()
    index = np.array(tokens[::2], dtype=np.int64)
    try:
        value = np.array(tokens[1::2], dtype=np.float64)
    except ValueError:
        k = next(k for k, v in enumerate(tokens[1::2]) if not _is_float(v))
        _fail(path, text, k, "has a value that is not a number")
    if index.size and index[0] < 1:
        _fail(path, text, 0, "has index 0; indices are 1-based")
    decreasing = np.flatnonzero(np.diff(index) <= 0)
    if decreasing.size:
        _fail(
            path,
            text,
            decreasing[0] + 1,
            "does not increase the index; indices must be strictly increasing",
        )
    if n_features is not None and index.size and index[-1] > n_features:
        _fail(path, text, index.size - 1, f"is beyond the {n_features} features expected{hint}")
    finite = np.isfinite(value)
    if not finite.all():
        _fail(path, text, np.flatnonzero(~finite)[0], "has a value that is not finite")
    check_final_newline(path, text)
    return index, value


def _is_float(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fail(path, text, k, problem):
    """Raise for the k-th pair of a feature file, naming its line."""
    pairs = [(no, tok) for no, line in enumerate(text.splitlines(), 1) for tok in line.split()]
    no, token = pairs[k]
    raise ValueError(f"{path}, line {no}: pair {k + 1} ({shown(token, numeric=True)}) {problem}.")
