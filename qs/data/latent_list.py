"""The latent AP-SVM's list file and its ``STEM_ID.feature`` sparse feature files, read as
Behl et al.'s released reader (``svm_struct_latent_api.c``) reads them: whitespace-separated
tokens in two layouts, pooled and unpooled (`LAYOUTS`); a stem may hold a path, as the
released reader opens ``STEM_ID.feature`` as written (`feature_files`).

The files are untrusted: every fault raises a one-line ValueError naming the file and the
position (image, box and token). Boxes come out as `DetectionData` boxes: x1 y1 x2 y2,
1-based inclusive pixels.
"""

import hashlib
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from qs.data.files import (
    LIST_BYTES,
    SAMPLE_BYTES,
    as_float32,
    check_final_newline,
    read_bytes,
    shown,
)
from qs.data.sparse_text import parse_sparse_features
from qs.data.voc2007 import DetectionData

__all__ = ["LAYOUTS", "LatentExample", "LatentListData", "load_latent_list", "parse_latent_list"]

_SHOWN = 5  # missing files named in one message, at most


@dataclass(frozen=True, eq=False)  # arrays: no meaningful ==
class LatentListData:
    """A latent AP-SVM list file read in full, one bag per example (`load_latent_list`).

    Parameters
    ----------
    data : DetectionData
        The boxes and features; its ``image_ids`` are the examples' stems, repeated where
        one image gives several examples.
    box_labels : ndarray of shape (n_boxes,), int8
        Each box's label: 0 in a negative image, -1 unknown in a positive one, 1
        supervised.
    image_labels : ndarray of shape (n_examples,), int8
        Each example's label.
    box_ids : ndarray of shape (n_boxes,), int64
        Each box's id, its feature file's suffix.
    images : ndarray of shape (n_examples,), int64
        Each example's image record, 0-based in file order.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = pathlib.Path(tmp)
    ...     text = "1\\nimg 2\\n1 1 10 10 1 -1\\n5 5 10 10 2 -1\\n1\\n"
    ...     _ = (folder / "list.txt").write_text(text)
    ...     _ = (folder / "img_1.feature").write_text("1:0.5\\n")
    ...     _ = (folder / "img_2.feature").write_text("3:2\\n")
    ...     bags = load_latent_list(folder / "list.txt")
    >>> bags.box_labels.tolist(), bags.box_ids.tolist(), bags.images.tolist()
    ([-1, -1], [1, 2], [0])
    """

    data: DetectionData
    box_labels: np.ndarray  # int8 (n_boxes,)
    image_labels: np.ndarray  # int8 (n_examples,)
    box_ids: np.ndarray  # int64 (n_boxes,)
    images: np.ndarray  # int64 (n_examples,)


