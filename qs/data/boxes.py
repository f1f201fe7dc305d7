"""Readers of VOC2007 box-feature data as users of this line of work hold it.

- `load_latent_list`: the latent AP-SVM's list file and its ``STEM_ID.feature`` sparse
  feature files, in the two layouts of Behl et al.'s released reader (pooled, unpooled).
- `load_rcnn_cache`: R-CNN-style per-image MATLAB files (``boxes``, ``feat``, optional
  ``gt``, ``class``, ``overlap``), v5 or v7.3.
- `load_voc_annotation`, `load_image_set`: the VOC devkit's per-image XML and image-set lists.

All files are untrusted: every fault raises a one-line ValueError naming the file and the
position (line, field, or image, box and token). Boxes come out as `DetectionData` boxes:
x1 y1 x2 y2, 1-based inclusive pixels.
"""

import hashlib
import math
import re
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qs.data.files import (
    LIST_BYTES,
    SAMPLE_BYTES,
    check_final_newline,
    check_regular,
    read_bytes,
    shown,
)
from qs.data.formats import read_isolated, read_mat
from qs.data.sparse_text import parse_sparse_features
from qs.data.voc2007 import CLASSES, DetectionData

__all__ = ["LAYOUTS", "LatentExample", "LatentListData", "VocAnnotation", "load_image_set",
           "load_latent_list", "load_rcnn_cache", "load_voc_annotation"]

_SHOWN = 5  # missing files named in one message, at most
_IMAGE_ID = re.compile(r"[A-Za-z0-9._-]+")  # an image id names its files: portable characters


@dataclass(frozen=True, eq=False)  # arrays: no meaningful ==
class LatentListData:
    """A latent AP-SVM list file read in full, one bag per example (`parse_latent_list`): the
    boxes and features as `DetectionData` (its ``image_ids`` are the examples' stems, repeated
    where one image gives several examples), each box's label (0 in a negative image, -1
    unknown in a positive one, 1 supervised), each example's label, each box's ``id`` (its
    feature file's suffix) and each example's image record (0-based, in file order)."""

    data: DetectionData
    box_labels: np.ndarray  # int8 (n_boxes,)
    image_labels: np.ndarray  # int8 (n_examples,)
    box_ids: np.ndarray  # int64 (n_boxes,)
    images: np.ndarray  # int64 (n_examples,)


def load_latent_list(path, feature_dir=None, n_features=None, *, layout="pooled",
                     annotations=None):
    """Read a latent AP-SVM list file and its box feature files as the released latent
    AP-SVM reads them: whitespace-separated tokens, line breaks carrying no meaning.

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

    Box ``id``'s features are in ``STEM_id.feature`` (in the list file's directory or
    ``feature_dir``). ``n_features``: the feature dimension (an index above it is an error);
    by default the largest index found. ``annotations``: ``{image id: VocAnnotation}`` (e.g.
    from `load_voc_annotation`) for every stem; it gives the image sizes that boxes are
    checked against and the ground-truth objects, which are otherwise empty. Errors name the
    file and the position: image, box and token (with its line).
    """
    path = Path(path)
    feature_dir = path.parent if feature_dir is None else Path(feature_dir)
    raw = read_bytes(path, "the latent list file", LIST_BYTES)
    check_final_newline(path, raw)
    examples = parse_latent_list(path, raw.decode("utf-8", errors="replace"), layout)

    files = latent_feature_files(path, feature_dir, examples)
    feature_hash = hashlib.sha256()
    parsed = [_parse_feature_file(f, n_features, feature_hash) for f in files]
    d = n_features if n_features is not None else max(
        (int(i[-1]) for i, _ in parsed if i.size), default=0)
    X = _feature_rows(parsed, files, d)

    boxes = corner_boxes(examples)
    counts = [e.box_ids.size for e in examples]
    objects = annotated_objects(path, examples, boxes, annotations)
    source = (f"latent AP-SVM list {path.resolve()} ({layout} layout, sha256 "
              f"{hashlib.sha256(raw).hexdigest()}), {len(files)} feature files in "
              f"{feature_dir.resolve()} (sha256 of their concatenation "
              f"{feature_hash.hexdigest()})")
    data = DetectionData(X, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), boxes,
                         np.array([e.stem for e in examples], dtype=str), objects, source)
    return LatentListData(
        data=data,
        box_labels=np.concatenate([e.box_labels for e in examples] or [np.zeros(0, np.int8)]),
        image_labels=np.array([e.label for e in examples], dtype=np.int8),
        box_ids=np.concatenate([e.box_ids for e in examples] or [np.zeros(0, np.int64)]),
        images=np.array([e.image - 1 for e in examples], dtype=np.int64))


