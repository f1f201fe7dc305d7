"""Exact loss-augmented inference (LAI) for rank-based losses.

``lai(scores, labels, loss, method)`` finds the ranking ``R`` that maximises
``Delta(R*, R) + F(R)`` with ``F(R) = (1/PN) sum_{x pos, y neg} R_xy (s_x - s_y)``: the most
violated constraint of the ranking structured SVM. All methods return the same optimum;
they differ in cost (see ``METHODS`` and each method's module).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from qs.inference._prepare import output_arrays, raise_for
from qs.inference.auto import auto_lai, bucket_sort_lai, qs_lai
from qs.inference.brute import brute_lai
from qs.inference.bucket import bucket_lai
from qs.inference.scan import scan_lai
from qs.inference.search import search_lai
from qs.inference.sort_dc import sort_dc_lai
from qs.inference.workspace import Workspace
from qs.inference.zero_one import zero_one_lai
from qs.losses import QSLoss, get_loss
from qs.validation import as_positive_mask, as_scores, check_counts

__all__ = ["METHODS", "LAIResult", "QueriesResult", "Workspace", "lai", "lai_queries", "resolve"]

_RANKING: dict[str, Callable[..., Any]] = {
    "auto": auto_lai,
    "qs": qs_lai,
    "yue": scan_lai,
    "chakrabarti": scan_lai,
    "search": search_lai,
    "sort_dc": sort_dc_lai,
    "bucket": bucket_lai,
    "bucket_sort": bucket_sort_lai,
    "brute": brute_lai,
}


#: method name -> the losses it supports ("any" QS-suitable loss object is listed as "qs-suitable")
METHODS = {
    "auto": frozenset({"ap", "ndcg", "01", "qs-suitable"}),
    "qs": frozenset({"ap", "ndcg", "qs-suitable"}),
    "bucket": frozenset({"ap", "ndcg", "qs-suitable"}),
    "bucket_sort": frozenset({"ap", "ndcg", "qs-suitable"}),
    "sort_dc": frozenset({"ap", "ndcg", "qs-suitable"}),
    "yue": frozenset({"ap"}),
    "chakrabarti": frozenset({"ndcg"}),
    "search": frozenset({"ap"}),
    "zero_one": frozenset({"01"}),
    "brute": frozenset({"ap", "ndcg", "qs-suitable"}),
}


@dataclass(frozen=True)
class LAIResult:
    """The most violated ranking and what a structured SVM needs of it, as `lai` returns it.

    Attributes
    ----------
    neg_rank : ndarray of shape (n_neg,), int32, or None
        The interleaving rank (1 + positives above) of each negative, in input order (ranks
        are at most P + 1: int32 halves the memory traffic of int64 on large inputs); None
        for the 0-1 loss, which labels samples instead of ranking them.
    coef : ndarray of shape (n,), float64
        One coefficient per sample, in input order, with ``Psi(X, R) = sum_k coef_k x_k``.
    loss : float
        ``Delta(R*, R)``.
    objective : float
        ``loss + F(R)`` (= ``loss + coef @ scores``), F summed over scores minus a
        reference score (the coefficients sum to 0): exact to rounding at any common offset.
    ground_truth_F : float
        ``F(R*)``, i.e. ``mean(positive scores) - mean(negative scores)``, summed the same
        way.
    hinge : float
        The structured hinge ``objective - ground_truth_F = loss + F(R) - F(R*)``, summed
        on its own over the pairs the ranking puts out of order, so that a sample in its
        ground-truth place takes no part however large its score (the difference of
        ``objective`` and ``ground_truth_F`` loses every digit once the scores spread far
        beyond the hinge).

    Examples
    --------
    >>> result = lai(np.array([0.9, 0.8, 0.1, 0.5]), np.array([1, 0, 1, 0]))
    >>> result.neg_rank.tolist(), result.coef.tolist()
    ([1, 2], [0.0, 0.5, -0.5, 0.0])
    >>> result.loss, result.hinge
    (0.5, 1.0)
    """

    neg_rank: np.ndarray | None
    coef: np.ndarray
    loss: float
    objective: float
    ground_truth_F: float
    hinge: float


def resolve(loss, method):
    """The loss object and the method that `lai` runs for a loss and a method name.

    Parameters
    ----------
    loss : str or QSLoss
        "ap", "ndcg", "01" or a QS-suitable loss object.
    method : str
        A key of `METHODS`.

    Returns
    -------
    loss : QSLoss or None
        The loss object; None for the 0-1 loss.
    method : str
        The method's name: ``zero_one`` for the 0-1 loss.

    Raises
    ------
    ValueError
        For an unknown method, or one that does not support the loss.

    Examples
    --------
    >>> resolve("ap", "auto"), resolve("01", "auto")
    ((APLoss(), 'auto'), (None, 'zero_one'))
    >>> resolve("01", "qs")
    Traceback (most recent call last):
        ...
    ValueError: method 'qs' does not support loss '01'; use 'zero_one'.
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; expected one of {sorted(METHODS)}.")
    if loss == "01":
        if method not in ("auto", "zero_one"):
            raise ValueError(f"method {method!r} does not support loss '01'; use 'zero_one'.")
        return None, "zero_one"
    loss_obj = get_loss(loss)
    key = loss if isinstance(loss, str) else "qs-suitable"
    if key not in METHODS[method]:
        supported = sorted(m for m, ls in METHODS.items() if key in ls)
        raise ValueError(
            f"method {method!r} does not support loss {loss_obj.name!r}; "
            f"methods for it: {supported}."
        )
    return loss_obj, method