def load_latent_list(
    path: str | Path,
    feature_dir: str | Path | None = None,
    n_features: int | None = None,
    *,
    layout: str = "pooled",
    annotations: Mapping[str, Any] | None = None,
    feature_root: str | Path | None = None,
) -> LatentListData:
    """Read a latent AP-SVM list file and its box feature files, as the released code does.

    The released latent AP-SVM reads whitespace-separated tokens, line breaks carrying no
    meaning.

    ``layout="pooled"`` (the released pooled training files, and every test file)::

        N                                   number of images, then per image:
        STEM n_boxes                        its feature-file stem and box count,
        x y width height id label           n_boxes times (x, y: 1-based top-left pixel),
        image_label                         and the image's label

    An image with boxes of label 1 (supervised positives) gives one example per such box,
    a bag of that box alone with the image's label; its other boxes are not candidates.

    ``layout="unpooled"`` (the released ``learning_type 0``): each image starts with
    ``is_fs label`` before ``STEM n_boxes``; the example's label is the one after the boxes,
    as in the released reader. With ``is_fs`` 1 (a fully supervised image) every box is an
    example of its own, labelled by its box label (0 or 1).

    Box ``id``'s features are in ``STEM_id.feature`` (`feature_files`): a stem may hold a
    path, absolute (read as given) or relative (to the list file's directory, or to
    ``feature_dir``). ``feature_root``: a directory every feature file must lie in, links
    followed; a stem leading out of it is refused. ``n_features``: the feature dimension (an
    index above it is an error); by default the largest index found. ``annotations``:
    ``{image id: VocAnnotation}`` (e.g. from `load_voc_annotation`) for every image, its id
    the stem's last component; it gives the image sizes that boxes are checked against and
    the ground-truth objects, which are otherwise empty.

    Parameters
    ----------
    path : str or pathlib.Path
        The list file.
    feature_dir : str, pathlib.Path or None, default None
        The directory relative stems are read from (None: the list file's).
    n_features : int or None, default None
        The feature dimension (an index above it is an error); None: the largest index
        found.
    layout : str, default "pooled"
        "pooled" or "unpooled", as above.
    annotations : mapping of str to VocAnnotation, or None, default None
        The annotation of every image, by image id.
    feature_root : str, pathlib.Path or None, default None
        A directory every feature file must lie in (links followed).

    Returns
    -------
    LatentListData
        One bag per example: the boxes and features, the box and example labels, the box
        ids and each example's image record.

    Raises
    ------
    ValueError
        On a malformed, truncated or missing input, naming the file and the position:
        image, box and token (with its line).

    Examples
    --------
    One image of two unlabelled boxes, positive, three features:

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = pathlib.Path(tmp)
    ...     text = "1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n"
    ...     _ = (folder / "list.txt").write_text(text)
    ...     _ = (folder / "img_1.feature").write_text("1:0.5\\n")
    ...     _ = (folder / "img_2.feature").write_text("3:2\\n")
    ...     bags = load_latent_list(folder / "list.txt")
    >>> bags.data.X.shape, bags.image_labels.tolist(), bags.data.boxes[1].tolist()
    ((2, 3), [1], [5.0, 5.0, 14.0, 14.0])
    """
    path = Path(path)
    feature_dir = path.parent if feature_dir is None else Path(feature_dir)
    raw = read_bytes(path, "the latent list file", LIST_BYTES)
    check_final_newline(path, raw)
    examples = parse_latent_list(path, raw.decode("utf-8", errors="replace"), layout)

    files = latent_feature_files(path, feature_dir, examples, feature_root)
    feature_hash = hashlib.sha256()
    parsed = [_parse_feature_file(f, n_features, feature_hash) for f in files]
    d = (
        n_features
        if n_features is not None
        else max((int(i[-1]) for i, _ in parsed if i.size), default=0)
    )
    X = _feature_rows(parsed, files, d)

    boxes = corner_boxes(examples)
    counts = [e.box_ids.size for e in examples]
    objects = annotated_objects(path, examples, boxes, annotations)
    source = (
        f"latent AP-SVM list {path.resolve()} ({layout} layout, sha256 "
        f"{hashlib.sha256(raw).hexdigest()}), {len(files)} feature files in "
        f"{feature_dir.resolve()} (sha256 of their concatenation "
        f"{feature_hash.hexdigest()})"
    )
    data = DetectionData(
        X,
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        boxes,
        np.array([e.stem for e in examples], dtype=str),
        objects,
        source,
    )
    return LatentListData(
        data=data,
        box_labels=np.concatenate([e.box_labels for e in examples] or [np.zeros(0, np.int8)]),
        image_labels=np.array([e.label for e in examples], dtype=np.int8),
        box_ids=np.concatenate([e.box_ids for e in examples] or [np.zeros(0, np.int64)]),
        images=np.array([e.image - 1 for e in examples], dtype=np.int64),
    )


def corner_boxes(examples):
    """float64 (n_boxes, 4) x1 y1 x2 y2 (inclusive) of the examples' ``x y width height``."""
    boxes = np.concatenate([e.boxes for e in examples] or [np.zeros((0, 4))])
    boxes[:, 2:] += boxes[:, :2] - 1
    return boxes


def feature_files(examples):
    """The feature file of every box of ``examples``, in order, as the released reader names
    it: ``STEM_id.feature``, the stem as written (a path relative to the feature directory,
    or absolute)."""
    return [f"{e.stem}_{box_id}.feature" for e in examples for box_id in e.box_ids]


