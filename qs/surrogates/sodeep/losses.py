"""The AP and Spearman losses with a frozen sorter's ranks in place of the exact ones."""

from collections.abc import Callable

import numpy.typing as npt
import torch
from torch import nn

from qs.surrogates.sodeep.checkpoints import load_sorter
from qs.surrogates.sodeep.sorters import exact_ranks
from qs.validation import as_query_rows, check_finite_tensor, check_scores

__all__ = ["sodeep_ap_loss", "sodeep_spearman_loss"]

_shipped: dict[str, object] = {}


def _default_sorter() -> object:
    """The shipped LSTM sorter, loaded once."""
    if "lstm" not in _shipped:
        _shipped["lstm"] = load_sorter()
    return _shipped["lstm"]


def _sorted_ranks(sorter, scores):
    """Validate (n,) or (Q, n) scores against `sorter`; return its ranks (Q, n) in the
    scores' dtype, differentiable in the scores."""
    if sorter is None:
        sorter = _default_sorter()
    check_scores(scores)
    n = scores.shape[-1]
    length = getattr(sorter, "length", None)
    if length is not None and n != length:
        raise ValueError(
            f"the sorter was trained for length {length}, but the scores have "
            f"length {n}; use a sorter of length {n} (qsrank sodeep train "
            f"--length {n}) or score groups of {length}."
        )
    if n < 2:
        raise ValueError(f"scores need at least 2 entries per query to be ranked; got {n}.")
    check_finite_tensor(scores)
    rows = scores if scores.ndim == 2 else scores[None]
    param = next(iter(sorter.parameters()), None) if isinstance(sorter, nn.Module) else None
    x = rows.to(param.dtype) if param is not None else rows
    return sorter(x).to(scores.dtype)


def _reduce(values, counted, flat, reduction):
    if reduction == "none":
        return values[0] if flat else values
    if reduction == "sum":
        return values.sum()
    if reduction == "mean":
        return values.sum() / counted.sum().clamp(min=1)
    raise ValueError(f"reduction must be one of ['mean', 'sum', 'none']; got {reduction!r}.")


def sodeep_ap_loss(
    scores: torch.Tensor,
    labels: torch.Tensor | npt.ArrayLike,
    sorter: Callable[[torch.Tensor], torch.Tensor] | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """1 - AP per query with the sorter's rank in place of the exact one (paper eqs. 5-7).

    ``AP = (1/|P|) sum_{k in P} prec(k)``, ``prec(k) = #{positives j : s_j >= s_k} /
    rank(k)``. The numerator is the exact count (a set, piecewise constant, as in the paper);
    the denominator ``rank(k) = d * sorter(scores)_k`` carries the gradient to every score
    through the sorter. With `exact_ranks` as ``sorter`` this is exactly 1 - AP as
    scikit-learn computes it. A predicted rank is clamped to at least 1/2 so a precision
    stays bounded. A query without a positive or without a negative has loss 0 and no
    gradient, and "mean" leaves it out.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        Finite floats, n the sorter's length (at least 2).
    labels : Tensor or array_like of the scores' shape
        1/True positive, 0/-1/False negative.
    sorter : callable or None, default None
        A module or function mapping (Q, n) scores to (Q, n) normalised ranks; None: the
        shipped LSTM sorter.
    reduction : str, default "mean"
        "mean" (over the queries with a positive and a negative), "sum" or "none" (one
        value per query; a scalar for scores of shape (n,)).

    Returns
    -------
    Tensor
        The loss.

    Raises
    ------
    ValueError
        On scores that are not finite, of another length than the sorter's or shorter
        than 2, labels that do not fit, or an unknown reduction.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.sodeep import exact_ranks, sodeep_ap_loss
    >>> scores = torch.tensor([0.5, 2.0, 1.0, 0.1])
    >>> round(sodeep_ap_loss(scores, [0, 1, 0, 1], sorter=exact_ranks).item(), 4)
    0.25
    """
    ranks = _sorted_ranks(sorter, scores)
    rows, pos = as_query_rows(scores.detach(), labels)
    d = rows.shape[-1]
    # numerator: positives scored at or above each score (exact, no gradient)
    above = (rows[:, None, :] >= rows[:, :, None]) & pos[:, None, :]
    hits = above.sum(dim=-1).to(ranks.dtype)
    precision = hits / (d * ranks).clamp_min(0.5)
    n_pos = pos.sum(dim=-1)
    counted = (n_pos > 0) & (n_pos < d)
    ap = (precision * pos).sum(dim=-1) / n_pos.clamp(min=1)
    values = torch.where(counted, 1 - ap, torch.zeros_like(ap))
    return _reduce(values, counted, scores.ndim == 1, reduction)


def sodeep_spearman_loss(
    scores: torch.Tensor,
    targets: torch.Tensor | npt.ArrayLike,
    sorter: Callable[[torch.Tensor], torch.Tensor] | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """1 - Spearman correlation per query between the scores and `targets`, with the sorter's
    rank of the scores in place of the exact one (paper eqs. 2-4).

    With normalised ranks r (scores, via the sorter) and t (targets, exact), ``rho = 1 -
    6 d sum_i (r_i - t_i)^2 / (d^2 - 1)``, Spearman's formula for distinct values (the paper's
    eq. 2; d^2 of it cancels the normalisation). With `exact_ranks` as ``sorter`` and no
    ties this is exactly 1 - scipy.stats.spearmanr.

    Parameters
    ----------
    scores : Tensor of shape (n,) or (Q, n)
        Finite floats, n the sorter's length (at least 2).
    targets : Tensor or array_like of the scores' shape
        Finite real numbers, ranked exactly.
    sorter : callable or None, default None
        As `sodeep_ap_loss` takes it.
    reduction : str, default "mean"
        "mean", "sum" or "none" (one value per query).

    Returns
    -------
    Tensor
        The loss.

    Raises
    ------
    ValueError
        On bad scores (as `sodeep_ap_loss`), targets of another shape or not finite, or
        an unknown reduction.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.sodeep import exact_ranks, sodeep_spearman_loss
    >>> scores = torch.tensor([2.0, 1.0, -1.0, 0.5])
    >>> targets = torch.tensor([4.0, 3.0, 1.0, 2.0])
    >>> round(sodeep_spearman_loss(scores, targets, sorter=exact_ranks).item(), 4)
    0.0
    """
    ranks = _sorted_ranks(sorter, scores)
    targets = torch.as_tensor(targets, device=scores.device)
    if tuple(targets.shape) != tuple(scores.shape):
        raise ValueError(
            f"scores and targets must have the same shape; got scores "
            f"{tuple(scores.shape)} and targets {tuple(targets.shape)}."
        )
    if not (targets.is_floating_point() or targets.dtype in (torch.int32, torch.int64)):
        raise ValueError(f"targets must be real numbers; got dtype {targets.dtype}.")
    if not torch.isfinite(targets).all():
        raise ValueError("targets must be finite.")
    t = exact_ranks(targets.to(ranks.dtype))
    t = t if t.ndim == 2 else t[None]
    d = ranks.shape[-1]
    values = 6 * d * ((ranks - t) ** 2).sum(dim=-1) / (d * d - 1)
    counted = torch.ones_like(values, dtype=torch.bool)
    return _reduce(values, counted, scores.ndim == 1, reduction)
