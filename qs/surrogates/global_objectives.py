"""Global objectives (Eban et al., "Large-scale learning with global non-decomposable
objectives", Eban et al., AISTATS 2017) as torch losses.

Every objective is built from two per-sample bounds at a threshold ``b`` (Section 2):
``tp >= tp_l = sum_{positives} (1 - l(f - b))`` and ``fp <= fp_u = sum_{negatives}
l(-(f - b))``, with ``l`` the hinge ``max(0, 1 - z)`` or the logistic loss
``log(1 + exp(-z)) / log 2`` (``surrogate="xent"``; dividing by log 2 makes it >= 1 at
``z <= 0``, so the bounds hold for it too). A constrained objective becomes a Lagrangian
whose minimum over the model and the thresholds and maximum over the multipliers
``lambda >= 0`` is the bound (a saddle point, eq. 5).

Each loss is an ``nn.Module`` owning its thresholds and multipliers as parameters: give
``loss.parameters()`` to the optimizer with the model's. The multipliers are ascended as the
released TensorFlow code does it: the parameter is ``v``, the multiplier ``lambda = |v|``
(>= 0), and the forward pass uses ``(1 + r) * stop_grad(lambda) - r * lambda`` (``r`` the
``dual_rate_factor``, default 0.1), whose value is ``lambda`` and whose gradient is ``-r``
times the true one. So one descent step of the optimizer is descent on the model and the
thresholds and ascent, ``r`` times slower, on the multipliers. Defaults follow the released
code: 20 anchors, dual rate factor 0.1, multipliers starting at 1, thresholds at 0.

Scores are (n,) or (Q, n), one row per query (a class against the rest), as
`qs.torch.rank_hinge_loss` takes them with ``dim=-1``; labels the same shape (1/True
positive, 0/-1/False negative). Losses are per-sample means (the Lagrangians divided by
n), so mini-batches give unbiased estimates; the class prior ``|Y+| / n`` in the constant
terms is the batch's own.
The result is the mean over the queries. Needs the ``[torch]`` extra.
"""

import math
from collections.abc import Sequence

import numpy.typing as npt
import torch
from torch import nn
from torch.nn import functional as F

from qs.validation import as_query_rows

__all__ = [
    "SURROGATES",
    "AUCPRLoss",
    "FBetaLoss",
    "PrecisionAtRecallLoss",
    "ROCAUCLoss",
    "RecallAtPrecisionLoss",
    "false_positives_upper_bound",
    "true_positives_lower_bound",
]

SURROGATES = ("hinge", "xent")
_LOG2 = math.log(2.0)


def _surrogate(z: torch.Tensor, surrogate: str) -> torch.Tensor:
    """The upper bound of the 0-1 loss ``1{z <= 0}`` at margin ``z``: >= 1 where z <= 0."""
    if surrogate == "hinge":
        return F.relu(1.0 - z)
    return F.softplus(-z) / _LOG2


def true_positives_lower_bound(
    scores: torch.Tensor,
    labels: torch.Tensor | npt.ArrayLike,
    threshold: float | torch.Tensor = 0.0,
    surrogate: str = "hinge",
) -> torch.Tensor:
    """``tp_l = sum over positives of 1 - l(f - b)`` per query.

    A lower bound on the true positives of the rule ``f >= b``.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        The scores ``f``, one row per query.
    labels : Tensor or array_like of the scores' shape
        1/True positive, 0/-1/False negative.
    threshold : float or Tensor of shape (Q,), default 0.0
        The threshold ``b``, one for every query or one per query.
    surrogate : str, default "hinge"
        "hinge" or "xent".

    Returns
    -------
    Tensor of shape (Q,)
        The bound per query.

    Raises
    ------
    ValueError
        On an unknown surrogate or bad scores and labels.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.global_objectives import true_positives_lower_bound
    >>> true_positives_lower_bound(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0]).tolist()
    [2.0]
    """
    _check_surrogate(surrogate)
    scores, pos = as_query_rows(scores, labels)
    return ((1.0 - _surrogate(scores - _column(threshold, scores), surrogate)) * pos).sum(-1)