def corner_boxes(examples):
    """float64 (n_boxes, 4) x1 y1 x2 y2 (inclusive) of the examples' ``x y width height``."""
    boxes = np.concatenate([e.boxes for e in examples] or [np.zeros((0, 4))])
    boxes[:, 2:] += boxes[:, :2] - 1
    return boxes


def latent_feature_files(path, feature_dir, examples):
    """The feature file of every box of ``examples`` (`parse_latent_list`), in order; a
    ValueError names the missing files (the first few) and their image and box."""
    files, missing = [], []
    for e in examples:
        for b, box_id in enumerate(e.box_ids):
            f = Path(feature_dir) / f"{e.stem}_{box_id}.feature"
            files.append(f)
            if not f.is_file():
                missing.append(f"{f.name} (image {e.image}, box {int(e.box_numbers[b])})")
    if missing:
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        raise ValueError(f"{path}: {len(missing)} of {len(files)} feature files are missing "
                         f"from {feature_dir}: {'; '.join(missing[:_SHOWN])}{more} (pass "
                         "feature_dir if they live elsewhere).")
    return files


def _parse_feature_file(f, n_features, digest=None):
    data = read_bytes(f, "the feature file", SAMPLE_BYTES)
    if digest is not None:
        digest.update(data)
    return parse_sparse_features(f, data.decode("utf-8", errors="replace"), n_features,
                                 hint=f" (n_features={n_features})")


def _feature_rows(parsed, files, d):
    """float32 (len(files), d) from the parsed ``(index, value)`` of each feature file."""
    X = np.zeros((len(parsed), d), dtype=np.float32)
    for row, (index, value) in enumerate(parsed):
        X[row, index - 1] = _float32(files[row], "the feature values", value)
    return X


def read_latent_features(files, n_features):
    """float32 (len(files), n_features): one box's features per file, checked."""
    return _feature_rows([_parse_feature_file(Path(f), n_features) for f in files], files,
                         n_features)


LAYOUTS = ("pooled", "unpooled")


@dataclass(frozen=True, eq=False)  # arrays: no meaningful ==
class LatentExample:
    """One example (a bag of candidate boxes) of a latent list file: the feature-file
    ``stem``, the ``image`` record it comes from (1-based, in file order), its boxes
    (``x y width height`` float64 (k, 4)), their ``box_ids``, ``box_labels`` and 1-based
    ``box_numbers`` within the record, and the example's label."""

    stem: str
    image: int
    boxes: np.ndarray
    box_ids: np.ndarray
    box_labels: np.ndarray
    box_numbers: np.ndarray
    label: int

    def where(self, path, b=None):
        """``PATH, image I ('STEM')`` and ``, box B`` when ``b`` (an index into the boxes)."""
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
            raise ValueError(f"Truncated latent list file {self.path}: expected {what} of "
                             f"{where} as token {self.count + 1}, but the file ends after "
                             f"token {self.count}.")
        self.count, self._start = self.count + 1, match.start()
        return match.group()

    def integer(self, what, where, allowed=None, low=None):
        text = self.take(what, where)
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{self.path}, {where}, {self.at()}: expected {what} to be an "
                             f"integer; got {shown(text)}.") from None
        if allowed is not None and value not in allowed:
            raise ValueError(f"{self.path}, {where}, {self.at()}: expected {what} in "
                             f"{', '.join(map(str, allowed))}; got {value}.")
        if low is not None and value < low:
            raise ValueError(f"{self.path}, {where}, {self.at()}: expected {what} >= {low}; "
                             f"got {value}.")
        return value

    def number(self, what, where):
        text = self.take(what, where)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{self.path}, {where}, {self.at()}: expected {what} to be a "
                             f"finite number; got {shown(text)}.")
        return value

    def rest(self):
        """The first token after the last one taken, or None."""
        match = next(self._matches, None)
        if match is None:
            return None
        self.count, self._start = self.count + 1, match.start()
        return match.group()


