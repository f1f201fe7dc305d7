"""The input checks that qs.torch's losses share: scores with labels (and a mask) of the
score losses, embeddings with class labels of the retrieval losses, and their options.

Each check raises a ValueError (a TypeError for an argument of the wrong kind) whose one
line names the argument and what was expected.
"""

import numpy as np
import torch

from qs.inference import resolve
from qs.inference.batch import BATCH_LOSSES
from qs.losses import QSLoss
from qs.validation import as_positive_tensor, check_finite_tensor, check_scores

__all__ = [
    "READ_AS_IS",
    "REDUCTIONS",
    "SIMILARITIES",
    "check_embeddings",
    "check_mask",
    "check_retrieval_options",
    "check_score_input",
    "ranked_along_columns",
]

REDUCTIONS = ("mean", "sum", "none")
SIMILARITIES = ("cosine", "dot")
#: score dtypes the kernels read without a cast
READ_AS_IS = (torch.float32, torch.float64)


def check_score_input(scores, labels, loss, method, reduction, finite=True, any_loss=False):
    """Validate the arguments of a score loss; return the labels as a bool tensor.

    Parameters
    ----------
    scores : torch.Tensor
        (n,) or (queries, n) floating-point scores.
    labels : torch.Tensor or array-like
        Binary labels of the scores' shape.
    loss : str or QSLoss
        A loss of `qs.inference.batch.BATCH_LOSSES`, or with ``any_loss`` a
        `qs.losses.QSLoss` instance.
    method : str
        A LAI method that supports the loss, or "torch" (names only).
    reduction : str
        "mean", "sum" or "none".
    finite : bool, default True
        Check the scores' finiteness too.
    any_loss : bool, default False
        Take a `qs.losses.QSLoss` instance beside the names (`qs.inference.batch.lai_batch`
        solves it).

    Returns
    -------
    torch.Tensor
        The labels, bool, on the scores' device.

    Raises
    ------
    ValueError
        Naming the first argument that is wrong.

    Examples
    --------
    >>> check_score_input(torch.tensor([0.5, 0.1]), [1, 0], "ap", "auto", "mean")
    tensor([ True, False])
    >>> check_score_input(torch.tensor([0.5, 0.1]), [1, 0], "ap", "auto", "average")
    Traceback (most recent call last):
        ...
    ValueError: reduction must be one of ['mean', 'sum', 'none']; got 'average'.
    """
    check_scores(scores)
    if any_loss and isinstance(loss, QSLoss):
        if method == "torch":
            raise ValueError(
                f"method 'torch' takes loss in {list(BATCH_LOSSES)}; got {loss!r}: use 'auto'."
            )
    elif not (isinstance(loss, str) and loss in BATCH_LOSSES):
        expected = f"{list(BATCH_LOSSES)}{' or a QSLoss' if any_loss else ''}"
        raise ValueError(f"loss must be one of {expected}; got {loss!r}.")
    if method != "torch":
        resolve(loss, method)  # unknown method, or one that does not support the loss
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {list(REDUCTIONS)}; got {reduction!r}.")
    labels = as_positive_tensor(labels, scores)
    if finite:
        check_finite_tensor(scores)
    return labels


def ranked_along_columns(dim, scores):
    """Whether the items are ranked along the first of the scores' two dimensions.

    That is ``dim`` 0 or -2 of a 2-D tensor, one query per column: the caller solves the
    transpose. A 1-D tensor is one ranking for ``dim`` 0 or -1.

    Parameters
    ----------
    dim : int
        The dimension along which items are ranked.
    scores : torch.Tensor
        The scores.

    Returns
    -------
    bool
        True for a 2-D tensor ranked along its columns.

    Raises
    ------
    ValueError
        For a ``dim`` the scores do not have.

    Examples
    --------
    >>> scores = torch.zeros(2, 3)
    >>> ranked_along_columns(0, scores), ranked_along_columns(-1, scores)
    (True, False)
    """
    ndim = scores.ndim
    if isinstance(dim, bool) or not isinstance(dim, int) or not -ndim <= dim < ndim:
        raise ValueError(
            f"dim must be the dimension along which items are ranked, an integer "
            f"from {-scores.ndim} to {scores.ndim - 1} for scores of shape "
            f"{tuple(scores.shape)}; got {dim!r}."
        )
    return scores.ndim == 2 and dim % 2 == 0