def false_positives_upper_bound(
    scores: torch.Tensor,
    labels: torch.Tensor | npt.ArrayLike,
    threshold: float | torch.Tensor = 0.0,
    surrogate: str = "hinge",
) -> torch.Tensor:
    """``fp_u = sum over negatives of l(-(f - b))`` per query.

    An upper bound on the false positives of the rule ``f >= b``.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        The scores ``f``, one row per query.
    labels : Tensor or array_like of the scores' shape
        1/True positive, 0/-1/False negative.
    threshold : float or Tensor of shape (Q,), default 0.0
        The threshold ``b``, one for every query or one per query.
    surrogate : str, default "hinge"
        "hinge" or "xent".

    Returns
    -------
    Tensor of shape (Q,)
        The bound per query.

    Raises
    ------
    ValueError
        On an unknown surrogate or bad scores and labels.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.global_objectives import false_positives_upper_bound
    >>> false_positives_upper_bound(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0]).tolist()
    [1.5]
    """
    _check_surrogate(surrogate)
    scores, pos = as_query_rows(scores, labels)
    return (_surrogate(_column(threshold, scores) - scores, surrogate) * ~pos).sum(-1)


class _GlobalObjective(nn.Module):
    """Shared parts: validation, thresholds and multipliers of shape (num_labels, K)."""

    def __init__(
        self, num_labels: int, num_anchors: int, surrogate: str, dual_rate_factor: float
    ) -> None:
        super().__init__()
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise ValueError(f"num_labels must be an integer >= 1; got {num_labels!r}.")
        if isinstance(num_anchors, bool) or not isinstance(num_anchors, int) or num_anchors < 1:
            raise ValueError(f"num_anchors must be an integer >= 1; got {num_anchors!r}.")
        _check_surrogate(surrogate)
        if not (
            isinstance(dual_rate_factor, (int, float))
            and dual_rate_factor > 0
            and math.isfinite(dual_rate_factor)
        ):
            raise ValueError(
                f"dual_rate_factor must be a finite number > 0; got {dual_rate_factor!r}."
            )
        self.num_labels, self.surrogate = num_labels, surrogate
        self.dual_rate_factor = float(dual_rate_factor)
        self.thresholds = nn.Parameter(torch.zeros(num_labels, num_anchors))
        self.multipliers = nn.Parameter(torch.ones(num_labels, num_anchors))

    def lambdas(self) -> torch.Tensor:
        """The multipliers ``|v| >= 0``, their gradient reversed and scaled by the dual rate
        factor (value unchanged)."""
        lam = self.multipliers.abs()
        r = self.dual_rate_factor
        return (1.0 + r) * lam.detach() - r * lam

    def _prepare(self, scores, labels):
        """(scores (Q, n, 1), positives (Q, n, 1), prior (Q, 1)); the trailing axis
        broadcasts against the anchors."""
        scores, pos = as_query_rows(scores, labels)
        if scores.shape[0] != self.num_labels:
            raise ValueError(
                f"this loss was built for {self.num_labels} queries "
                f"(num_labels); got scores of {scores.shape[0]}."
            )
        prior = pos.to(scores.dtype).mean(-1, keepdim=True)
        return scores[..., None], pos[..., None], prior

    def _losses(self, scores, pos):
        """l(f - b) of the positives and l(-(f - b)) of the negatives, each (Q, n, K)."""
        z = scores - self.thresholds[:, None, :].to(scores.dtype)
        return (_surrogate(z, self.surrogate) * pos, _surrogate(-z, self.surrogate) * ~pos)

    def decide(self, scores: torch.Tensor) -> torch.Tensor:
        """The classification rule ``f >= b`` of each anchor.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            The scores ``f``.

        Returns
        -------
        Tensor of shape (Q, n, K)
            True where a sample is classified positive at an anchor's threshold.
        """
        scores = scores if scores.ndim == 2 else scores[None]
        return scores[..., None] >= self.thresholds[:, None, :].detach()

    def extra_repr(self) -> str:
        return (
            f"num_labels={self.num_labels}, anchors={self.thresholds.shape[1]}, "
            f"surrogate={self.surrogate!r}, dual_rate_factor={self.dual_rate_factor:g}"
        )