def parse_latent_list(path, text, layout="pooled"):
    """The examples (`LatentExample`) of a latent list file's ``text``, read token by token
    in ``layout`` (see `load_latent_list`)."""
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
        stem = tokens.take("the stem", image)                 # label after the boxes
        if "/" in stem or "\\" in stem:
            raise ValueError(f"{path}, {image}, {tokens.at()}: the stem {shown(stem)} holds a "
                             "path separator; expected a file-name stem.")
        image = f"image {i} of {n_images} ({shown(stem)})"
        n_boxes = tokens.integer("the number of boxes", image, low=0)
        boxes, ids, labels = np.empty((n_boxes, 4)), np.empty(n_boxes, np.int64), \
            np.empty(n_boxes, np.int8)
        for b in range(n_boxes):
            box = f"{image}, box {b + 1} of {n_boxes}"
            for k, what in enumerate(("x", "y", "width", "height")):
                boxes[b, k] = tokens.number(f"the box's {what}", box)
                if k >= 2 and boxes[b, k] <= 0:
                    raise ValueError(f"{path}, {box}, {tokens.at()}: the box's {what} is "
                                     f"{boxes[b, k]:g}; it must be > 0.")
            ids[b] = tokens.integer("the box id", box, low=0)
            labels[b] = tokens.integer("the box label", box, (0, 1) if is_fs else LABELS)
        label = tokens.integer("the image label", image, LABELS)
        examples += _examples(path, stem, i, boxes, ids, labels, label, is_fs, layout, tokens)
    extra = tokens.rest()
    if extra is not None:
        raise ValueError(f"{path}, {tokens.at()}: unexpected content after the {n_images} "
                         f"images the file declares: {shown(extra)}.")
    return examples


#: labels of a box or an image: 1 positive (a box: supervised), 0 negative, -1 unknown
LABELS = (-1, 0, 1)


def _examples(path, stem, i, boxes, ids, labels, label, is_fs, layout, tokens):
    """The examples of image ``i``'s record, as the released reader forms them."""
    numbers = np.arange(1, ids.size + 1)
    if is_fs:  # unpooled, fully supervised: every candidate an example, its label its own
        return [LatentExample(stem, i, boxes[b:b + 1], ids[b:b + 1], labels[b:b + 1],
                              numbers[b:b + 1], int(labels[b])) for b in range(ids.size)]
    supervised = np.flatnonzero(labels == 1) if layout == "pooled" else np.zeros(0, int)
    if supervised.size and label != 1:
        raise ValueError(f"{path}, image {i} ({shown(stem)}), {tokens.at()}: box "
                         f"{supervised[0] + 1} is a supervised positive (box label 1) in an "
                         f"image labelled {label}; expected the image label 1.")
    if supervised.size:  # pooled: each supervised box an example, the other boxes dropped
        return [LatentExample(stem, i, boxes[b:b + 1], ids[b:b + 1], labels[b:b + 1],
                              numbers[b:b + 1], label) for b in supervised]
    return [LatentExample(stem, i, boxes, ids, labels, numbers, label)]


def annotated_objects(path, examples, boxes, annotations):
    """Per example ``(boxes, class index, difficult)`` of its image from ``annotations``
    (empty without), each box checked to lie inside its annotated image."""
    if annotations is None:
        return tuple((np.empty((0, 4)), np.empty(0, np.int64), np.empty(0, bool))
                     for _ in examples)
    objects, start = [], 0
    for e in examples:
        note = annotations.get(e.stem)
        if note is None:
            raise ValueError(f"{e.where(path)}: the image has no annotation among the "
                             f"{len(annotations)} given.")
        n = e.box_ids.size
        outside = np.flatnonzero(_outside(boxes[start:start + n], note.width, note.height))
        if outside.size:
            k = int(outside[0])
            raise ValueError(f"{e.where(path, k)}: box {boxes[start + k].tolist()} (x1 y1 x2 "
                             f"y2) is outside the image of {note.width} x {note.height} "
                             "pixels.")
        objects.append((note.boxes, note.classes, note.difficult))
        start += n
    return tuple(objects)


def _outside(boxes, width, height):
    return ((boxes[:, :2] < 1).any(axis=1) | (boxes[:, 2] > width) | (boxes[:, 3] > height))