def latent_feature_files(path, feature_dir, examples, feature_root=None):
    """The feature file of every box of ``examples`` (`parse_latent_list`), in order, as a
    path: `feature_files` relative to ``feature_dir`` unless absolute. With ``feature_root``,
    a file that lies outside it (links followed) is refused naming its image and box; a
    ValueError names the missing files (the first few) and their image and box."""
    names = iter(feature_files(examples))
    root = None if feature_root is None else _real_root(path, feature_root)
    files, missing = [], []
    for e in examples:
        for b in range(e.box_ids.size):
            f = Path(feature_dir) / next(names)
            if root is not None and not Path(os.path.realpath(f)).is_relative_to(root):
                raise ValueError(
                    f"{e.where(path, b)}: its feature file lies outside the "
                    f"features root {feature_root}; expected every stem to stay "
                    "inside it (no '..' or absolute path out of it, no link "
                    "leading out)."
                )
            files.append(f)
            if not f.is_file():
                missing.append(f"{f.name} (image {e.image}, box {int(e.box_numbers[b])})")
    if missing:
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        raise ValueError(
            f"{path}: {len(missing)} of {len(files)} feature files are missing "
            f"from {feature_dir}: {'; '.join(missing[:_SHOWN])}{more} (pass "
            "feature_dir if they live elsewhere)."
        )
    return files


def _real_root(path, feature_root):
    """The features root with its links resolved; a ValueError when it is no directory."""
    root = Path(os.path.realpath(feature_root))
    if not root.is_dir():
        raise ValueError(f"{path}: the features root {feature_root} is not a directory.")
    return root


def image_id(stem):
    """The image id of a stem: its last component (``/data/voc/000005`` -> ``000005``)."""
    return PurePath(stem).name


def _parse_feature_file(f, n_features, digest=None):
    data = read_bytes(f, "the feature file", SAMPLE_BYTES)
    if digest is not None:
        digest.update(data)
    return parse_sparse_features(
        f, data.decode("utf-8", errors="replace"), n_features, hint=f" (n_features={n_features})"
    )


def _feature_rows(parsed, files, d):
    """float32 (len(files), d) from the parsed ``(index, value)`` of each feature file."""
    X = np.zeros((len(parsed), d), dtype=np.float32)
    for row, (index, value) in enumerate(parsed):
        X[row, index - 1] = as_float32(files[row], "the feature values", value)
    return X


def read_latent_features(files: Sequence[str | Path], n_features: int) -> np.ndarray:
    """The features of boxes, one sparse ``index:value`` feature file per box, checked.

    Parameters
    ----------
    files : sequence of str or pathlib.Path
        The feature files, one per box.
    n_features : int
        The feature dimension (an index above it is an error).

    Returns
    -------
    numpy.ndarray of shape (len(files), n_features)
        The features, float32.

    Raises
    ------
    ValueError
        On a missing or malformed file, or a value out of float32's range, naming the file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "img_1.feature"
    ...     _ = path.write_text("1:0.5 3:2\\n")
    ...     X = read_latent_features([path], 3)
    >>> X.dtype, X.tolist()
    (dtype('float32'), [[0.5, 0.0, 2.0]])
    """
    return _feature_rows(
        [_parse_feature_file(Path(f), n_features) for f in files], files, n_features
    )


LAYOUTS = ("pooled", "unpooled")


