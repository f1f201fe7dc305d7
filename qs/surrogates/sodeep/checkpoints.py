"""Checkpoints of trained sorters: the dictionary a trained sorter is saved as, and loading
one (the shipped ones by default) as a frozen sorter. Read with ``weights_only=True``: a
checkpoint runs no code."""

import io
import os
import pickle
import zipfile
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from qs.surrogates.sodeep.sorters import DEFAULT_LENGTH, KINDS, SORTERS

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "load_sorter",
    "shipped_checkpoint",
    "sorter_from_state",
    "sorter_state",
]

FORMAT = "qsrank-sodeep-sorter"
FORMAT_VERSION = 2  # 2: standardised input, bounded output


def sorter_state(sorter: nn.Module, meta: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint dictionary of a trained sorter.

    Parameters
    ----------
    sorter : torch.nn.Module
        The trained sorter.
    meta : dict
        Its metadata (as `train_sorter` returns it: ``kind``, ``length``, ``hyper``, ...).

    Returns
    -------
    dict
        Format tag and version, the metadata, and the weights on the CPU
        (``state_dict``): tensors and plain values only, for ``torch.save``.

    Examples
    --------
    >>> sorter = load_sorter()
    >>> state = sorter_state(sorter, sorter.meta)
    >>> state["format"], state["kind"], state["length"]
    ('qsrank-sodeep-sorter', 'lstm', 64)
    >>> sorter_from_state(state).meta["length"]
    64
    """
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        **meta,
        "state_dict": {k: v.detach().cpu() for k, v in sorter.state_dict().items()},
    }


def sorter_from_state(state: Any, source: str = "checkpoint") -> nn.Module:
    """The frozen sorter of a checkpoint dictionary.

    Parameters
    ----------
    state : dict
        What `sorter_state` returned.
    source : str, default "checkpoint"
        What the dictionary came from, for error messages.

    Returns
    -------
    torch.nn.Module
        The sorter in eval mode, no parameter gradients, its metadata on ``sorter.meta``.

    Raises
    ------
    ValueError
        If ``state`` is not a sorter checkpoint of this format version, or its weights do
        not load.

    Examples
    --------
    >>> from qs.surrogates.sodeep import build_sorter, sorter_from_state, sorter_state
    >>> state = sorter_state(build_sorter("lstm", 8), {"kind": "lstm", "length": 8,
    ...                                                 "hyper": {"hidden": 32}})
    >>> sorter = sorter_from_state(state)
    >>> sorter.length, sorter.training
    (8, False)
    """
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(
            f"{source} is not a qsrank SoDeep sorter checkpoint (no format {FORMAT!r})."
        )
    if state.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{source}: unsupported sorter checkpoint format version "
            f"{state.get('format_version')!r}; this qsrank reads version "
            f"{FORMAT_VERSION}."
        )
    kind = state.get("kind")
    if kind not in SORTERS:
        raise ValueError(f"{source}: unknown sorter kind {kind!r}; expected one of {list(KINDS)}.")
    try:
        sorter = SORTERS[kind](state["length"], **state["hyper"])
        sorter.load_state_dict(state["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise ValueError(
            f"{source}: the {kind} sorter's weights do not load: {_first_line(err)}"
        ) from None
    sorter.eval().requires_grad_(False)
    sorter.meta = {k: v for k, v in state.items() if k != "state_dict"}
    return sorter


def _first_line(err: BaseException) -> str:
    """An exception as one short line: its type and the start of its message."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0][:200]}" if lines else type(err).__name__


def shipped_checkpoint(kind: str = "lstm") -> Traversable:
    """The path of the checkpoint shipped with the package.

    Parameters
    ----------
    kind : str, default "lstm"
        "lstm" or "cnn".

    Returns
    -------
    importlib.resources.abc.Traversable
        The checkpoint of ``kind`` at ``DEFAULT_LENGTH``.

    Raises
    ------
    ValueError
        On an unknown kind.

    Examples
    --------
    >>> shipped_checkpoint("cnn").name
    'sorter_cnn_64.pt'
    """
    if kind not in SORTERS:
        raise ValueError(f"unknown sorter kind {kind!r}; expected one of {list(KINDS)}.")
    return resources.files("qs.surrogates") / f"sorter_{kind}_{DEFAULT_LENGTH}.pt"


def load_sorter(
    path: str | os.PathLike[str] | None = None, *, kind: str = "lstm", length: int | None = None
) -> nn.Module:
    """The frozen sorter stored in a checkpoint (read with ``weights_only=True``).

    Parameters
    ----------
    path : str, path-like or None, default None
        The checkpoint (None: the shipped checkpoint of ``kind``).
    kind : str, default "lstm"
        The shipped sorter to load when ``path`` is None: "lstm" or "cnn".
    length : int or None, default None
        The length the sorter must rank; None accepts any.

    Returns
    -------
    torch.nn.Module
        The sorter in eval mode, no parameter gradients; the checkpoint's metadata is on
        ``sorter.meta``.

    Raises
    ------
    ValueError
        On an unreadable file, one that is not a sorter checkpoint, or a checkpoint
        trained for another length than ``length`` (naming both).

    Examples
    --------
    >>> from qs.surrogates.sodeep import load_sorter
    >>> sorter = load_sorter(kind="lstm")
    >>> sorter.length, sorter.meta["kind"]
    (64, 'lstm')
    """
    source: Any = path if path is not None else shipped_checkpoint(kind)
    try:
        raw = Path(source).read_bytes() if path is not None else source.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read sorter checkpoint {source}: {err.strerror or err}") from None
    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except _UNREADABLE as err:
        raise ValueError(
            f"{source} is not a readable sorter checkpoint (corrupt or not a "
            f"torch file): {_first_line(err)}"
        ) from None
    sorter = sorter_from_state(state, str(source))
    if length is not None and sorter.length != length:
        raise ValueError(
            f"sorter checkpoint {source} was trained for length {sorter.length}, "
            f"but the scores have length {length}; train one for {length} "
            f"(qsrank sodeep train --length {length})."
        )
    return sorter


# what torch.load raises on a damaged or foreign file
_UNREADABLE = (
    RuntimeError,
    ValueError,
    KeyError,
    AttributeError,
    EOFError,
    OSError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
)