class RecallAtPrecisionLoss(_GlobalObjective):
    """Maximise recall subject to precision >= ``target_precision`` (alpha; paper eq. 5).

    The loss is
    ``(1 + (1 - alpha) lambda) mean(y l+) + lambda alpha mean((1 - y) l-) - lambda (1 - alpha) pi``,
    the multiplier ascending while the precision bound ``(1 - alpha) tp_l >= alpha fp_u`` is
    violated.

    Parameters
    ----------
    target_precision : float or sequence of float
        The precision to reach, in (0, 1): one number, or one per query.
    num_labels : int, default 1
        Number of queries Q (rows of the scores), each with its own thresholds and
        multipliers.
    surrogate : str, default "xent"
        "hinge" or "xent" (the logistic loss divided by log 2).
    dual_rate_factor : float, default 0.1
        How many times slower than the descent the multipliers ascend (> 0).

    Raises
    ------
    ValueError
        On a target outside (0, 1) or a bad option.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.global_objectives import RecallAtPrecisionLoss
    >>> loss = RecallAtPrecisionLoss(0.8)
    >>> round(loss(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0]).item(), 4)
    0.462
    """

    alpha: torch.Tensor  # a buffer

    def __init__(
        self,
        target_precision: float | Sequence[float],
        num_labels: int = 1,
        surrogate: str = "xent",
        dual_rate_factor: float = 0.1,
    ) -> None:
        super().__init__(num_labels, 1, surrogate, dual_rate_factor)
        self.register_buffer("alpha", _targets(target_precision, num_labels, "target_precision"))

    def forward(self, scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike) -> torch.Tensor:
        """The loss, the mean over the queries.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            One row per query, Q = ``num_labels``.
        labels : Tensor or array_like of the scores' shape
            1/True positive, 0/-1/False negative.

        Returns
        -------
        Tensor
            A scalar.

        Examples
        --------
        >>> scores = torch.tensor([[2.0, 1.0, -1.0, 0.5], [0.5, -1.0, 1.0, 2.0]])  # 2 queries
        >>> round(RecallAtPrecisionLoss(0.8, num_labels=2)(scores, [[1, 1, 0, 0]] * 2).item(), 4)
        1.0641
        """
        scores, pos, prior = self._prepare(scores, labels)
        l_pos, l_neg = self._losses(scores, pos)
        lam, alpha = self.lambdas().to(scores.dtype), self.alpha[:, None].to(scores.dtype)
        value = (
            (1.0 + (1.0 - alpha) * lam) * l_pos.mean(1)
            + lam * alpha * l_neg.mean(1)
            - lam * (1.0 - alpha) * prior
        )
        return value.mean()