def load_rcnn_cache(paths_or_dir):
    """Read R-CNN-style per-image ``.mat`` feature caches (v5 or v7.3) into `DetectionData`.

    ``paths_or_dir``: a directory (its ``*.mat`` files, sorted) or a list of files; each file
    is one image, named by its stem. A file holds ``boxes`` (K x 4: x1 y1 x2 y2, 1-based) and
    ``feat`` (K x d, d the same in every file), and optionally ``gt`` (K, true for the
    ground-truth boxes), ``class`` (K, their class 1..20, 0 elsewhere) and ``overlap`` (K x
    20, IoU with each class's objects). With ``gt`` and ``class``, the ground-truth boxes are
    the image's objects (R-CNN's caches leave difficult objects out, so none is difficult);
    without, the objects are empty. The files are read in a worker process (a damaged one can
    crash scipy's or h5py's reader): see `qs.data.formats.read_isolated`.
    """
    paths = mat_paths(paths_or_dir)
    X, boxes, counts, objects, digest, d = [], [], [], [], hashlib.sha256(), None
    with closing(read_isolated(paths, read_rcnn_file)) as files:
        for path, (feat, b, obj) in zip(paths, files):
            if d is None:
                d = feat.shape[1]
            elif feat.shape[1] != d:
                raise ValueError(f"{path}: feat has {feat.shape[1]} columns, but {paths[0]} "
                                 f"has {d}; every file must hold the same feature dimension.")
            objects.append(obj)
            X.append(feat)
            boxes.append(b)
            counts.append(feat.shape[0])
            digest.update(path.read_bytes())
    source = (f"R-CNN .mat caches, {len(paths)} files in {paths[0].parent.resolve()} (sha256 "
              f"of their concatenation {digest.hexdigest()})")
    return DetectionData(np.concatenate(X), np.concatenate([[0], np.cumsum(counts)])
                         .astype(np.int64), np.concatenate(boxes),
                         np.array([p.stem for p in paths], dtype=str), tuple(objects), source)


def read_rcnn_file(path):
    """One R-CNN cache file, checked: ``(feat float32 (K, d), boxes float64 (K, 4), (object
    boxes, object classes, difficult))`` as `load_rcnn_cache` describes them. Read in this
    process: callers isolate it (`read_isolated`, or `qs.data.convert`'s workers)."""
    path = Path(path)
    names, found = read_mat(path, ("boxes", "feat", "gt", "class", "overlap"))
    missing = [k for k in ("boxes", "feat") if k not in found]
    if missing:
        raise ValueError(f"{path}: no variable {', '.join(missing)}; an R-CNN cache holds "
                         f"boxes and feat; this file holds {', '.join(names) or 'none'}.")
    feat = _numeric(path, "feat", found["feat"], ndim=2)
    k = feat.shape[0]
    b = _numeric(path, "boxes", found["boxes"], ndim=2)
    if b.shape != (k, 4):
        raise ValueError(f"{path}: boxes must have shape ({k}, 4), one x1 y1 x2 y2 row per "
                         f"row of feat; got {b.shape}.")
    bad = np.flatnonzero((b[:, :2] < 1).any(axis=1) | (b[:, 2] < b[:, 0])
                         | (b[:, 3] < b[:, 1]))
    if bad.size:
        raise ValueError(f"{path}: boxes row {bad[0]} is {b[bad[0]].tolist()}; expected "
                         "1-based x1 y1 x2 y2 with x2 >= x1 and y2 >= y1.")
    return _float32(path, "feat", feat), b, _rcnn_objects(path, found, b, k)


def mat_paths(paths_or_dir):
    """The R-CNN cache files of a directory (its ``*.mat`` files, sorted) or a list, each a
    regular file (a symlink to a device or a FIFO is refused before a reader opens it)."""
    if isinstance(paths_or_dir, (str, Path)) and Path(paths_or_dir).is_dir():
        paths = sorted(Path(paths_or_dir).glob("*.mat"))
        if not paths:
            raise ValueError(f"{paths_or_dir}: no .mat files in this directory.")
    else:
        paths = [Path(p) for p in ([paths_or_dir] if isinstance(paths_or_dir, (str, Path))
                                   else paths_or_dir)]
        if not paths:
            raise ValueError("No R-CNN cache files given.")
    for path in paths:
        check_regular(path, "the R-CNN cache file")
    return paths