@dataclass(frozen=True, eq=False)  # arrays: no meaningful ==
class LatentExample:
    """One example of a latent list file: a bag of candidate boxes (`parse_latent_list`).

    Parameters
    ----------
    stem : str
        The feature files' stem.
    image : int
        The image record it comes from, 1-based in file order.
    boxes : ndarray of shape (k, 4), float64
        Its boxes, ``x y width height``.
    box_ids : ndarray of shape (k,), int64
        Each box's id (its feature file's suffix).
    box_labels : ndarray of shape (k,), int8
        Each box's label.
    box_numbers : ndarray of shape (k,), int64
        Each box's number within the image record, 1-based.
    label : int
        The example's label.

    Examples
    --------
    >>> text = "1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n"
    >>> [example] = parse_latent_list("list.txt", text)
    >>> example.stem, example.box_ids.tolist(), example.label
    ('img', [1, 2], 1)
    """

    stem: str
    image: int
    boxes: np.ndarray
    box_ids: np.ndarray
    box_labels: np.ndarray
    box_numbers: np.ndarray
    label: int

    def where(self, path, b=None):
        """Where the example, or one of its boxes, is in its list file, for messages.

        Parameters
        ----------
        path : str or pathlib.Path
            The list file.
        b : int or None, default None
            An index into the boxes; None: the example alone.

        Returns
        -------
        str
            ``PATH, image I ('STEM')``, followed by ``, box B`` with ``b``.

        Examples
        --------
        >>> text = "1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n"
        >>> [example] = parse_latent_list("list.txt", text)
        >>> example.where("list.txt", 1)
        "list.txt, image 1 ('img'), box 2"
        """
        text = f"{path}, image {self.image} ({shown(self.stem)})"
        return text if b is None else f"{text}, box {int(self.box_numbers[b])}"


class _Tokens:
    """The whitespace-separated tokens of a text, read one at a time as ``fscanf`` reads
    them (line breaks carry no meaning); positions for messages."""

    def __init__(self, path, text):
        self.path, self.text = path, text
        self._matches = re.finditer(r"\S+", text)
        self.count, self._start = 0, 0

    def at(self):
        """``token N (line L)`` of the token last taken."""
        return f"token {self.count} (line {self.text.count(chr(10), 0, self._start) + 1})"

    def take(self, what, where):
        match = next(self._matches, None)
        if match is None:
            raise ValueError(
                f"Truncated latent list file {self.path}: expected {what} of "
                f"{where} as token {self.count + 1}, but the file ends after "
                f"token {self.count}."
            )
        self.count, self._start = self.count + 1, match.start()
        return match.group()

    def integer(self, what, where, allowed=None, low=None):
        text = self.take(what, where)
        try:
            value = int(text)
        except ValueError:
            raise ValueError(
                f"{self.path}, {where}, {self.at()}: expected {what} to be an "
                f"integer; got {shown(text)}."
            ) from None
        if allowed is not None and value not in allowed:
            raise ValueError(
                f"{self.path}, {where}, {self.at()}: expected {what} in "
                f"{', '.join(map(str, allowed))}; got {value}."
            )
        if low is not None and value < low:
            raise ValueError(
                f"{self.path}, {where}, {self.at()}: expected {what} >= {low}; got {value}."
            )
        return value

    def number(self, what, where):
        text = self.take(what, where)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(
                f"{self.path}, {where}, {self.at()}: expected {what} to be a "
                f"finite number; got {shown(text)}."
            )
        return value

    def rest(self):
        """The first token after the last one taken, or None."""
        match = next(self._matches, None)
        if match is None:
            return None
        self.count, self._start = self.count + 1, match.start()
        return match.group()


