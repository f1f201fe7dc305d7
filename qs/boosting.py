"""Exact AP and NDCG structured hinges as custom objectives of gradient boosting (LightGBM,
XGBoost).

A boosted ranker's scores ``s`` are free per document, so the structured hinge of each
query ``q``, ``xi_q(s) = max_R Delta_q(R) + F_q(R, s) - F_q(R*_q, s)`` (the AP-SVM's and
NDCG-SVM's loss, Yue et al. 2007, with ``F`` linear in the scores), is minimised over ``s``
directly: its gradient with respect to every score is ``coef(R_bar) - coef(R*)``, where
``R_bar`` is the most violated ranking, found exactly by one
`qs.inference.lai_queries` call over all queries. The objective is the sum of the
queries' hinges; a query without a relevant or without a non-relevant document has none.

The hinge is piecewise linear in the scores: where its second derivative exists it is zero,
so there is no Hessian to give, yet the libraries take a positive one for their Newton leaf
values ``-sum(grad) / (sum(hess) + lambda)``. The Hessian given is constant, chosen once
from the labels (``hessian="balanced"``): ``|coef(R*)|``, ``1/P_q`` at a relevant and
``1/N_q`` at a non-relevant document of a query with ``P_q`` relevant and ``N_q``
non-relevant documents. Each gradient is bounded by twice that (a coefficient lies in
``[-1/P, 1/P]`` at a relevant and ``[-1/N, 1/N]`` at a non-relevant document), so a leaf's
Newton step is a gradient step of at most 2 in score units, in every query whatever its
size. A number instead gives every document that Hessian (a plain gradient step of size
``1 / hessian``). The libraries need no other change: the objectives read the labels and
the query boundaries from the training data they are handed.
"""

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from qs.inference.queries import QUERY_LOSSES, lai_queries

__all__ = ["HingeGradient", "hinge_gradient", "lightgbm_objective", "xgboost_objective"]


class HingeGradient(NamedTuple):
    """What `hinge_gradient` returns.

    Attributes
    ----------
    grad : ndarray of shape (n_documents,), float64
        The gradient of the sum of the queries' hinges with respect to each score (zero in
        queries that do not train).
    hess : ndarray of shape (n_documents,), float64
        The constant Hessian given in its place (see the module).
    hinge : ndarray of shape (n_queries,), float64
        Each query's structured hinge (zero where it does not train).
    valid : ndarray of shape (n_queries,), bool
        The query has a relevant and a non-relevant document.

    Examples
    --------
    >>> res = hinge_gradient([0.1, 0.5, 0.3, 0.2], [1, 0, 0, 0], [0, 2, 4])
    >>> res.valid.tolist(), res.grad.tolist()
    ([True, False], [-2.0, 2.0, 0.0, 0.0])
    """

    grad: np.ndarray
    hess: np.ndarray
    hinge: np.ndarray
    valid: np.ndarray


