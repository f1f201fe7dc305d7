"""VOC2011 action poselet features, in the format the AP-SVM papers' released code reads.

List file (whitespace separated, blank lines skipped)::

    N                                              number of images
    is_fs label name n_candidates                  per image: a header,
    min_x min_y width height id bbox_label         n_candidates box lines,
    image_label                                    and the image's label

Each box has one sparse feature file ``NAME_ID.feature`` (in the list file's directory or
``feature_dir``): 1-based, strictly increasing ``index:value`` pairs, whitespace separated,
indices 1..2400 the action-poselet activations and 2401..2404 the four object scores. The
loader appends a constant-1 bias column (column 2405) unless ``bias=False``, so that a linear
model without intercept (the structured SVM) still learns an offset.

Labels, one integer per box (``bbox_label``): ``k`` in 1..10 names the action ``ACTIONS[k-1]``
(alphabetical, as the VOC devkit lists them), so that the positives of an action are the boxes
whose label equals its id and every other box is a negative; ``0`` marks a box to ignore
(VOC "difficult"), neither positive nor negative for any action. Any other value (e.g. -1 for
VOC's "other" action) is a negative for all ten. ``is_fs`` and the image labels are checked to
be integers and not kept: the action experiment works on boxes.
"""

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from qs.data.files import (
    LIST_BYTES,
    SAMPLE_BYTES,
    Unreadable,
    check_final_newline,
    inside,
    read_bytes,
    shown,
)
from qs.data.sparse_text import parse_sparse_features

__all__ = ["ACTIONS", "IGNORE", "N_FEATURES", "PoseletData", "load_poselet"]

ACTIONS = (
    "jumping",
    "phoning",
    "playinginstrument",
    "reading",
    "ridingbike",
    "ridinghorse",
    "running",
    "takingphoto",
    "usingcomputer",
    "walking",
)
IGNORE = 0  # the box label of a "difficult" box, left out of training and evaluation
N_FEATURES = 2404  # 2400 action-poselet activations + 4 object scores, without the bias


@dataclass(frozen=True, eq=False)  # arrays: no meaningful ==
class PoseletData:
    """Per-box features and labels of one split; row i of every field is box i.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix of shape (n_boxes, n_features), float64
        The features: 2404, plus the constant-1 bias column when ``bias``.
    labels : ndarray of shape (n_boxes,), int64
        The box labels (``bbox_label``): 1..10 an action of `ACTIONS`, 0 (`IGNORE`)
        difficult, any other a negative.
    image_names : ndarray of shape (n_boxes,), str
        Each box's image.
    box_ids : ndarray of shape (n_boxes,), int64
        Each box's id in its ``NAME_ID.feature`` file name.
    boxes : ndarray of shape (n_boxes, 4), float64
        min_x, min_y, width, height.
    source : str
        Where the data came from, with checksums.
    bias : bool
        Whether the last column of X is the constant-1 bias.

    Examples
    --------
    >>> from qs.data.synthetic import make_voc2011_actions
    >>> train = make_voc2011_actions(seed=0)["trainval"]
    >>> train.X.shape, train.bias, train.source
    ((3347, 2405), True, 'synthetic (seed 0), not the VOC2011 data')
    """

    X: sp.csr_matrix  # float64, (n_boxes, 2404 + bias)
    labels: np.ndarray  # int64 bbox_label: 1..10 action id, 0 ignored, other negative
    image_names: np.ndarray  # str
    box_ids: np.ndarray  # int64, the id in NAME_ID.feature
    boxes: np.ndarray  # float64 (n_boxes, 4): min_x, min_y, width, height
    source: str  # where the data came from, with checksums
    bias: bool  # whether the last column of X is the constant-1 bias

    @property
    def n_images(self):
        return np.unique(self.image_names).size

    def targets(self, action):
        """Binary labels of one action, and the mask of the ignored (difficult) boxes.

        Parameters
        ----------
        action : str or int
            The action's name (in `ACTIONS`) or id, 1..10.

        Returns
        -------
        tuple
            ``(y, ignored)``: y int8 (n_boxes,), 1 positive and 0 negative; ignored bool
            (n_boxes,).

        Raises
        ------
        ValueError
            For an unknown action.

        Examples
        --------
        >>> from qs.data.synthetic import make_voc2011_actions
        >>> train = make_voc2011_actions(seed=0)["trainval"]
        >>> y, ignored = train.targets("phoning")
        >>> int(y.sum()), int(ignored.sum())
        (227, 35)
        """
        action_id = _action_id(action)
        return (self.labels == action_id).astype(np.int8), self.labels == IGNORE

    def positives_per_class(self):
        """The number of positive boxes of each action.

        Returns
        -------
        dict
            ``{action name: count}``, in `ACTIONS` order.

        Examples
        --------
        >>> from qs.data.synthetic import make_voc2011_actions
        >>> train = make_voc2011_actions(seed=0)["trainval"]
        >>> train.positives_per_class()["phoning"]
        227
        """
        return {
            name: int(np.count_nonzero(self.labels == k)) for k, name in enumerate(ACTIONS, start=1)
        }


