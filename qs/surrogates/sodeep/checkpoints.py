"""Checkpoints of trained sorters: the dictionary a trained sorter is saved as, and loading
one (the shipped ones by default) as a frozen sorter. Read with ``weights_only=True``: a
checkpoint runs no code."""

import io
import pickle
import zipfile
from importlib import resources
from pathlib import Path

import torch

from qs.surrogates.sodeep.sorters import DEFAULT_LENGTH, KINDS, SORTERS

__all__ = ["FORMAT", "FORMAT_VERSION", "load_sorter", "shipped_checkpoint", "sorter_from_state",
           "sorter_state"]

FORMAT = "qsrank-sodeep-sorter"
FORMAT_VERSION = 2  # 2: standardised input, bounded output


def sorter_state(sorter, meta):
    """The checkpoint dictionary of a trained sorter: format tag, metadata, weights."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, **meta,
            "state_dict": {k: v.detach().cpu() for k, v in sorter.state_dict().items()}}


def sorter_from_state(state, source="checkpoint"):
    """The frozen sorter (eval mode, no parameter gradients) of a checkpoint dictionary."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{source} is not a qsrank SoDeep sorter checkpoint (no format "
                         f"{FORMAT!r}).")
    if state.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{source}: unsupported sorter checkpoint format version "
                         f"{state.get('format_version')!r}; this qsrank reads version "
                         f"{FORMAT_VERSION}.")
    kind = state.get("kind")
    if kind not in SORTERS:
        raise ValueError(f"{source}: unknown sorter kind {kind!r}; expected one of "
                         f"{list(KINDS)}.")
    try:
        sorter = SORTERS[kind](state["length"], **state["hyper"])
        sorter.load_state_dict(state["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{source}: the {kind} sorter's weights do not load: "
                         f"{_first_line(err)}") from None
    sorter.eval().requires_grad_(False)
    sorter.meta = {k: v for k, v in state.items() if k != "state_dict"}
    return sorter


def _first_line(err):
    """An exception as one short line: its type and the start of its message."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0][:200]}" if lines else type(err).__name__


def shipped_checkpoint(kind="lstm"):
    """The path of the checkpoint shipped with the package for `kind` at DEFAULT_LENGTH."""
    if kind not in SORTERS:
        raise ValueError(f"unknown sorter kind {kind!r}; expected one of {list(KINDS)}.")
    return resources.files("qs.surrogates") / f"sorter_{kind}_{DEFAULT_LENGTH}.pt"


def load_sorter(path=None, *, kind="lstm", length=None):
    """The frozen sorter stored at `path` (default: the shipped checkpoint of `kind`).

    With `length` given, a checkpoint trained for another length is a ValueError naming
    both. An unreadable file, or one that is not a sorter checkpoint, is a ValueError too.
    The metadata of the checkpoint is on ``sorter.meta``.
    """
    source = path if path is not None else shipped_checkpoint(kind)
    try:
        raw = Path(source).read_bytes() if path is not None else source.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read sorter checkpoint {source}: {err.strerror or err}") \
            from None
    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except _UNREADABLE as err:
        raise ValueError(f"{source} is not a readable sorter checkpoint (corrupt or not a "
                         f"torch file): {_first_line(err)}") from None
    sorter = sorter_from_state(state, str(source))
    if length is not None and sorter.length != length:
        raise ValueError(f"sorter checkpoint {source} was trained for length {sorter.length}, "
                         f"but the scores have length {length}; train one for {length} "
                         f"(qsrank sodeep train --length {length}).")
    return sorter


# what torch.load raises on a damaged or foreign file
_UNREADABLE = (RuntimeError, ValueError, KeyError, AttributeError, EOFError, OSError,
               pickle.UnpicklingError, zipfile.BadZipFile)
