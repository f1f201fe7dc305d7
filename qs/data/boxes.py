"""Readers of VOC2007 box-feature data as users of this line of work hold it.

- `load_latent_list`: the latent AP-SVM's list file and its ``STEM_ID.feature`` sparse
  feature files (Behl et al.'s released layout, as ../shared/EXPERIMENTS.md gives it).
- `load_rcnn_cache`: R-CNN-style per-image MATLAB files (``boxes``, ``feat``, optional
  ``gt``, ``class``, ``overlap``), v5 or v7.3.
- `load_voc_annotation`, `load_image_set`: the VOC devkit's per-image XML and image-set lists.

All files are untrusted: every fault raises a one-line ValueError naming the file and the
line or field. Boxes come out as `DetectionData` boxes: x1 y1 x2 y2, 1-based inclusive pixels.
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

__all__ = ["LatentListData", "VocAnnotation", "load_image_set", "load_latent_list",
           "load_rcnn_cache", "load_voc_annotation"]

_SHOWN = 5  # missing files named in one message, at most
_IMAGE_ID = re.compile(r"[A-Za-z0-9._-]+")  # an image id names its files: portable characters


@dataclass(frozen=True, eq=False)  # arrays: no meaningful ==
class LatentListData:
    """A latent AP-SVM list file read in full: the boxes and features as `DetectionData`,
    each box's label (0 in a negative image, -1 unknown in a positive one, 1 supervised), each
    image's label as the file gives it, and each box's ``id`` (its feature file's suffix)."""

    data: DetectionData
    box_labels: np.ndarray  # int8 (n_boxes,)
    image_labels: np.ndarray  # int8 (n_images,)
    box_ids: np.ndarray  # int64 (n_boxes,)


def load_latent_list(path, feature_dir=None, n_features=None, *, annotations=None):
    """Read a latent AP-SVM list file and its box feature files.

    Layout (whitespace separated, one record per line, blank lines skipped)::

        N                               number of images
        STEM n_boxes                    per image: its feature-file stem and box count,
        x y width height id label       n_boxes box lines (x, y: 1-based top-left pixel),
        image_label                     and the image's label

    Box ``id``'s features are in ``STEM_id.feature`` (in the list file's directory or
    ``feature_dir``). The released code's "pooled" mode is a training option over the same
    file, so there is one layout. ``n_features``: the feature dimension (an index above it is
    an error); by default the largest index found. ``annotations``: ``{image id:
    VocAnnotation}`` (e.g. from `load_voc_annotation`) for every stem; it gives the image sizes
    that boxes are checked against and the ground-truth objects, which are otherwise empty.
    """
    path = Path(path)
    feature_dir = path.parent if feature_dir is None else Path(feature_dir)
    raw = read_bytes(path, "the latent list file", LIST_BYTES)
    check_final_newline(path, raw)
    images = parse_latent_list(path, raw.decode("utf-8", errors="replace"))

    files = latent_feature_files(path, feature_dir, images)
    feature_hash = hashlib.sha256()
    parsed = [_parse_feature_file(f, n_features, feature_hash) for _, f in files]
    d = n_features if n_features is not None else max(
        (int(i[-1]) for i, _ in parsed if i.size), default=0)
    X = _feature_rows(parsed, [f for _, f in files], d)

    boxes = np.array([b[1] for _, _, lines, _ in images for b in lines],
                     dtype=np.float64).reshape(-1, 4)
    boxes[:, 2:] += boxes[:, :2] - 1  # x y width height -> x1 y1 x2 y2, inclusive
    counts = [len(lines) for _, _, lines, _ in images]
    stems = np.array([stem for stem, *_ in images], dtype=str)
    objects = annotated_objects(path, images, boxes, counts, annotations)
    source = (f"latent AP-SVM list {path.resolve()} (sha256 {hashlib.sha256(raw).hexdigest()}), "
              f"{len(files)} feature files in {feature_dir.resolve()} (sha256 of their "
              f"concatenation {feature_hash.hexdigest()})")
    data = DetectionData(X, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), boxes,
                         stems, objects, source)
    return LatentListData(
        data=data,
        box_labels=np.array([b[3] for _, _, lines, _ in images for b in lines], dtype=np.int8),
        image_labels=np.array([label for *_, label in images], dtype=np.int8),
        box_ids=np.array([int(b[2]) for _, _, lines, _ in images for b in lines],
                         dtype=np.int64))


def latent_feature_files(path, feature_dir, images):
    """``[(list line, feature file)]`` of every box of ``images`` (as `parse_latent_list`
    gives them); a ValueError names the missing files (the first few) and their lines."""
    files = [(no, Path(feature_dir) / f"{stem}_{box_id}.feature")
             for stem, _, box_lines, _ in images for no, _, box_id, _ in box_lines]
    missing = [(no, f) for no, f in files if not f.is_file()]
    if missing:
        shown = "; ".join(f"{f.name} (line {no})" for no, f in missing[:_SHOWN])
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        raise ValueError(f"{path}: {len(missing)} of {len(files)} feature files are missing "
                         f"from {feature_dir}: {shown}{more} (pass feature_dir if they live "
                         "elsewhere).")
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