class PrecisionAtRecallLoss(_GlobalObjective):
    """Maximise precision subject to recall >= ``target_recall`` (beta).

    Minimise ``fp_u`` subject to ``tp_l >= beta |Y+|``, i.e.
    ``mean((1 - y) l-) + lambda (mean(y l+) - (1 - beta) pi)``.

    Parameters
    ----------
    target_recall : float or sequence of float
        The recall to reach, in (0, 1): one number, or one per query.
    num_labels : int, default 1
        Number of queries Q (rows of the scores), each with its own thresholds and
        multipliers.
    surrogate : str, default "xent"
        "hinge" or "xent" (the logistic loss divided by log 2).
    dual_rate_factor : float, default 0.1
        How many times slower than the descent the multipliers ascend (> 0).

    Raises
    ------
    ValueError
        On a target outside (0, 1) or a bad option.

    Examples
    --------
    >>> loss = PrecisionAtRecallLoss(0.8)
    >>> round(loss(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0]).item(), 4)
    0.5231
    """

    beta: torch.Tensor  # a buffer

    def __init__(
        self,
        target_recall: float | Sequence[float],
        num_labels: int = 1,
        surrogate: str = "xent",
        dual_rate_factor: float = 0.1,
    ) -> None:
        super().__init__(num_labels, 1, surrogate, dual_rate_factor)
        self.register_buffer("beta", _targets(target_recall, num_labels, "target_recall"))

    def forward(self, scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike) -> torch.Tensor:
        """The loss, the mean over the queries.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            One row per query, Q = ``num_labels``.
        labels : Tensor or array_like of the scores' shape
            1/True positive, 0/-1/False negative.

        Returns
        -------
        Tensor
            A scalar.

        Examples
        --------
        >>> scores = torch.tensor([[2.0, 1.0, -1.0, 0.5], [0.5, -1.0, 1.0, 2.0]])  # 2 queries
        >>> loss = PrecisionAtRecallLoss([0.5, 0.9], num_labels=2)  # a recall per query
        >>> round(loss(scores, [[1, 1, 0, 0]] * 2).item(), 4)
        1.1043
        """
        scores, pos, prior = self._prepare(scores, labels)
        l_pos, l_neg = self._losses(scores, pos)
        lam, beta = self.lambdas().to(scores.dtype), self.beta[:, None].to(scores.dtype)
        value = l_neg.mean(1) + lam * (l_pos.mean(1) - (1.0 - beta) * prior)
        return value.mean()


class AUCPRLoss(_GlobalObjective):
    """Area under the precision-recall curve as a Riemann sum of recall at precision over
    ``num_anchors`` precision anchors (paper eq. 9), each anchor with its own threshold and
    multiplier.

    Parameters
    ----------
    num_labels : int, default 1
        Number of queries Q (rows of the scores), each with its own thresholds and
        multipliers.
    num_anchors : int, default 20
        Number K of precision anchors: the interior points of K + 2 evenly spaced values
        over ``precision_range``, each weighted ``delta = width / (K + 1)``; the sum is
        divided by the range's width, so the weights add up to K / (K + 1).
    precision_range : tuple of float, default (0.0, 1.0)
        ``(low, high)`` with ``0 <= low < high <= 1``.
    surrogate : str, default "xent"
        "hinge" or "xent" (the logistic loss divided by log 2).
    dual_rate_factor : float, default 0.1
        How many times slower than the descent the multipliers ascend (> 0).

    Raises
    ------
    ValueError
        On a bad range or option.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.global_objectives import AUCPRLoss
    >>> loss = AUCPRLoss(num_anchors=5)
    >>> value = loss(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0])
    >>> round(value.item(), 4)
    0.1836
    >>> value.backward()
    >>> tuple(loss.thresholds.grad.shape)
    (1, 5)
    """

    anchors: torch.Tensor  # a buffer

    def __init__(
        self,
        num_labels: int = 1,
        num_anchors: int = 20,
        precision_range: tuple[float, float] = (0.0, 1.0),
        surrogate: str = "xent",
        dual_rate_factor: float = 0.1,
    ) -> None:
        super().__init__(num_labels, num_anchors, surrogate, dual_rate_factor)
        anchors, self.delta = _anchors(precision_range, num_anchors, "precision_range")
        self.register_buffer("anchors", anchors)

    def forward(self, scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike) -> torch.Tensor:
        """The loss, the mean over the queries.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            One row per query, Q = ``num_labels``.
        labels : Tensor or array_like of the scores' shape
            1/True positive, 0/-1/False negative.

        Returns
        -------
        Tensor
            A scalar.

        Examples
        --------
        >>> scores = torch.tensor([[2.0, 1.0, -1.0, 0.5], [0.5, -1.0, 1.0, 2.0]])  # 2 queries
        >>> round(AUCPRLoss(num_labels=2)(scores, [[1, 1, 0, 0]] * 2).item(), 4)
        0.7417
        """
        scores, pos, prior = self._prepare(scores, labels)
        l_pos, l_neg = self._losses(scores, pos)
        lam, alpha = self.lambdas().to(scores.dtype), self.anchors.to(scores.dtype)
        per_anchor = (
            (1.0 + (1.0 - alpha) * lam) * l_pos.mean(1)
            + lam * alpha * l_neg.mean(1)
            - lam * (1.0 - alpha) * prior
        )
        return (self.delta * per_anchor.sum(-1)).mean()


