"""scikit-learn estimator of the ranking structured SVM: `RankSVM`.

One estimator trains the AP-SVM (Yue et al. 2007), the NDCG-SVM and the binary hinge SVM
("01") with the same [qs.ssvm][] solver, so their training and LAI times compare fairly.
It fits, predicts, scores and cross-validates like any scikit-learn classifier;
`LatentRankSVM` is its latent counterpart for bags of boxes.
"""

import numbers
import warnings
from collections.abc import Callable
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from qs.detection import check_padded, score_bags
from qs.inference import METHODS
from qs.metrics import average_precision, ndcg
from qs.ssvm import SOLVERS
from qs.ssvm.latent import bag_argmax, check_bags, latent_cutting_plane
from qs.ssvm.out_of_core import DASK_SOLVERS, DaskQueryProblem, is_dask_collection, solve_dask
from qs.ssvm.queries import QUERY_SOLVERS, query_offsets, query_scores, solve_queries
from qs.validation import as_positive_mask

__all__ = ["LatentRankSVM", "RankSVM", "append_ones"]

#: loss -> the metric that ``score`` reports (the 0-1 SVM is judged by AP, as in the paper)
_METRICS = {"ap": average_precision, "ndcg": ndcg, "01": average_precision}


class RankSVM(ClassifierMixin, BaseEstimator):
    """Linear structured SVM for a rank-based loss (AP, NDCG) or the 0-1 loss.

    Solves ``min_w 1/2 |w|^2 + C xi`` where ``xi`` is the structured hinge of the loss,
    found by exact loss-augmented inference ([qs.inference.lai][]) at each iteration.

    Parameters
    ----------
    loss : str, default "ap"
        Loss the SVM is trained for: "ap", "ndcg", or "01" (the binary hinge SVM).
    inference : str, default "auto"
        LAI method (a key of `qs.inference.METHODS` supporting ``loss``); every exact
        method gives the same weights, only the time differs. "auto" picks the fastest;
        for "01" only "auto" and "zero_one" apply.
    solver : str, default "auto"
        "cutting_plane", "frank_wolfe", "subgradient", "block_frank_wolfe" or "auto": the
        1-slack cutting plane, except for a fit over queries (``groups``) with dense
        features, where block-coordinate Frank-Wolfe over the queries takes its place.
        "block_frank_wolfe" is a solver over queries; without ``groups`` there is one
        block, and it is "frank_wolfe".
    C : float, default 1.0
        Weight of the slack (> 0), on the scale of the loss for every loss: for "01" the slack is
        the mean hinge loss, so ``C`` here is LinearSVC's ``C`` times ``n_samples``. Over
        queries the slack is the mean of the queries' hinges: the primal is
        ``1/2 |w|^2 + (C / Q) sum_q xi_q``, SVMstruct's (and SVM-map's) ``C / n`` with one
        example per query, ``Q`` the queries that train.
    relevance_threshold : float or None, default None
        For a fit over queries: a document is relevant where its label is above this
        (graded labels such as LETOR's 0-4 made binary); None takes 0, so that any label
        above 0 is relevant, as LightGBM's MAP reads them. Unused without ``groups``.
    tol : float, default 1e-3
        Stopping tolerance (>= 0) in units of the loss (see [qs.ssvm][]).
    max_iter : int, default 1000
        Cap on solver iterations (>= 1).
    fit_intercept : bool, default True
        For "01": learn a bias through an appended constant feature of value 1, regularised
        like the weights (liblinear's convention, so that it matches LinearSVC). For "ap"
        and "ndcg", which do not change when every score shifts by the same amount, the
        structured SVM cannot learn a bias: ``intercept_`` is set after training to the
        threshold on the training scores that makes the fewest training errors. It moves
        the boundary of ``predict`` only, never the ranking, AP or NDCG.
    qp_solver : str, default "daqp"
        ``qpsolvers`` backend of the cutting-plane dual QP (ignored by the other solvers).
    random_state : int, RandomState or None, default None
        Seeds the order in which block-coordinate Frank-Wolfe visits the queries (None:
        seed 0, so that a fit repeats). It has no effect on the other solvers, which are
        deterministic (full batch, no random initialisation or sampling).
    lai_callback : callable or None, default None
        Called as ``lai_callback(scores, labels)`` with the inputs of every timed LAI call of
        a fit without ``groups`` (see `qs.ssvm.cutting_plane`): a recorder of the
        calls, to time them again apart from training. A fit over queries refuses it.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features)
        The weights.
    intercept_ : ndarray of shape (1,)
        The bias (see ``fit_intercept``).
    classes_ : ndarray of shape (2,)
        The class labels; ``classes_[1]`` is the positive class.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen in ``fit``, when ``X`` has string column names.
    n_iter_ : int
        Solver iterations.
    converged_ : bool
        Whether the tolerance was met before ``max_iter`` (when not, ``fit`` warns with
        scikit-learn's ``ConvergenceWarning``).
    objective_curve_ : ndarray
        Primal objective per iteration (per pass over the queries for block-coordinate
        Frank-Wolfe).
    gap_curve_ : ndarray
        Duality gap per iteration (per pass likewise).
    solver_ : str
        The solver that ran ("auto" resolved).
    n_queries_ : int
        For a fit over queries, the queries that trained; 1 without ``groups``.
    n_queries_skipped_ : int
        For a fit over queries, those that did not (no relevant or no non-relevant
        document; ``fit`` warns once when there are any); 0 without ``groups``.
    relevance_threshold_ : float or None
        The relevance threshold used; None without ``groups``.
    lai_times_ : ndarray
        Wall time (s) of every LAI call, without ``lai_compile_time_``.
    lai_calls_ : int
        Number of LAI calls.
    lai_time_ : float
        Sum of ``lai_times_`` (s).
    lai_time_per_call_ : float
        Mean of ``lai_times_`` (s).
    lai_compile_time_ : float
        What loading or compiling the kernels added to the first LAI call (s).

    See Also
    --------
    qs.ssvm.cutting_plane : The default solver.
    LatentRankSVM : The latent SVM on bags of boxes.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.estimators import RankSVM
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1],
    ...               [0.9, 0.0]])
    >>> y = np.array([1, 1, 0, 0, 0, 1])
    >>> model = RankSVM(loss="ap", C=10.0).fit(X, y)
    >>> model.predict(X).tolist()
    [1, 1, 0, 0, 0, 1]
    >>> round(model.score(X, y), 4)
    1.0
    """

    def __init__(
        self,
        *,
        loss: Literal["ap", "ndcg", "01"] = "ap",
        inference: str = "auto",
        solver: str = "auto",
        C: float = 1.0,
        tol: float = 1e-3,
        max_iter: int = 1000,
        fit_intercept: bool = True,
        qp_solver: str = "daqp",
        relevance_threshold: float | None = None,
        random_state: int | np.random.RandomState | None = None,
        lai_callback: Callable[[np.ndarray, np.ndarray], object] | None = None,
    ) -> None:
        self.loss = loss
        self.inference = inference
        self.solver = solver
        self.C = C
        self.relevance_threshold = relevance_threshold
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.qp_solver = qp_solver
        self.random_state = random_state
        self.lai_callback = lai_callback

    def fit(self, X: Any, y: npt.ArrayLike, groups: npt.ArrayLike | None = None) -> Self:
        """Train the SVM.

        Parameters
        ----------
        X : array_like or scipy.sparse matrix of shape (n_samples, n_features)
            The features, read as float64; with ``groups``, dense float32 features are
            kept float32 (each score and each sum of the training taken in float64), so
            that training holds no float64 copy of them.
        y : array_like of shape (n_samples,)
            Without ``groups``: two classes, the larger label the positive one; the whole
            set is one ranking. With ``groups``: numeric relevance grades, a document
            relevant where its grade is above ``relevance_threshold``.
        groups : array_like of shape (n_samples,) or None, default None
            One query id per sample (as scikit-learn's ``GroupKFold`` takes them): each
            query is then one structured example (SVM-map's setting), and ``predict``
            tells relevant (1) from not (0). ``X`` may then be a Dask array chunked by rows
            into partitions of whole queries: it trains out of core
            (`qs.ssvm.out_of_core`).

        Returns
        -------
        self : RankSVM
            The fitted estimator.

        Raises
        ------
        ValueError
            On a bad parameter, ``y`` without exactly two classes, or ``groups`` not of
            ``y``'s shape (or with loss "01").
        TypeError
            If ``fit_intercept`` is not a bool.

        Warns
        -----
        ConvergenceWarning
            When the solver stops at ``max_iter`` before meeting ``tol``.
        UserWarning
            When some queries have no relevant or no non-relevant document: they add
            nothing to training (``n_queries_skipped_``).

        Examples
        --------
        >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1],
        ...               [0.9, 0.0]])
        >>> y = np.array([1, 1, 0, 0, 0, 1])
        >>> model = RankSVM(C=10.0).fit(X, y)
        >>> model.classes_.tolist(), model.coef_.shape
        ([0, 1], (1, 2))
        """
        self._check_params()
        if is_dask_collection(X):
            return self._fit_dask(X, y, groups)
        # over queries, float32 features stay float32 (`qs.ssvm.queries` reads them so)
        dtype = np.float64 if groups is None else [np.float64, np.float32]
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=dtype)
        if groups is not None:
            return self._fit_queries(X, y, groups)
        self.n_queries_, self.n_queries_skipped_, self.relevance_threshold_ = 1, 0, None
        check_classification_targets(y)
        self.classes_, y_index = np.unique(y, return_inverse=True)
        if self.classes_.size != 2:
            raise ValueError(
                f"Only binary classification is supported: RankSVM needs y with exactly 2 "
                f"classes (the larger label is the positive class); got {self.classes_.size} "
                f"class(es): {self.classes_.tolist()}."
            )
        is_pos = y_index == 1
        kwargs = {
            "C": self.C,
            "loss": self.loss,
            "method": self.inference,
            "tol": self.tol,
            "max_iter": self.max_iter,
            "lai_callback": self.lai_callback,
        }
        self.solver_ = {"auto": "cutting_plane", "block_frank_wolfe": "frank_wolfe"}.get(
            self.solver, self.solver
        )
        if self.solver_ == "cutting_plane":
            kwargs["qp_solver"] = self.qp_solver
        bias_column = self.fit_intercept and self.loss == "01"
        res = SOLVERS[self.solver_](append_ones(X) if bias_column else X, is_pos, **kwargs)
        return self._set_fitted(res, X, is_pos, bias_column)

    def _fit_queries(self, X, y, groups):
        """`fit` over the queries ``groups`` names (`qs.ssvm.queries`)."""
        if self.loss == "01":
            raise ValueError(
                "loss '01' has no queries: fit it without groups, or choose loss 'ap' or 'ndcg'."
            )
        if self.lai_callback is not None:
            raise ValueError("lai_callback applies to a fit without groups (one ranking).")
        groups = np.asarray(groups)
        if groups.shape != y.shape:
            raise ValueError(
                f"groups must hold one query id per sample ({y.size}); got shape {groups.shape}."
            )
        is_pos = self._relevant(y)
        order, offsets = query_offsets(groups)
        Xq, pos_q = (X, is_pos) if order is None else (X[order], is_pos[order])
        # "auto" over dense queries: block-coordinate Frank-Wolfe (docs/training.md says why)
        self.solver_ = (
            "block_frank_wolfe"
            if self.solver == "auto" and not sp.issparse(X)
            else "cutting_plane"
            if self.solver == "auto"
            else self.solver
        )
        res, prob = solve_queries(
            Xq,
            pos_q,
            offsets,
            solver=self.solver_,
            C=self.C,
            loss=self.loss,
            method=self.inference,
            tol=self.tol,
            max_iter=self.max_iter,
            qp_solver=self.qp_solver,
            random_state=self.random_state,
        )
        self.n_queries_ = prob.n_queries
        self.n_queries_skipped_ = offsets.size - 1 - prob.n_queries
        if self.n_queries_skipped_:
            warnings.warn(
                f"{self.n_queries_skipped_} of {offsets.size - 1} queries have no "
                f"relevant or no non-relevant document (relevant: label > "
                f"{self.relevance_threshold_:g}) and add nothing to training.",
                UserWarning,
                stacklevel=3,
            )
        return self._set_fitted(res, X, is_pos, False)

    def _relevant(self, y):
        """The relevant documents of grades ``y`` (above the threshold), which is set."""
        if y.dtype.kind not in "fiub":
            raise ValueError(f"with groups, y holds numeric relevance grades; got dtype {y.dtype}.")
        threshold = 0.0 if self.relevance_threshold is None else self.relevance_threshold
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, numbers.Real)
            or not np.isfinite(threshold)
        ):
            raise ValueError(
                f"relevance_threshold must be None or a finite number; got "
                f"{self.relevance_threshold!r}."
            )
        self.relevance_threshold_ = threshold
        self.classes_ = np.array([0, 1])
        return y > threshold

    def _fit_dask(self, X, y, groups):
        """`fit` over the queries of a Dask array ``X`` out of core
        (`qs.ssvm.out_of_core`): the model of the in-memory fit with the solver
        "cutting_plane" (what "auto" picks here), to rounding."""
        if groups is None:
            raise ValueError("a Dask array X trains over queries: give groups.")
        if self.loss == "01":
            raise ValueError(
                "loss '01' has no queries: fit it without groups, or choose loss 'ap' or 'ndcg'."
            )
        if self.solver not in ("auto",) + DASK_SOLVERS:
            raise ValueError(
                f"out of core, solver must be 'auto' or one of "
                f"{list(DASK_SOLVERS)}; got {self.solver!r}."
            )
        y = y.compute() if is_dask_collection(y) else np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(
                f"y must hold one grade per document ({X.shape[0]}); got shape {y.shape}."
            )
        is_pos = self._relevant(y)
        self.solver_ = "cutting_plane" if self.solver == "auto" else self.solver
        res, prob = solve_dask(
            X,
            is_pos,
            groups,
            solver=self.solver_,
            C=self.C,
            loss=self.loss,
            method=self.inference,
            tol=self.tol,
            max_iter=self.max_iter,
            qp_solver=self.qp_solver,
        )
        self.n_features_in_ = X.shape[1]
        self.n_queries_ = prob.n_queries
        self.n_queries_skipped_ = prob.n_queries_all - prob.n_queries
        if self.n_queries_skipped_:
            warnings.warn(
                f"{self.n_queries_skipped_} of {prob.n_queries_all} queries have no "
                f"relevant or no non-relevant document (relevant: label > "
                f"{self.relevance_threshold_:g}) and add nothing to training.",
                UserWarning,
                stacklevel=3,
            )
        return self._set_fitted(res, prob, is_pos, False)

    def _set_fitted(self, res, X, is_pos, bias_column):
        """The fitted attributes from the solver's result ``res``."""
        w = res.w[:-1] if bias_column else res.w
        self.coef_ = w[None, :]
        if bias_column:
            self.intercept_ = res.w[-1:].copy()
        elif self.fit_intercept:
            scores = X.scores(w) if isinstance(X, DaskQueryProblem) else query_scores(X, w)
            self.intercept_ = np.array([-_fewest_errors_threshold(scores, is_pos)])
        else:
            self.intercept_ = np.zeros(1)
        self.n_iter_ = res.n_iter
        self.converged_ = res.converged
        if not res.converged:
            warnings.warn(
                f"{self.solver_} stopped at max_iter={self.max_iter} before meeting "
                f"tol={self.tol:g} (duality gap {res.gap[-1]:.3g}); the weights may "
                "be far from optimal: raise max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.objective_curve_ = res.objective
        self.gap_curve_ = res.gap
        self.lai_times_ = res.lai_times
        self.lai_calls_ = res.lai_calls
        self.lai_time_ = res.lai_time
        self.lai_time_per_call_ = res.lai_time_per_call
        self.lai_compile_time_ = res.lai_compile_time
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Score of each sample, ``X @ coef_[0] + intercept_[0]``; higher ranks first.

        Parameters
        ----------
        X : array_like or scipy.sparse matrix of shape (n_samples, n_features)
            The features.

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores.

        Examples
        --------
        >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1],
        ...               [0.9, 0.0]])
        >>> y = np.array([1, 1, 0, 0, 0, 1])
        >>> model = RankSVM(C=10.0).fit(X, y)
        >>> np.argsort(-model.decision_function(X)).tolist()  # the positives first
        [0, 1, 5, 2, 3, 4]
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return np.asarray(X @ self.coef_[0]).ravel() + self.intercept_[0]

    def predict(self, X: Any) -> np.ndarray:
        """``classes_[1]`` where the decision function is positive, else ``classes_[0]``.

        Parameters
        ----------
        X : array_like or scipy.sparse matrix of shape (n_samples, n_features)
            The features.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted class of each sample.

        Examples
        --------
        >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1],
        ...               [0.9, 0.0]])
        >>> y = np.array([1, 1, 0, 0, 0, 1])
        >>> RankSVM(C=10.0).fit(X, np.where(y == 1, "yes", "no")).predict(X[:3]).tolist()
        ['yes', 'yes', 'no']
        """
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(np.intp)]

    def score(self, X: Any, y: npt.ArrayLike) -> float:
        """AP (loss "ap" or "01") or NDCG (loss "ndcg") of the decision function's ranking.

        Parameters
        ----------
        X : array_like or scipy.sparse matrix of shape (n_samples, n_features)
            The features.
        y : array_like of shape (n_samples,)
            The true labels: ``classes_[1]`` is the relevant class (after a fit over
            queries: the grades above ``relevance_threshold_``).

        Returns
        -------
        float
            The metric; higher is better.

        Examples
        --------
        >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1],
        ...               [0.9, 0.0]])
        >>> y = np.array([1, 1, 0, 0, 0, 1])
        >>> RankSVM(loss="ndcg", C=10.0).fit(X, y).score(X, y)
        1.0
        """
        check_is_fitted(self)
        y = np.asarray(y)
        relevant = (
            y == self.classes_[1]
            if self.relevance_threshold_ is None
            else y > self.relevance_threshold_
        )
        return _METRICS[self.loss](relevant, self.decision_function(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags

    def _check_params(self):
        """The string parameters; C, tol and max_iter are checked by the solver."""
        if self.loss not in _METRICS:
            raise ValueError(f"loss must be one of {sorted(_METRICS)}; got {self.loss!r}.")
        if not isinstance(self.inference, str) or self.loss not in METHODS.get(self.inference, ()):
            allowed = sorted(m for m, losses in METHODS.items() if self.loss in losses)
            raise ValueError(
                f"inference {self.inference!r} does not apply to loss "
                f"{self.loss!r}; methods for it: {allowed}."
            )
        solvers = {"auto", *SOLVERS, *QUERY_SOLVERS}
        if self.solver not in solvers:
            raise ValueError(f"solver must be one of {sorted(solvers)}; got {self.solver!r}.")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be True or False; got {self.fit_intercept!r}.")


def append_ones(X: Any) -> Any:
    """``X`` with a constant feature of ones appended (the bias feature), in ``X``'s dtype.

    Parameters
    ----------
    X : ndarray, scipy.sparse matrix or dask array
        A matrix of shape (n_samples, d), dense or sparse, or padded bags of shape
        (n_images, K_max, d), NumPy or Dask.

    Returns
    -------
    ndarray, scipy.sparse CSR matrix or dask array
        ``X`` with one more feature, of value 1 on every row or box: a sparse matrix comes
        back in CSR, a Dask array gets it block by block, lazily.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.estimators import append_ones
    >>> append_ones(np.array([[2.0, 3.0], [4.0, 5.0]])).tolist()
    [[2.0, 3.0, 1.0], [4.0, 5.0, 1.0]]
    """
    if X.ndim == 3 and not isinstance(X, np.ndarray):
        import dask.array as da

        ones = da.ones(X.shape[:2] + (1,), dtype=X.dtype, chunks=X.chunks[:2] + ((1,),))
        return da.concatenate([X, ones], axis=2)
    ones = np.ones(X.shape[:-1] + (1,), dtype=X.dtype)
    if sp.issparse(X):
        return sp.hstack([X, ones], format="csr", dtype=X.dtype)
    return np.concatenate([X, ones], axis=-1)


def _fewest_errors_threshold(scores: np.ndarray, is_pos: np.ndarray) -> float:
    """Threshold ``t`` such that predicting positive where ``score > t`` makes the fewest
    errors on (scores, is_pos); the midpoint between the neighbouring distinct scores, and the
    highest such cut among equally good ones."""
    order = np.argsort(-scores, kind="stable")
    s, pos = scores[order], is_pos[order]
    # errors when the top k are called positive: negatives among them + positives below them
    errors = np.concatenate([[0], np.cumsum(~pos) - np.cumsum(pos)]) + np.count_nonzero(pos)
    # a cut is possible before the first sample, after the last, and between distinct scores
    cuttable = np.concatenate([[True], s[:-1] > s[1:], [True]])
    k = int(np.flatnonzero(cuttable)[np.argmin(errors[cuttable])])
    if k == 0:
        return s[0]
    if k == s.size:
        return s[-1] - max(1.0, abs(s[-1]))
    return 0.5 * (s[k - 1] + s[k])


class LatentRankSVM(BaseEstimator):
    """Latent structured SVM for bags of boxes (weakly supervised detection).

    The latent AP-SVM (``loss="ap"``) or the latent 0-1 SVM (``loss="01"``) of
    `qs.ssvm.latent.latent_cutting_plane`, in scikit-learn style. The fitted model scores
    boxes, and an image by its best box. The defaults are those of the released latent
    AP-SVM.

    Parameters
    ----------
    loss : str, default "ap"
        "ap", "ndcg" or "01".
    inference : str, default "auto"
        LAI method (see [qs.inference.lai][]); "auto" is "zero_one" for loss "01".
    C : float, default 100.0
        Weight of the slack (> 0).
    tol : float, default 1e-3
        Tolerance of the inner solves and of the latent objective's decrease (in units
        of ``C``).
    max_iter : int, default 20000
        Cap on the cutting-plane iterations of one inner solve.
    max_outer : int, default 400
        Cap on the outer (CCCP) steps.
    min_outer : int, default 2
        Outer steps made before the objective may count as settled.
    init : str or array_like, default "random"
        "random" (a seeded random box of each positive image) or an int array of the first
        box of each positive image.
    fit_intercept : bool, default True
        For "01", a constant feature of value 1 carries the bias (the 0-1 hinge needs
        one); a ranking does not change with a bias, so "ap" and "ndcg" learn none.
    qp_solver : str, default "daqp"
        ``qpsolvers`` backend of the cutting plane's dual QP.
    scheduler : str, distributed.Client or None, default None
        Where padded Dask or zarr bags are scored (see [qs.detection.score_bags][]).
    working_set : int or None, default None
        The boxes per image kept in memory between passes over every box (exact; see
        `qs.ssvm.latent.latent_cutting_plane`); None keeps none.
    random_state : int, default 0
        Seed of the random initial boxes.
    lai_callback : callable or None, default None
        Called as ``lai_callback(scores, labels)`` with the inputs of every LAI call,
        before it (a recorder, to replay a training's calls). The arrays may be reused by
        later calls: keep copies.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The weights.
    intercept_ : float
        The bias (0.0 unless loss "01" with ``fit_intercept``).
    n_features_in_ : int
        Number of features per box seen in ``fit``.
    pos_boxes_ : ndarray
        The imputed box of each positive training image.
    objective_curve_ : ndarray
        Latent objective per outer step.
    n_outer_ : int
        Outer steps made.
    n_iter_ : int
        Cutting-plane iterations in all.
    converged_ : bool
        Whether the objective settled (when not, ``fit`` warned with scikit-learn's
        ``ConvergenceWarning``).
    lai_times_ : ndarray
        Wall time (s) of every LAI call.
    lai_calls_ : int
        Number of LAI calls.
    lai_time_ : float
        Their total wall time (s).
    passes_ : int
        Passes over every box.

    See Also
    --------
    RankSVM : The SVM on one ranking of samples (no latent boxes).

    Examples
    --------
    Three images of two boxes each, flat with their offsets; image 0 is positive through
    its second box.

    >>> import numpy as np
    >>> from qs.estimators import LatentRankSVM
    >>> X = np.array([[0.0, 1.0], [2.0, 0.0], [0.1, 0.9], [0.0, 0.5], [0.2, 1.0],
    ...               [0.5, 0.5]])
    >>> offsets = np.array([0, 2, 4, 6])
    >>> y = np.array([1, 0, 0])
    >>> model = LatentRankSVM(C=10.0).fit(X, y, offsets=offsets)
    >>> model.pos_boxes_.tolist()
    [1]
    >>> round(model.score(X, y, offsets=offsets), 4)
    1.0
    """

    def __init__(
        self,
        *,
        loss: Literal["ap", "ndcg", "01"] = "ap",
        inference: str = "auto",
        C: float = 100.0,
        tol: float = 1e-3,
        max_iter: int = 20000,
        max_outer: int = 400,
        min_outer: int = 2,
        init: Any = "random",
        fit_intercept: bool = True,
        qp_solver: str = "daqp",
        scheduler: Any = None,
        working_set: int | None = None,
        random_state: Any = 0,
        lai_callback: Callable[[np.ndarray, np.ndarray], object] | None = None,
    ) -> None:
        self.loss = loss
        self.inference = inference
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.max_outer = max_outer
        self.min_outer = min_outer
        self.init = init
        self.fit_intercept = fit_intercept
        self.qp_solver = qp_solver
        self.scheduler = scheduler
        self.working_set = working_set
        self.random_state = random_state
        self.lai_callback = lai_callback

    def fit(
        self,
        X: Any,
        y: npt.ArrayLike,
        *,
        offsets: npt.ArrayLike | None = None,
        counts: npt.ArrayLike | None = None,
    ) -> Self:
        """Train on the box features ``X`` and the image labels ``y``.

        Parameters
        ----------
        X : ndarray, dask array or zarr array
            Flat, of shape (n_boxes, n_features): the features of every box, image after
            image (with ``offsets``); or padded, of shape (n_images, K_max, n_features), a
            NumPy, Dask or zarr array scored out of core block by block (with ``counts``).
        y : array_like of shape (n_images,)
            One label per image: 1/True positive, 0/-1/False negative.
        offsets : array_like of shape (n_images + 1,) or None, default None
            Bounds of each image's boxes in flat ``X``.
        counts : array_like of shape (n_images,) or None, default None
            The valid boxes of each image of padded ``X``.

        Returns
        -------
        self : LatentRankSVM
            The fitted estimator.

        Raises
        ------
        ValueError
            On an unknown loss, both or neither of ``offsets`` and ``counts``, or bags that
            do not fit ``X``.

        Warns
        -----
        ConvergenceWarning
            When the latent objective did not settle within ``max_outer`` steps.

        Examples
        --------
        >>> X = np.array([[0.0, 1.0], [2.0, 0.0], [0.1, 0.9], [0.0, 0.5], [0.2, 1.0],
        ...               [0.5, 0.5]])
        >>> offsets, y = np.array([0, 2, 4, 6]), np.array([1, 0, 0])
        >>> model = LatentRankSVM(C=10.0).fit(X, y, offsets=offsets)
        >>> model.pos_boxes_.tolist()  # the positive image's chosen box
        [1]
        """
        if self.loss not in _METRICS:
            raise ValueError(f"loss must be one of {sorted(_METRICS)}; got {self.loss!r}.")
        method = "zero_one" if self.loss == "01" and self.inference == "auto" else self.inference
        X, bounds = _check_layout(X, offsets, counts)
        bias = self.fit_intercept and self.loss == "01"
        res = latent_cutting_plane(
            append_ones(X) if bias else X,
            bounds,
            y,
            C=self.C,
            loss=self.loss,
            method=method,
            tol=self.tol,
            max_iter=self.max_iter,
            max_outer=self.max_outer,
            min_outer=self.min_outer,
            init=self.init,
            random_state=self.random_state,
            qp_solver=self.qp_solver,
            scheduler=self.scheduler,
            working_set=self.working_set,
            lai_callback=self.lai_callback,
        )
        self.coef_ = res.w[:-1] if bias else res.w
        self.intercept_ = float(res.w[-1]) if bias else 0.0
        self.n_features_in_ = self.coef_.size
        self.pos_boxes_ = res.pos_boxes
        self.objective_curve_ = res.objective
        self.n_outer_ = res.n_outer
        self.n_iter_ = int(sum(r.n_iter for r in res.inner))
        self.converged_ = res.converged
        if not res.converged:
            warnings.warn(
                f"the latent objective did not settle (decrease below C x tol) "
                f"within max_outer={self.max_outer} outer steps; raise max_outer or "
                "tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.lai_times_ = res.lai_times
        self.lai_calls_ = res.lai_calls
        self.lai_time_ = res.lai_time
        self.passes_ = res.passes
        return self

    def box_scores(self, X: Any) -> np.ndarray:
        """Score of every box, ``X @ coef_ + intercept_``.

        Parameters
        ----------
        X : array_like of shape (n_boxes, n_features)
            Box features.

        Returns
        -------
        ndarray of shape (n_boxes,)
            The scores.

        Raises
        ------
        ValueError
            If ``X`` has another number of features than the fitted model.

        Examples
        --------
        >>> X = np.array([[0.0, 1.0], [2.0, 0.0], [0.1, 0.9], [0.0, 0.5], [0.2, 1.0],
        ...               [0.5, 0.5]])
        >>> offsets, y = np.array([0, 2, 4, 6]), np.array([1, 0, 0])
        >>> model = LatentRankSVM(C=10.0).fit(X, y, offsets=offsets)
        >>> int(np.argmax(model.box_scores(X)))  # the positive image's second box
        1
        """
        check_is_fitted(self)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but the model was fitted with {self.n_features_in_}."
            )
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def decision_function(
        self, X: Any, *, offsets: npt.ArrayLike | None = None, counts: npt.ArrayLike | None = None
    ) -> np.ndarray:
        """Score of each image: that of its best box.

        Parameters
        ----------
        X : ndarray, dask array or zarr array
            Box features, flat or padded as `fit` takes them.
        offsets : array_like of shape (n_images + 1,) or None, default None
            Bounds of each image's boxes in flat ``X``.
        counts : array_like of shape (n_images,) or None, default None
            The valid boxes of each image of padded ``X``.

        Returns
        -------
        ndarray of shape (n_images,)
            The score of each image.

        Examples
        --------
        >>> X = np.array([[0.0, 1.0], [2.0, 0.0], [0.1, 0.9], [0.0, 0.5], [0.2, 1.0],
        ...               [0.5, 0.5]])
        >>> offsets, y = np.array([0, 2, 4, 6]), np.array([1, 0, 0])
        >>> model = LatentRankSVM(C=10.0).fit(X, y, offsets=offsets)
        >>> flat = model.decision_function(X, offsets=offsets)
        >>> padded = model.decision_function(X.reshape(3, 2, 2), counts=[2, 2, 2])
        >>> int(np.argmax(flat)), np.allclose(flat, padded)
        (0, True)
        """
        X, bounds = _check_layout(X, offsets, counts)
        if X.ndim == 3:
            check_is_fitted(self)
            if X.shape[2] != self.n_features_in_:
                raise ValueError(
                    f"X has {X.shape[2]} features, but the model was fitted "
                    f"with {self.n_features_in_}."
                )
            best = score_bags(X, bounds, self.coef_[:, None], scheduler=self.scheduler)
            return best.score[:, 0] + self.intercept_
        scores = self.box_scores(X)
        return scores[bag_argmax(scores, bounds)]

    def score(
        self,
        X: Any,
        y: npt.ArrayLike,
        *,
        offsets: npt.ArrayLike | None = None,
        counts: npt.ArrayLike | None = None,
    ) -> float:
        """AP (or NDCG for loss "ndcg") of the images ranked by their best box.

        Parameters
        ----------
        X : ndarray, dask array or zarr array
            Box features, flat or padded as `fit` takes them.
        y : array_like of shape (n_images,)
            One label per image: 1/True positive.
        offsets : array_like of shape (n_images + 1,) or None, default None
            Bounds of each image's boxes in flat ``X``.
        counts : array_like of shape (n_images,) or None, default None
            The valid boxes of each image of padded ``X``.

        Returns
        -------
        float
            The metric; higher is better.

        Examples
        --------
        >>> X = np.array([[0.0, 1.0], [2.0, 0.0], [0.1, 0.9], [0.0, 0.5], [0.2, 1.0],
        ...               [0.5, 0.5]])
        >>> offsets, y = np.array([0, 2, 4, 6]), np.array([1, 0, 0])
        >>> model = LatentRankSVM(C=10.0).fit(X, y, offsets=offsets)
        >>> model.score(X.reshape(3, 2, 2), y, counts=[2, 2, 2])
        1.0
        """
        scores = self.decision_function(X, offsets=offsets, counts=counts)
        relevant = as_positive_mask(y, scores.size).astype(bool)
        return _METRICS[self.loss](relevant, scores)


def _check_layout(X: Any, offsets: Any, counts: Any) -> tuple[Any, np.ndarray]:
    """Validated bags and their bounds: flat ``X`` with ``offsets``, or padded with ``counts``."""
    if (offsets is None) == (counts is None):
        raise ValueError(
            "give the bags' offsets (flat X, n_boxes x d) or their counts "
            "(padded X, n_images x K_max x d), not both or neither."
        )
    if counts is not None:
        return check_padded(X, counts)
    return check_bags(X, offsets)