def check_mask(mask, scores):
    """The mask as a bool tensor on the scores' device, checked to have their shape.

    Parameters
    ----------
    mask : torch.Tensor or array-like
        Bool, True where an entry takes no part.
    scores : torch.Tensor
        The scores.

    Returns
    -------
    torch.Tensor
        The mask, on the scores' device.

    Raises
    ------
    ValueError
        When the mask is not bool or not of the scores' shape.

    Examples
    --------
    >>> check_mask(np.array([False, True]), torch.zeros(2))
    tensor([False,  True])
    """
    if not isinstance(mask, torch.Tensor):
        mask = torch.from_numpy(np.asarray(mask))
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be bool (True where an entry takes no part); got dtype {mask.dtype}."
        )
    if tuple(mask.shape) != tuple(scores.shape):
        raise ValueError(
            f"scores and mask must have the same shape; got scores "
            f"{tuple(scores.shape)} and mask {tuple(mask.shape)}."
        )
    return mask.to(scores.device)


def check_retrieval_options(loss, similarity, reduction):
    """Validate a retrieval loss's options.

    Parameters
    ----------
    loss : str
        "ap" or "ndcg".
    similarity : str
        A name of `SIMILARITIES`.
    reduction : str
        A name of `REDUCTIONS`.

    Raises
    ------
    ValueError
        Naming the first option that is wrong.

    Examples
    --------
    >>> check_retrieval_options("ap", "cosine", "mean")
    >>> check_retrieval_options("ap", "euclidean", "mean")
    Traceback (most recent call last):
        ...
    ValueError: similarity must be one of ['cosine', 'dot']; got 'euclidean'.
    """
    if loss not in ("ap", "ndcg"):
        raise ValueError(f"loss must be 'ap' or 'ndcg' for a retrieval loss; got {loss!r}.")
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {list(SIMILARITIES)}; got {similarity!r}.")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {list(REDUCTIONS)}; got {reduction!r}.")


def check_embeddings(embeddings, labels, ref_emb=None, ref_labels=None):
    """Validate embeddings with their class labels, and the references when given.

    Parameters
    ----------
    embeddings : torch.Tensor of shape (B, d)
        The batch's embeddings.
    labels : torch.Tensor or array-like of shape (B,)
        Their class labels.
    ref_emb : torch.Tensor of shape (R, d) or None, default None
        Reference embeddings to rank against; None: the batch itself.
    ref_labels : torch.Tensor or array-like of shape (R,) or None, default None
        Their class labels, given exactly with ``ref_emb``.

    Returns
    -------
    tuple of torch.Tensor
        ``(embeddings, labels, refs, ref_labels)`` on the embeddings' device, the
        references being the embeddings themselves when none are given.

    Raises
    ------
    TypeError
        When an embedding matrix is not a tensor.
    ValueError
        On bad shapes or labels, or ``ref_emb`` without ``ref_labels`` (or the reverse).

    Examples
    --------
    >>> emb = torch.eye(3)
    >>> _, labels, refs, _ = check_embeddings(emb, [0, 1, 0])
    >>> refs is emb, labels.tolist()
    (True, [0, 1, 0])
    """
    _check_matrix(embeddings, "embeddings")
    labels = _check_labels(labels, embeddings, "labels", "embeddings")
    if (ref_emb is None) != (ref_labels is None):
        raise ValueError("ref_emb and ref_labels go together: give both or neither.")
    if ref_emb is None:
        return embeddings, labels, embeddings, labels
    _check_matrix(ref_emb, "ref_emb")
    if ref_emb.shape[1] != embeddings.shape[1]:
        raise ValueError(
            f"ref_emb must have the embeddings' size {embeddings.shape[1]}; got "
            f"shape {tuple(ref_emb.shape)}."
        )
    ref_labels = _check_labels(ref_labels, ref_emb, "ref_labels", "ref_emb")
    return embeddings, labels, ref_emb.to(embeddings.device), ref_labels.to(embeddings.device)


def _check_matrix(x, name):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}.")
    if not x.is_floating_point() or x.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D floating-point tensor (samples, size); got "
            f"dtype {x.dtype} and shape {tuple(x.shape)}."
        )
    if not torch.isfinite(x.detach()).all():
        raise ValueError(f"{name} must be finite; got NaN or inf.")


def _check_labels(labels, embeddings, name, of):
    labels = torch.as_tensor(labels, device=embeddings.device)
    if labels.ndim != 1 or len(labels) != len(embeddings):
        raise ValueError(
            f"{name} must be 1-D with one class per row of {of}; got shape "
            f"{tuple(labels.shape)} for {of} of shape {tuple(embeddings.shape)}."
        )
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(
            f"{name} must hold integer (or bool) class labels; got dtype {labels.dtype}."
        )
    return labels