class ROCAUCLoss(_GlobalObjective):
    """Area under the ROC curve as a Riemann sum of the true-positive rate at a
    false-positive rate <= ``gamma_t`` over ``num_anchors`` anchors of ``fpr_range`` (the
    paper's "similar derivation" of Section 4): per anchor, maximise ``tp_l`` subject to
    ``fp_u <= gamma_t |Y-|``, i.e. ``mean(y l+) + lambda_t (mean((1 - y) l-) - gamma_t (1 - pi))``.
    (The released code's ``roc_auc_loss`` is the pairwise surrogate instead, with no
    multipliers.)

    Parameters
    ----------
    num_labels : int, default 1
        Number of queries Q (rows of the scores), each with its own thresholds and
        multipliers.
    num_anchors : int, default 20
        Number of false-positive-rate anchors (spaced as in `AUCPRLoss`).
    fpr_range : tuple of float, default (0.0, 1.0)
        ``(low, high)`` with ``0 <= low < high <= 1``.
    surrogate : str, default "xent"
        "hinge" or "xent" (the logistic loss divided by log 2).
    dual_rate_factor : float, default 0.1
        How many times slower than the descent the multipliers ascend (> 0).

    Raises
    ------
    ValueError
        On a bad range or option.

    Examples
    --------
    >>> loss = ROCAUCLoss()
    >>> round(loss(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0]).item(), 4)
    0.3553
    """

    anchors: torch.Tensor  # a buffer

    def __init__(
        self,
        num_labels: int = 1,
        num_anchors: int = 20,
        fpr_range: tuple[float, float] = (0.0, 1.0),
        surrogate: str = "xent",
        dual_rate_factor: float = 0.1,
    ) -> None:
        super().__init__(num_labels, num_anchors, surrogate, dual_rate_factor)
        anchors, self.delta = _anchors(fpr_range, num_anchors, "fpr_range")
        self.register_buffer("anchors", anchors)

    def forward(self, scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike) -> torch.Tensor:
        """The loss, the mean over the queries.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            One row per query, Q = ``num_labels``.
        labels : Tensor or array_like of the scores' shape
            1/True positive, 0/-1/False negative.

        Returns
        -------
        Tensor
            A scalar.

        Examples
        --------
        >>> scores = torch.tensor([[2.0, 1.0, -1.0, 0.5], [0.5, -1.0, 1.0, 2.0]])  # 2 queries
        >>> round(ROCAUCLoss(num_labels=2)(scores, [[1, 1, 0, 0]] * 2).item(), 4)
        0.9564
        """
        scores, pos, prior = self._prepare(scores, labels)
        l_pos, l_neg = self._losses(scores, pos)
        lam, gamma = self.lambdas().to(scores.dtype), self.anchors.to(scores.dtype)
        per_anchor = l_pos.mean(1) + lam * (l_neg.mean(1) - gamma * (1.0 - prior))
        return (self.delta * per_anchor.sum(-1)).mean()