def parse_latent_list(path, text):
    """Images ``(stem, header line, [(line, x y w h, id text, label)], image label)``."""
    lines = ((no, line.split()) for no, line in enumerate(text.splitlines(), 1) if line.strip())
    last = [0]

    def take(what):
        line = next(lines, None)
        if line is None:
            raise ValueError(f"Truncated latent list file {path}: expected {what} after line "
                             f"{last[0]}, but the file ends there.")
        last[0] = line[0]
        return line

    def integer(no, text, what, allowed=None):
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{path}, line {no}: expected {what} to be an integer; got "
                             f"{shown(text)}.") from None
        if allowed is not None and value not in allowed:
            raise ValueError(f"{path}, line {no}: expected {what} in "
                             f"{', '.join(map(str, allowed))}; got {value}.")
        return value

    def count(no, fields, what):
        if len(fields) != 1 or integer(no, fields[0], what) < 0:
            raise ValueError(f"{path}, line {no}: expected {what} (one integer >= 0); got "
                             f"{shown(' '.join(fields))}.")
        return int(fields[0])

    no, fields = take("the number of images")
    n_images = count(no, fields, "the number of images")
    images = []
    for i in range(1, n_images + 1):
        header, fields = take(f"the header (STEM n_boxes) of image {i} of {n_images}")
        if len(fields) != 2:
            raise ValueError(f"{path}, line {header}: expected the header of image {i} of "
                             f"{n_images} (STEM n_boxes); got {shown(' '.join(fields))}.")
        stem, n_boxes = fields[0], count(header, fields[1:], "the number of boxes")
        if "/" in stem or "\\" in stem:
            raise ValueError(f"{path}, line {header}: the stem {shown(stem)} holds a path "
                             "separator; expected a file-name stem.")
        box_lines = []
        for b in range(1, n_boxes + 1):
            no, fields = take(f"box {b} of {n_boxes} of image {shown(stem)}")
            if len(fields) != 6:
                raise ValueError(
                    f"{path}, line {no}: image {shown(stem)} (line {header}) declares {n_boxes} "
                    f"boxes, but box line {b} reads {shown(' '.join(fields))}; expected "
                    "'x y width height id label'.")
            coords = [_finite(path, no, f, "a box coordinate") for f in fields[:4]]
            if coords[2] <= 0 or coords[3] <= 0:
                raise ValueError(f"{path}, line {no}: box of image {shown(stem)} has width "
                                 f"{fields[2]} and height {fields[3]}; both must be > 0.")
            box_id = integer(no, fields[4], "the box id")
            if box_id < 0:
                raise ValueError(f"{path}, line {no}: expected the box id >= 0; got {box_id}.")
            box_lines.append((no, coords, fields[4],
                              integer(no, fields[5], "the box label", (-1, 0, 1))))
        no, fields = take(f"the label line of image {shown(stem)}")
        if len(fields) != 1:
            raise ValueError(f"{path}, line {no}: image {shown(stem)} (line {header}) declares "
                             f"{n_boxes} boxes, but another line follows them: "
                             f"{shown(' '.join(fields))}; expected the image label.")
        images.append((stem, header, box_lines,
                       integer(no, fields[0], "the image label", (-1, 0, 1))))
    extra = next(lines, None)
    if extra is not None:
        raise ValueError(f"{path}, line {extra[0]}: unexpected content after the {n_images} "
                         f"images the first line declares: {shown(' '.join(extra[1]))}.")
    return images


def _finite(path, no, text, what):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{path}, line {no}: expected {what} to be a finite number; got "
                         f"{shown(text)}.")
    return value


def annotated_objects(path, images, boxes, counts, annotations):
    """Per image ``(boxes, class index, difficult)`` from ``annotations`` (empty without),
    each box checked to lie inside its annotated image."""
    if annotations is None:
        return tuple((np.empty((0, 4)), np.empty(0, np.int64), np.empty(0, bool))
                     for _ in images)
    objects, start = [], 0
    for (stem, header, box_lines, _), n in zip(images, counts):
        note = annotations.get(stem)
        if note is None:
            raise ValueError(f"{path}, line {header}: image {shown(stem)} has no annotation among "
                             f"the {len(annotations)} given.")
        outside = np.flatnonzero(_outside(boxes[start:start + n], note.width, note.height))
        if outside.size:
            k = int(outside[0])
            raise ValueError(f"{path}, line {box_lines[k][0]}: box {boxes[start + k].tolist()} "
                             f"(x1 y1 x2 y2) is outside image {shown(stem)} of {note.width} x "
                             f"{note.height} pixels.")
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