def lai(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    loss: str | QSLoss = "ap",
    method: str = "auto",
    out: tuple[np.ndarray | None, np.ndarray] | None = None,
    workspace: Workspace | None = None,
) -> LAIResult:
    """Loss-augmented inference: the ranking maximising loss + score term.

    The scores come first and the labels second, as in torch losses (``loss(input,
    target)``); the metrics of [qs.metrics][] take the labels first, as scikit-learn's do.

    Parameters
    ----------
    scores : array_like of shape (n,)
        Finite scores of the n samples.
    labels : array_like of shape (n,)
        1 (or True) at the positives, 0, -1 (or False) at the negatives; at least one of each.
    loss : str or QSLoss, default "ap"
        "ap", "ndcg", "01", or an instance of [qs.losses.QSLoss][].
    method : str, default "auto"
        A key of [METHODS][qs.inference.METHODS]. "auto" picks the fastest exact method for
        the input by the rule of `qs.inference.auto` (its constants `SORT_BELOW`,
        `SORT_PER_POSITIVE`, `BUCKET_MAX_POSITIVES`, `SETTLED_SHARE` and `QS_PER_POSITIVE`):
        `bucket` on random scores with many negatives per positive, `bucket_sort` on random
        scores otherwise, `qs` on training's scores (most negatives below every positive),
        on ties and on few positives; `zero_one` for the 0-1 loss.
    out : tuple of (ndarray or None, ndarray), optional
        Arrays ``(neg_rank, coef)`` to write the result into: int32 of shape (N,) (None for
        the 0-1 loss) and float64 of shape (n,), C-contiguous. A loop of calls passing the
        same arrays allocates none; the next call with them overwrites the result.
    workspace : Workspace, optional
        A [Workspace][qs.inference.Workspace] whose arrays the call reuses for its outputs
        (unless `out` is given) and its work: a loop of calls with one workspace allocates
        no array after the first; the next call with it overwrites the result.

    Returns
    -------
    LAIResult
        The ranks of the negatives, the coefficients of the joint feature map, the loss, the
        objective and the ground truth's score term.

    Raises
    ------
    ValueError
        On a non-finite score, labels that are not binary, a class with no sample, shapes that
        differ, or a method that does not support the loss.

    Notes
    -----
    Ties: tied positives keep input order; among tied negatives the one earlier in the input
    is ranked higher (smaller or equal rank); each negative takes the largest maximiser of its
    objective as evaluated in floating point, the same for every method. Ranks whose
    objectives tie only in exact arithmetic (a step that is 0 as a rational but rounds to
    either side) are told apart by that rounding; both are optimal. Scores are measured from
    one of them before anything is rounded, so that a common offset changes neither ranks nor
    objective.

    Examples
    --------
    >>> from qs.inference import lai
    >>> result = lai([2.0, 1.0, 0.5, -1.0], [1, 0, 1, 0], loss="ap")
    >>> result.neg_rank.tolist()
    [2, 3]
    >>> round(result.loss, 4), round(result.objective, 4)
    (0.1667, 1.6667)
    """
    loss_obj, method = resolve(loss, method)
    given = scores, labels  # which out= must not overwrite, converted copies or not
    scores = as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size)
    n_pos = int(np.count_nonzero(is_pos))
    n_neg = scores.size - n_pos
    check_counts(n_pos, n_neg)
    if workspace is not None and not isinstance(workspace, Workspace):
        raise ValueError(
            f"workspace must be None or a qs.inference.Workspace; got {type(workspace).__name__}."
        )
    if out is None and workspace is not None:
        neg_rank, coef = workspace.outputs(n_neg, scores.size, method == "zero_one", given)
    else:
        neg_rank, coef = output_arrays(
            out, n_neg, scores.size, method == "zero_one", (scores, is_pos, *given)
        )
    if method == "zero_one":
        err, where, loss_value, term, truth = zero_one_lai(scores, is_pos, coef)
        raise_for(err, where, scores)
        return _result(None, coef, loss_value, term, truth, scores)
    err, where, sum_pos, sum_neg, n_above, term = _RANKING[method](
        loss_obj, scores, is_pos, n_pos, neg_rank, coef, workspace
    )
    raise_for(err, where, scores)
    loss_value = loss_obj.value(n_above)
    return _result(neg_rank, coef, loss_value, term, sum_pos / n_pos - sum_neg / n_neg, scores)


def _result(neg_rank, coef, loss_value, term, truth, scores):
    """The LAIResult from the loss, the hinge's score term ``F(R) - F(R*)`` and ``F(R*)``,
    once those are known to be finite: finite scores whose differences overflow float64
    would make them inf or NaN."""
    if not (math.isfinite(term) and math.isfinite(truth)):
        raise ValueError(
            f"the score term F overflows float64: the scores range from {scores.min()!r} to "
            f"{scores.max()!r}, too far apart to subtract. Rescale the scores."
        )
    hinge = loss_value + term
    return LAIResult(neg_rank, coef, loss_value, hinge + truth, truth, hinge)


# lai_queries runs the per-query kernels of qs.inference.batch, which imports lai from here
from qs.inference.queries import QueriesResult, lai_queries  # noqa: E402