class FBetaLoss(_GlobalObjective):
    """Maximise the F-beta bound ``(1 + beta^2) tp_l / (beta^2 |Y+| + tp_l + fp_u)``
    (Section 5) through the paper's linear-fractional transformation: with a scale
    ``eps >= 0`` (a trainable parameter, like the thresholds) minimise
    ``eps (beta^2 pi + T + Fp)`` subject to ``eps T >= 1`` (T = tp_l / n, Fp = fp_u / n);
    its Lagrangian ``eps (beta^2 pi + T + Fp) + lambda (1 - eps T)`` is at the saddle
    ``(1 + beta^2) / F_beta-bound``, with ``eps = 1 / T`` and ``lambda`` the same value.

    Parameters
    ----------
    beta : float, default 1.0
        The F-measure's beta (> 0).
    num_labels : int, default 1
        Number of queries Q (rows of the scores), each with its own thresholds and
        multipliers.
    surrogate : str, default "xent"
        "hinge" or "xent" (the logistic loss divided by log 2).
    dual_rate_factor : float, default 0.1
        How many times slower than the descent the multipliers ascend (> 0).

    Raises
    ------
    ValueError
        On a bad beta or option.

    Examples
    --------
    >>> loss = FBetaLoss(beta=1.0)
    >>> round(loss(torch.tensor([2.0, 1.0, -1.0, 0.5]), [1, 1, 0, 0]).item(), 4)
    1.9643
    """

    def __init__(
        self,
        beta: float = 1.0,
        num_labels: int = 1,
        surrogate: str = "xent",
        dual_rate_factor: float = 0.1,
    ) -> None:
        super().__init__(num_labels, 1, surrogate, dual_rate_factor)
        if not (isinstance(beta, (int, float)) and beta > 0 and math.isfinite(beta)):
            raise ValueError(f"beta must be a finite number > 0; got {beta!r}.")
        self.beta = float(beta)
        self.scale = nn.Parameter(torch.ones(num_labels, 1))

    def forward(self, scores: torch.Tensor, labels: torch.Tensor | npt.ArrayLike) -> torch.Tensor:
        """The loss, the mean over the queries.

        Parameters
        ----------
        scores : Tensor of shape (n,) or (Q, n)
            One row per query, Q = ``num_labels``.
        labels : Tensor or array_like of the scores' shape
            1/True positive, 0/-1/False negative.

        Returns
        -------
        Tensor
            A scalar.

        Examples
        --------
        >>> scores = torch.tensor([[2.0, 1.0, -1.0, 0.5], [0.5, -1.0, 1.0, 2.0]])  # 2 queries
        >>> round(FBetaLoss(1.0, num_labels=2)(scores, [[1, 1, 0, 0]] * 2).item(), 4)
        2.3525
        """
        scores, pos, prior = self._prepare(scores, labels)
        l_pos, l_neg = self._losses(scores, pos)
        lam, eps = self.lambdas().to(scores.dtype), self.scale.abs().to(scores.dtype)
        tp = prior - l_pos.mean(1)  # T = tp_l / n
        value = eps * (self.beta**2 * prior + tp + l_neg.mean(1)) + lam * (1.0 - eps * tp)
        return value.mean()


def _check_surrogate(surrogate):
    if surrogate not in SURROGATES:
        raise ValueError(f"surrogate must be one of {list(SURROGATES)}; got {surrogate!r}.")


def _column(threshold, scores):
    """A threshold (number, or one per query) as a (Q, 1) tensor."""
    t = torch.as_tensor(threshold, dtype=scores.dtype, device=scores.device)
    return t.reshape(-1, 1) if t.ndim else t


def _targets(value, num_labels, name):
    t = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
    if t.numel() not in (1, num_labels) or not ((t > 0) & (t < 1)).all():
        raise ValueError(
            f"{name} must be a number in (0, 1), or one per query ({num_labels}); got {value!r}."
        )
    return t.expand(num_labels).clone()


def _anchors(span, num_anchors, name):
    """The K interior points of K + 2 evenly spaced values over `span`, and the weight of
    each divided by the span's width."""
    try:
        lo, hi = (float(v) for v in span)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high); got {span!r}.") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"{name} must satisfy 0 <= low < high <= 1; got {span!r}.")
    anchors = torch.linspace(lo, hi, num_anchors + 2, dtype=torch.float64)[1:-1]
    return anchors, 1.0 / (num_anchors + 1)