def hinge_gradient(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    offsets: npt.ArrayLike,
    *,
    loss: str = "ap",
    relevance_threshold: float = 0.0,
    hessian: float | str = "balanced",
) -> HingeGradient:
    """The structured hinge of every query, its exact gradient and a constant Hessian.

    Parameters
    ----------
    scores : array-like of shape (n_documents,)
        The documents' scores, the queries one after another.
    labels : array-like of shape (n_documents,)
        Relevance grades; a document is relevant when its grade is above
        ``relevance_threshold``.
    offsets : array-like of int, shape (n_queries + 1,)
        Where each query starts, then ``n_documents`` (as `qs.inference.lai_queries`).
    loss : str, default "ap"
        "ap" or "ndcg": the structured hinge of that loss.
    relevance_threshold : float, default 0.0
        Grades above it are relevant (0: any grade above 0, as LightGBM's MAP reads them).
    hessian : str or float, default "balanced"
        "balanced": ``1/P_q`` at a relevant and ``1/N_q`` at a non-relevant document of
        query ``q`` (``1/n_q`` in a query that does not train); a number: that value at
        every document.

    Returns
    -------
    HingeGradient
        ``grad``, ``hess`` per document; ``hinge``, ``valid`` per query.

    Raises
    ------
    ValueError
        As `qs.inference.lai_queries`; also a non-finite label or threshold, or a
        ``hessian`` that is neither "balanced" nor a positive number.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.boosting import hinge_gradient
    >>> res = hinge_gradient([0.1, 0.5, 2.0, 0.2], [1, 0, 2, 0], [0, 2, 4])
    >>> res.grad.tolist()
    [-2.0, 2.0, 0.0, 0.0]
    >>> res.hinge.tolist()
    [1.3, 0.0]
    >>> res.hess.tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.dtype.kind not in "biuf":
        raise ValueError(
            f"labels must be a 1-D array of numeric relevance grades; got dtype "
            f"{labels.dtype} of shape {labels.shape}."
        )
    if not np.isfinite(labels).all():
        raise ValueError("labels must be finite relevance grades; got NaN or inf.")
    if (
        isinstance(relevance_threshold, bool)
        or not isinstance(relevance_threshold, (int, float, np.integer, np.floating))
        or not np.isfinite(relevance_threshold)
    ):
        raise ValueError(
            f"relevance_threshold must be a finite number; got {relevance_threshold!r}."
        )
    balanced = isinstance(hessian, str) and hessian == "balanced"
    if not balanced and (
        isinstance(hessian, (bool, str))
        or not isinstance(hessian, (int, float, np.integer, np.floating))
        or not hessian > 0
        or not np.isfinite(hessian)
    ):
        raise ValueError(f"hessian must be 'balanced' or a positive number; got {hessian!r}.")
    relevant = labels > relevance_threshold
    res = lai_queries(scores, relevant, offsets, loss=loss, gradient=True, ranks=False)
    offsets = np.asarray(offsets, dtype=np.int64)
    if balanced:
        query = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        sizes = np.diff(offsets).astype(np.float64)
        n_relevant = np.bincount(query, weights=relevant, minlength=sizes.size)
        count = np.where(relevant, n_relevant[query], sizes[query] - n_relevant[query])
        hess = 1.0 / np.where(res.valid[query], count, sizes[query])
    else:
        hess = np.full(relevant.size, float(hessian))
    return HingeGradient(res.coef, hess, res.hinge, res.valid)


def lightgbm_objective(
    loss: str = "ap", *, relevance_threshold: float = 0.0, hessian: float | str = "balanced"
):
    """A LightGBM custom objective (``params["objective"]`` of ``lightgbm.train``): the sum
    of the queries' exact structured hinges.

    The callable takes ``(preds, train_set)`` and returns ``(grad, hess)`` of
    `hinge_gradient`, reading the labels and the queries (``group=``, query sizes)
    from ``train_set``.

    Parameters
    ----------
    loss : str, default "ap"
        "ap" or "ndcg", as in `hinge_gradient`.
    relevance_threshold : float, default 0.0
        Grades above it are relevant, as in `hinge_gradient`.
    hessian : str or float, default "balanced"
        As in `hinge_gradient`.

    Returns
    -------
    callable
        ``objective(preds, train_set) -> (grad, hess)``.

    Examples
    --------
    >>> import lightgbm
    >>> X, y = np.zeros((4, 1)), [1, 0, 2, 0]
    >>> train_set = lightgbm.Dataset(X, label=y, group=[2, 2], params={"verbose": -1})
    >>> grad, hess = lightgbm_objective("ap")(np.array([0.1, 0.5, 2.0, 0.2]),
    ...                                       train_set.construct())
    >>> grad.tolist()
    [-2.0, 2.0, 0.0, 0.0]
    """
    _check_loss(loss)

    def objective(preds, train_set):
        sizes = train_set.get_group()
        if sizes is None:
            raise ValueError(
                "the exact hinge objective needs the queries: build the "
                "lightgbm.Dataset with group= (the query sizes)."
            )
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        res = hinge_gradient(
            preds,
            train_set.get_label(),
            offsets,
            loss=loss,
            relevance_threshold=relevance_threshold,
            hessian=hessian,
        )
        return res.grad, res.hess

    return objective


def xgboost_objective(
    loss: str = "ap", *, relevance_threshold: float = 0.0, hessian: float | str = "balanced"
):
    """An XGBoost custom objective (``obj=`` of ``xgboost.train``): the sum of the queries'
    exact structured hinges.

    The callable takes ``(preds, dtrain)`` and returns ``(grad, hess)`` of
    `hinge_gradient`, reading the labels and the queries (``qid=`` or ``group=``)
    from ``dtrain``. The balanced Hessian of a document is below 1, XGBoost's default
    ``min_child_weight``: train with ``min_child_weight`` near 0.

    Parameters
    ----------
    loss : str, default "ap"
        "ap" or "ndcg", as in `hinge_gradient`.
    relevance_threshold : float, default 0.0
        Grades above it are relevant, as in `hinge_gradient`.
    hessian : str or float, default "balanced"
        As in `hinge_gradient`.

    Returns
    -------
    callable
        ``objective(preds, dtrain) -> (grad, hess)``.

    Examples
    --------
    >>> import xgboost
    >>> dtrain = xgboost.DMatrix(np.zeros((4, 1)), label=[1, 0, 2, 0], qid=[0, 0, 1, 1])
    >>> grad, hess = xgboost_objective("ap")(np.array([0.1, 0.5, 2.0, 0.2]), dtrain)
    >>> grad.tolist()
    [-2.0, 2.0, 0.0, 0.0]
    """
    _check_loss(loss)

    def objective(preds, dtrain):
        offsets = np.asarray(dtrain.get_uint_info("group_ptr"), dtype=np.int64)
        if offsets.size < 2:
            raise ValueError(
                "the exact hinge objective needs the queries: build the "
                "xgboost.DMatrix with qid= (or group=)."
            )
        res = hinge_gradient(
            preds,
            dtrain.get_label(),
            offsets,
            loss=loss,
            relevance_threshold=relevance_threshold,
            hessian=hessian,
        )
        return res.grad, res.hess

    return objective


def _check_loss(loss):
    if not (isinstance(loss, str) and loss in QUERY_LOSSES):
        raise ValueError(f"loss must be one of {list(QUERY_LOSSES)}; got {loss!r}.")