def _numeric(path, name, a, ndim):
    """A stored array as finite float64 of ``ndim`` dimensions (MATLAB vectors flattened)."""
    a = np.asarray(a.toarray() if hasattr(a, "toarray") else a)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{path}: {name} must hold numbers; got dtype {a.dtype}.")
    if ndim == 1 and a.ndim == 2 and 1 in a.shape:  # MATLAB keeps vectors 2-D
        a = a.ravel()
    if a.ndim != ndim:
        raise ValueError(f"{path}: {name} must be {ndim}-D; got shape {a.shape}.")
    a = a.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(a.ravel()))
    if bad.size:
        raise ValueError(f"{path}: {name} must be finite; got {float(a.ravel()[bad[0]])} at flat "
                         f"index {bad[0]} ({bad.size} non-finite in all).")
    return a


def _float32(path, name, a):
    """Finite float64 values as float32, an error where they overflow it."""
    big = np.flatnonzero(np.abs(a.ravel()) > np.finfo(np.float32).max)
    if big.size:
        raise ValueError(f"{path}: {name} hold {float(a.ravel()[big[0]])}, beyond float32 "
                         f"(the features are kept as float32).")
    return a.astype(np.float32)


def _rcnn_objects(path, found, boxes, k):
    """``(boxes, class index, difficult)`` of the ground-truth rows, checked against K."""
    for name, width in (("gt", None), ("class", None), ("overlap", len(CLASSES))):
        if name in found:
            a = _numeric(path, name, found[name], ndim=1 if width is None else 2)
            if a.shape != ((k,) if width is None else (k, width)):
                raise ValueError(f"{path}: {name} must have shape "
                                 f"{(k,) if width is None else (k, width)}, one row per box; "
                                 f"got {a.shape}.")
            found[name] = a
    if "gt" not in found:
        return np.empty((0, 4)), np.empty(0, np.int64), np.empty(0, bool)
    gt = found["gt"]
    if not np.isin(gt, (0, 1)).all():
        raise ValueError(f"{path}: gt must hold 0 or 1 per box; got {np.unique(gt)[:5]}.")
    gt = gt.astype(bool)
    if "class" not in found:
        raise ValueError(f"{path}: gt is given without class; the ground-truth boxes need it.")
    cls = found["class"][gt]
    if not np.isin(cls, np.arange(1, len(CLASSES) + 1)).all():
        raise ValueError(f"{path}: class must be 1..{len(CLASSES)} on every gt box; got "
                         f"{sorted(set(cls.tolist()))[:5]}.")
    return boxes[gt], cls.astype(np.int64) - 1, np.zeros(int(gt.sum()), bool)


@dataclass(frozen=True, eq=False)
class VocAnnotation:
    """One VOC devkit annotation: the image's id and size, and its objects (boxes x1 y1 x2 y2,
    1-based inclusive; class indices into `CLASSES`; difficult and truncated flags)."""

    image_id: str
    width: int
    height: int
    names: tuple
    boxes: np.ndarray  # float64 (m, 4)
    classes: np.ndarray  # int64 (m,)
    difficult: np.ndarray  # bool (m,)
    truncated: np.ndarray  # bool (m,)