def _action_id(action):
    if isinstance(action, str):
        if action not in ACTIONS:
            raise ValueError(f"Unknown action {action!r}; expected one of {', '.join(ACTIONS)}.")
        return ACTIONS.index(action) + 1
    if not 1 <= int(action) <= len(ACTIONS):
        raise ValueError(f"Action id must be in 1..{len(ACTIONS)}; got {action!r}.")
    return int(action)


def load_poselet(
    list_path: str | Path,
    *,
    feature_dir: str | Path | None = None,
    n_features: int = N_FEATURES,
    bias: bool = True,
) -> "PoseletData":
    """Read a list file and its feature files (see the module's text) into a `PoseletData`.

    Parameters
    ----------
    list_path : str or pathlib.Path
        The list file.
    feature_dir : str, pathlib.Path or None, default None
        The directory of the ``NAME_ID.feature`` files (None: the list file's).
    n_features : int, default 2404
        The dimension the files hold: an index above it is an error (pass 2405 with
        ``bias=False`` for files that already carry a bias).
    bias : bool, default True
        Whether to append a constant-1 column.

    Returns
    -------
    PoseletData
        One row per box: the features, labels, image names, box ids and boxes, and the
        source with the files' checksum.

    Raises
    ------
    ValueError
        On any malformed, truncated or missing input, naming the file and line.

    Examples
    --------
    One image with one box of action 2 (phoning), three features:

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = pathlib.Path(tmp)
    ...     _ = (folder / "list.txt").write_text("1\\n0 1 img 1\\n10 20 30 40 7 2\\n1\\n")
    ...     _ = (folder / "img_7.feature").write_text("1:0.5 3:2\\n")
    ...     data = load_poselet(folder / "list.txt", n_features=3)
    >>> data.X.toarray().tolist(), data.labels.tolist()
    ([[0.5, 0.0, 2.0, 1.0]], [2])
    """
    list_path = Path(list_path)
    feature_dir = list_path.parent if feature_dir is None else Path(feature_dir)
    raw = read_bytes(list_path, "the poselet list file", LIST_BYTES)
    check_final_newline(list_path, raw)
    boxes = _parse_list(list_path, raw.decode("utf-8", errors="replace"))

    feature_hash = hashlib.sha256()
    indices, values, indptr = [], [], [0]
    for lineno, name, box_id, *_ in boxes:
        path = inside(feature_dir, f"{name}_{box_id}.feature", f"{list_path}, line {lineno}")
        try:
            data = read_bytes(path, "the feature file", SAMPLE_BYTES)
        except Unreadable as err:
            raise ValueError(
                f"Missing or unreadable feature file {path} for the box on "
                f"{list_path}, line {lineno}: {err.reason}. Expected "
                f"NAME_ID.feature in {feature_dir} (pass feature_dir, or "
                "--features-dir, if they live elsewhere)."
            ) from None
        feature_hash.update(data)
        index, value = parse_sparse_features(
            path,
            data.decode("utf-8", errors="replace"),
            n_features,
            hint=" (2400 poselets + 4 object scores); if the files already carry a bias "
            f"column, load with n_features={n_features + 1}, bias=False",
        )
        if bias:
            index, value = np.append(index, n_features + 1), np.append(value, 1.0)
        indices.append(index - 1)
        values.append(value)
        indptr.append(indptr[-1] + index.size)

    shape = (len(boxes), n_features + bias)
    X = sp.csr_matrix(
        (
            np.concatenate(values or [np.empty(0)]),
            np.concatenate(indices or [np.empty(0, np.int64)]),
            indptr,
        ),
        shape=shape,
    )
    source = (
        f"poselet list {list_path.resolve()} (sha256 {hashlib.sha256(raw).hexdigest()}), "
        f"{len(boxes)} feature files in {feature_dir.resolve()} "
        f"(sha256 of their concatenation {feature_hash.hexdigest()})"
    )
    return PoseletData(
        X=X,
        labels=np.array([b[4] for b in boxes], dtype=np.int64),
        image_names=np.array([b[1] for b in boxes], dtype=str),
        box_ids=np.array([int(b[2]) for b in boxes], dtype=np.int64),
        boxes=np.array([b[3] for b in boxes], dtype=np.float64).reshape(-1, 4),
        source=source,
        bias=bias,
    )


