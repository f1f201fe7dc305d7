"""Choosing the regularisation weight C of a model by cross-validation.

:func:`choose_C` fits one model per candidate C and per split of a splitter (k-fold,
stratified, grouped, or a single holdout), averages each C's validation scores over the
splits, and returns the best C with every score. Ties go to the smallest C, the most
regularised model. :func:`estimator_fit_score` builds the fit-and-score step for a
scikit-learn estimator with a parameter ``C``.

scikit-learn's ``GridSearchCV`` covers only the estimator case: the latent detection SVM
(trained on bags of boxes through a scheduler) and the learning-to-rank models (fitted and
scored per query group) are not estimators over arrays, so the search here takes any
function of ``(C, train rows, validation rows)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from sklearn.base import clone
from sklearn.metrics import check_scoring

#: ``fit_score(C, train_rows, validation_rows)``: fit with C on the training rows and return
#: the validation score (higher is better), or a mapping of metric name to score.
FitScore = Callable[[Any, np.ndarray, np.ndarray], float | Mapping[str, float]]

#: The metric name of a `FitScore` that returns a single number.
SCORE = "score"


class Splitter(Protocol):
    """What `choose_C` needs of a splitter: scikit-learn's ``split(X, y, groups)``.

    Any scikit-learn cross-validation splitter is one.

    Examples
    --------
    >>> from sklearn.model_selection import KFold
    >>> splitter: Splitter = KFold(2)
    >>> [validation.tolist() for _, validation in splitter.split(np.arange(4))]
    [[0, 1], [2, 3]]
    """

    def split(
        self, X: Any, y: Any = None, groups: Any = None
    ) -> Iterable[tuple[npt.ArrayLike, npt.ArrayLike]]:
        """The splits of the rows of ``X`` into training and validation indices.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            The samples.
        y : array-like of shape (n_samples,) or None, default None
            Their labels, for splitters that stratify.
        groups : array-like of shape (n_samples,) or None, default None
            Their groups, for splitters that keep a group whole.

        Returns
        -------
        iterable of tuple
            ``(train indices, validation indices)`` of each split.

        Examples
        --------
        >>> from sklearn.model_selection import GroupKFold
        >>> splits = GroupKFold(2).split(np.arange(4), groups=[0, 0, 1, 1])
        >>> sorted(validation.tolist() for _, validation in splits)
        [[0, 1], [2, 3]]
        """
        ...


@dataclass(frozen=True)
class CChoice:
    """The outcome of `choose_C`.

    Parameters
    ----------
    C : float
        The chosen candidate, as given in `Cs`.
    index : int
        Its position in `Cs`.
    Cs : tuple of float
        The candidates, in the order given.
    selected_by : str
        The metric that chose `C` (``"score"`` when the fit-and-score function returns one
        number).
    fold_scores : dict of str to numpy.ndarray
        Per metric, the validation scores, one row per candidate and one column per split.

    Examples
    --------
    >>> scores = {"score": np.array([[0.5, 0.7], [0.75, 1.0]])}  # 2 candidates x 2 splits
    >>> choice = CChoice(1.0, 1, (0.1, 1.0), "score", scores)
    >>> choice.mean_scores["score"].tolist(), choice.best_score
    ([0.6, 0.875], 0.875)
    """

    C: float
    index: int
    Cs: tuple[float, ...]
    selected_by: str
    fold_scores: dict[str, np.ndarray]

    @property
    def mean_scores(self) -> dict[str, np.ndarray]:
        """Per metric, the mean validation score of each candidate over the splits."""
        return {name: s.mean(axis=1) for name, s in self.fold_scores.items()}

    @property
    def best_score(self) -> float:
        """The chosen candidate's mean validation score by `selected_by`."""
        return float(self.mean_scores[self.selected_by][self.index])