def load_voc_annotation(xml_path):
    """Read one VOC devkit annotation XML file (the image id is the file's stem).

    The XML is untrusted: it is parsed with defusedxml, which refuses DTDs, entities and
    external references (an entity-expansion "billion laughs" file would otherwise take the
    memory). An unknown class, a missing or non-integer field, or a box outside the image
    raises a ValueError naming the file and the object.
    """
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    xml_path = Path(xml_path)
    raw = read_bytes(xml_path, "the VOC annotation", SAMPLE_BYTES)
    try:
        root = fromstring(raw, forbid_dtd=True)
    except (ParseError, DefusedXmlException) as err:
        raise ValueError(f"Cannot read the VOC annotation {xml_path}: {type(err).__name__}: "
                         f"{err}") from None
    width = _xml_int(xml_path, root, "size/width", "the image")
    height = _xml_int(xml_path, root, "size/height", "the image")
    if width < 1 or height < 1:
        raise ValueError(f"{xml_path}: image size {width} x {height}; both must be >= 1.")
    names, boxes, difficult, truncated = [], [], [], []
    for j, obj in enumerate(root.findall("object"), 1):
        where = f"object {j}"
        name = (obj.findtext("name") or "").strip()
        if name not in CLASSES:
            raise ValueError(f"{xml_path}: {where} has class {shown(name)}; expected one of "
                             f"{', '.join(CLASSES)}.")
        box = [_xml_int(xml_path, obj, f"bndbox/{f}", where)
               for f in ("xmin", "ymin", "xmax", "ymax")]
        if not (1 <= box[0] <= box[2] <= width and 1 <= box[1] <= box[3] <= height):
            raise ValueError(f"{xml_path}: {where} ({name}) has bndbox {box} (xmin ymin xmax "
                             f"ymax); expected 1 <= xmin <= xmax <= {width} and 1 <= ymin <= "
                             f"ymax <= {height}.")
        names.append(name)
        boxes.append(box)
        difficult.append(_xml_flag(xml_path, obj, "difficult", where))
        truncated.append(_xml_flag(xml_path, obj, "truncated", where))
    return VocAnnotation(xml_path.stem, width, height, tuple(names),
                         np.array(boxes, dtype=np.float64).reshape(-1, 4),
                         np.array([CLASSES.index(n) for n in names], dtype=np.int64),
                         np.array(difficult, dtype=bool), np.array(truncated, dtype=bool))


def _xml_int(path, node, field, where):
    text = node.findtext(field)
    if text is None:
        raise ValueError(f"{path}: {where} has no {field} field.")
    try:
        return int(float(text.strip()))  # a few VOC files write coordinates as "273.0"
    except ValueError:
        raise ValueError(f"{path}: {where} has {field} {shown(text.strip())}; expected an "
                         "integer.") from None


def _xml_flag(path, node, field, where):
    """A 0/1 flag; absent means 0, as in the devkit."""
    if node.find(field) is None:
        return False
    value = _xml_int(path, node, field, where)
    if value not in (0, 1):
        raise ValueError(f"{path}: {where} has {field} {value}; expected 0 or 1.")
    return bool(value)


def load_image_set(path):
    """Read a VOC image-set list: ``(ids, None)`` for a list of ids (``trainval.txt``), or
    ``(ids, labels)`` for a class list (``aeroplane_trainval.txt``: an id and 1 present, -1
    absent, 0 only difficult per line). An id names its files (``ID.mat``, ``ID.xml``), so it
    is letters, digits and ``._-`` only; every line ends with a newline."""
    path = Path(path)
    raw = read_bytes(path, "the image set", LIST_BYTES)
    check_final_newline(path, raw)
    text = raw.decode("utf-8", errors="replace")
    rows = [(no, line.split()) for no, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not rows:
        return np.array([], dtype=str), None
    width = len(rows[0][1])
    if width not in (1, 2):
        raise ValueError(f"{path}, line {rows[0][0]}: expected an image id, or an id and a "
                         f"label; got {shown(' '.join(rows[0][1]))}.")
    ids, labels, seen = [], [], {}
    for no, fields in rows:
        if len(fields) != width:
            raise ValueError(f"{path}, line {no}: expected {width} field(s) as on line "
                             f"{rows[0][0]}; got {shown(' '.join(fields))}.")
        if not _IMAGE_ID.fullmatch(fields[0]) or fields[0] in (".", ".."):
            raise ValueError(f"{path}, line {no}: the image id {shown(fields[0])} is not a "
                             "file name of letters, digits and ._- (no directory, nothing that "
                             "climbs out of one); expected an id such as 000005.")
        if fields[0] in seen:
            raise ValueError(f"{path}, line {no}: image {shown(fields[0])} is listed twice (first "
                             f"on line {seen[fields[0]]}).")
        seen[fields[0]] = no
        ids.append(fields[0])
        if width == 2:
            if fields[1] not in ("1", "-1", "0"):
                raise ValueError(f"{path}, line {no}: expected the label 1, -1 or 0; got "
                                 f"{shown(fields[1])}.")
            labels.append(int(fields[1]))
    return np.array(ids, dtype=str), (np.array(labels, dtype=np.int8) if width == 2 else None)