def _parse_list(path, text):
    """Box records (lineno, image name, id text, coordinates, bbox_label) of a list file."""
    lines = ((no, line.split()) for no, line in enumerate(text.splitlines(), 1) if line.strip())
    last = [0]  # the line number of the last line read

    def take(fields, what):
        line = next(lines, None)
        if line is None:
            raise ValueError(
                f"Truncated poselet list file {path}: expected {what} after line "
                f"{last[0]}, but the file ends there."
            )
        no, got = line
        last[0] = no
        if len(got) != len(fields):
            raise ValueError(
                f"{path}, line {no}: expected {what} ({' '.join(fields)}); got "
                f"{shown(' '.join(got))}."
            )
        return no, got

    def number(no, text, what, kind=int):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or (kind is float and not math.isfinite(value)):
            expected = "an integer" if kind is int else "a finite number"
            raise ValueError(
                f"{path}, line {no}: expected {what} to be {expected}; got {shown(text)}."
            )
        return value

    def count(no, text, what):
        n = number(no, text, what)
        if n < 0:
            raise ValueError(f"{path}, line {no}: expected {what} to be >= 0; got {n}.")
        return n

    no, (n_text,) = take(["n_images"], "the number of images on the first line")
    n_images = count(no, n_text, "the number of images")
    boxes = []
    for i in range(1, n_images + 1):
        no, (is_fs, label, name, n_cand) = take(
            ["is_fs", "label", "name", "n_candidates"], f"the header of image {i} of {n_images}"
        )
        number(no, is_fs, "is_fs")
        number(no, label, "the image label")
        n_cand = count(no, n_cand, "n_candidates")
        for b in range(1, n_cand + 1):
            no, fields = take(
                ["min_x", "min_y", "width", "height", "id", "bbox_label"],
                f"box {b} of {n_cand} of image {shown(name)}",
            )
            coords = [number(no, f, "a box coordinate", float) for f in fields[:4]]
            number(no, fields[4], "the box id")
            boxes.append((no, name, fields[4], coords, number(no, fields[5], "bbox_label")))
        no, (image_label,) = take(["image_label"], f"the label line of image {shown(name)}")
        number(no, image_label, "the image label")
    extra = next(lines, None)
    if extra is not None:
        raise ValueError(
            f"{path}, line {extra[0]}: unexpected content after the {n_images} "
            f"images the first line declares: {shown(' '.join(extra[1]))}."
        )
    return boxes