def choose_C(
    fit_score: FitScore,
    Cs: Sequence[float],
    cv: Splitter | Iterable[tuple[npt.ArrayLike, npt.ArrayLike]],
    X: Any = None,
    y: Any = None,
    groups: npt.ArrayLike | None = None,
    *,
    select: str | None = None,
) -> CChoice:
    """The candidate C with the best mean validation score over the splits of `cv`.

    Every candidate is fitted and scored on every split, candidates outermost. Among the
    candidates of equal best mean score, the smallest C is chosen.

    Parameters
    ----------
    fit_score : callable
        ``fit_score(C, train_rows, validation_rows)``: fits with C on the training rows (an
        integer index array) and returns the validation score, higher is better: one number,
        or a mapping of metric name to number (then `select` names the one that chooses).
    Cs : sequence of float
        The candidates: positive, finite, distinct.
    cv : splitter or iterable of (train_rows, validation_rows)
        A scikit-learn splitter (``KFold``, ``StratifiedKFold``, ``GroupKFold``, ...) whose
        ``split(X, y, groups)`` gives the splits, or the splits themselves (a single holdout
        is one pair).
    X : array-like, optional
        The rows to split; needed by a splitter, unused with given splits.
    y : array-like, optional
        The labels, for a stratified splitter.
    groups : array-like, optional
        A group id per row. Given, no group may have rows on both sides of a split.
    select : str, optional
        The metric that chooses, when `fit_score` returns a mapping.

    Returns
    -------
    CChoice
        The chosen C, its position and every candidate's scores per split.

    Raises
    ------
    ValueError
        If `Cs` is empty, holds a duplicate or a value that is not positive and finite; if
        `cv` gives no split or an empty side; if a split puts a group on both sides; if
        `select` does not match what `fit_score` returns; if a mean score is NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import KFold
    >>> rows = np.arange(6)
    >>> def fit_score(C, train, validation):
    ...     return 1 / (1 + abs(np.log10(C)))
    >>> choice = choose_C(fit_score, [0.1, 1.0, 10.0], KFold(3), rows)
    >>> choice.C, choice.best_score
    (1.0, 1.0)
    """
    candidates = _check_Cs(Cs)
    splits = _splits(cv, X, y, groups)
    got = [[fit_score(C, train, validation) for train, validation in splits] for C in candidates]
    rows = [[dict(g) if isinstance(g, Mapping) else {SCORE: g} for g in row] for row in got]
    metrics = list(rows[0][0])
    for C, row in zip(candidates, rows, strict=True):
        for scores in row:
            if list(scores) != metrics:
                raise ValueError(
                    f"fit_score returned the metrics {list(scores)} for C={C}, "
                    f"{metrics} before: it must return the same each time"
                )
    fold_scores = {m: np.array([[float(s[m]) for s in row] for row in rows]) for m in metrics}
    if select is None:
        if len(metrics) > 1:
            raise ValueError(f"fit_score returns the metrics {metrics}: name one as select")
        select = metrics[0]
    elif select not in fold_scores:
        raise ValueError(f"select={select!r} is not among the metrics {metrics} of fit_score")
    means = fold_scores[select].mean(axis=1)
    if np.isnan(means).any():
        bad = candidates[int(np.flatnonzero(np.isnan(means))[0])]
        raise ValueError(f"the mean validation {select} of C={bad} is NaN")
    best = means.max()
    index = min(np.flatnonzero(means == best), key=lambda i: float(candidates[i]))
    return CChoice(candidates[index], int(index), tuple(candidates), select, fold_scores)


def estimator_fit_score(
    estimator: Any,
    X: Any,
    y: np.ndarray,
    scoring: str | Callable[..., float] | Mapping[str, str | Callable[..., float]],
) -> FitScore:
    """The `choose_C` step of a scikit-learn estimator with a parameter ``C``.

    Each call fits a clone of `estimator` with the given C on the training rows of (X, y)
    and scores it on the validation rows, as ``GridSearchCV`` does.

    Parameters
    ----------
    estimator : estimator
        A scikit-learn estimator with a parameter ``C``; it is cloned, never fitted.
    X : numpy.ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        The rows (indexed as ``X[rows]``).
    y : numpy.ndarray of shape (n_samples,)
        Their labels.
    scoring : str, callable or mapping
        A scikit-learn scorer or scorer name (``"average_precision"``), or a mapping of
        metric name to either, for several metrics.

    Returns
    -------
    callable
        ``fit_score(C, train_rows, validation_rows)`` for `choose_C`.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import StratifiedKFold
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = LogisticRegression(max_iter=5000)
    >>> step = estimator_fit_score(model, X[:200], y[:200], "average_precision")
    >>> choose_C(step, [0.01, 1.0], StratifiedKFold(3), X[:200], y[:200]).C
    1.0
    """
    if isinstance(scoring, Mapping):
        scorers: Any = {name: check_scoring(estimator, s) for name, s in scoring.items()}
    else:
        scorers = check_scoring(estimator, scoring)

    def fit_score(C: Any, train: np.ndarray, validation: np.ndarray) -> Any:
        model = clone(estimator).set_params(C=C)
        model.fit(X[train], y[train])
        X_val, y_val = X[validation], y[validation]
        if isinstance(scorers, dict):
            return {name: s(model, X_val, y_val) for name, s in scorers.items()}
        return scorers(model, X_val, y_val)

    return fit_score


def _check_Cs(Cs: Sequence[float]) -> list[float]:
    candidates = list(Cs)
    if not candidates:
        raise ValueError("Cs is empty: give at least one candidate C")
    for C in candidates:
        number = isinstance(C, (int, float, np.number)) and not isinstance(C, bool)
        if not (number and np.isfinite(C) and C > 0):
            raise ValueError(f"every candidate C must be a positive finite number, got {C!r}")
    if len(set(map(float, candidates))) < len(candidates):
        raise ValueError(f"Cs holds a candidate twice: {candidates}")
    return candidates


def _splits(
    cv: Any, X: Any, y: Any, groups: npt.ArrayLike | None
) -> list[tuple[np.ndarray, np.ndarray]]:
    if hasattr(cv, "split"):
        if X is None:
            raise ValueError("a splitter needs the rows X to split")
        given = cv.split(X, y, groups)
    else:
        given = cv
    splits = [(np.asarray(tr, dtype=np.intp), np.asarray(va, dtype=np.intp)) for tr, va in given]
    if not splits:
        raise ValueError("cv gives no split")
    group_ids = None if groups is None else np.asarray(groups)
    for k, (train, validation) in enumerate(splits):
        if train.size == 0 or validation.size == 0:
            raise ValueError(f"split {k} has no training or no validation rows")
        if group_ids is not None:
            shared = np.intersect1d(group_ids[train], group_ids[validation])
            if shared.size:
                raise ValueError(
                    f"split {k} puts group {shared.tolist()[0]!r} on both sides: give a splitter "
                    "that keeps groups whole (GroupKFold, GroupShuffleSplit, ...)"
                )
    return splits