def parse_latent_list(path: str | Path, text: str, layout: str = "pooled") -> list["LatentExample"]:
    """The examples of a latent list file's text, read token by token (see `load_latent_list`).

    Parameters
    ----------
    path : str or pathlib.Path
        The list file, named in errors.
    text : str
        Its text.
    layout : str, default "pooled"
        "pooled" or "unpooled".

    Returns
    -------
    list of LatentExample
        One per example, in file order.

    Raises
    ------
    ValueError
        On another layout, or text that is not such a list, naming the image, box and token
        (with its line).

    Examples
    --------
    >>> examples = parse_latent_list("list.txt", "1 img 1 1 1 10 10 7 0 1")
    >>> [(e.stem, e.box_ids.tolist(), e.label) for e in examples]
    [('img', [7], 1)]
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}.")
    tokens = _Tokens(path, text)
    n_images = tokens.integer("the number of images", "the file's start", low=0)
    examples = []
    for i in range(1, n_images + 1):
        image = f"image {i} of {n_images}"
        is_fs = 0
        if layout == "unpooled":
            is_fs = tokens.integer("is_fs (0 or 1)", image, (0, 1))
            tokens.integer("the image label", image, LABELS)  # the released code reads the
        stem = tokens.take("the stem", image)  # label after the boxes
        if "\0" in stem or stem.endswith("/") or not image_id(stem):
            raise ValueError(
                f"{path}, {image}, {tokens.at()}: the stem {shown(stem)} names "
                "no file; expected a file-name stem, or a path ending in one."
            )
        image = f"image {i} of {n_images} ({shown(stem)})"
        n_boxes = tokens.integer("the number of boxes", image, low=0)
        boxes, ids, labels = (
            np.empty((n_boxes, 4)),
            np.empty(n_boxes, np.int64),
            np.empty(n_boxes, np.int8),
        )
        for b in range(n_boxes):
            box = f"{image}, box {b + 1} of {n_boxes}"
            for k, what in enumerate(("x", "y", "width", "height")):
                boxes[b, k] = tokens.number(f"the box's {what}", box)
                if k >= 2 and boxes[b, k] <= 0:
                    raise ValueError(
                        f"{path}, {box}, {tokens.at()}: the box's {what} is "
                        f"{boxes[b, k]:g}; it must be > 0."
                    )
            ids[b] = tokens.integer("the box id", box, low=0)
            labels[b] = tokens.integer("the box label", box, (0, 1) if is_fs else LABELS)
        label = tokens.integer("the image label", image, LABELS)
        examples += _examples(path, stem, i, boxes, ids, labels, label, is_fs, layout, tokens)
    extra = tokens.rest()
    if extra is not None:
        raise ValueError(
            f"{path}, {tokens.at()}: unexpected content after the {n_images} "
            f"images the file declares: {shown(extra)}."
        )
    return examples


#: labels of a box or an image: 1 positive (a box: supervised), 0 negative, -1 unknown
LABELS = (-1, 0, 1)


def _examples(path, stem, i, boxes, ids, labels, label, is_fs, layout, tokens):
    """The examples of image ``i``'s record, as the released reader forms them."""
    numbers = np.arange(1, ids.size + 1)
    if is_fs:  # unpooled, fully supervised: every candidate an example, its label its own
        return [
            LatentExample(
                stem,
                i,
                boxes[b : b + 1],
                ids[b : b + 1],
                labels[b : b + 1],
                numbers[b : b + 1],
                int(labels[b]),
            )
            for b in range(ids.size)
        ]
    supervised = np.flatnonzero(labels == 1) if layout == "pooled" else np.zeros(0, int)
    if supervised.size and label != 1:
        raise ValueError(
            f"{path}, image {i} ({shown(stem)}), {tokens.at()}: box "
            f"{supervised[0] + 1} is a supervised positive (box label 1) in an "
            f"image labelled {label}; expected the image label 1."
        )
    if supervised.size:  # pooled: each supervised box an example, the other boxes dropped
        return [
            LatentExample(
                stem,
                i,
                boxes[b : b + 1],
                ids[b : b + 1],
                labels[b : b + 1],
                numbers[b : b + 1],
                label,
            )
            for b in supervised
        ]
    return [LatentExample(stem, i, boxes, ids, labels, numbers, label)]


def annotated_objects(path, examples, boxes, annotations):
    """Per example ``(boxes, class index, difficult)`` of its image from ``annotations``
    (empty without), each box checked to lie inside its annotated image."""
    if annotations is None:
        return tuple((np.empty((0, 4)), np.empty(0, np.int64), np.empty(0, bool)) for _ in examples)
    objects, start = [], 0
    for e in examples:
        note = annotations.get(image_id(e.stem))
        if note is None:
            raise ValueError(
                f"{e.where(path)}: the image has no annotation among the {len(annotations)} given."
            )
        n = e.box_ids.size
        outside = np.flatnonzero(_outside(boxes[start : start + n], note.width, note.height))
        if outside.size:
            k = int(outside[0])
            raise ValueError(
                f"{e.where(path, k)}: box {boxes[start + k].tolist()} (x1 y1 x2 "
                f"y2) is outside the image of {note.width} x {note.height} "
                "pixels."
            )
        objects.append((note.boxes, note.classes, note.difficult))
        start += n
    return tuple(objects)


def _outside(boxes, width, height):
    return (boxes[:, :2] < 1).any(axis=1) | (boxes[:, 2] > width) | (boxes[:, 3] > height)
