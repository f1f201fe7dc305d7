"""Readers of VOC2007 box data as the R-CNN code and the VOC devkit write it.

- `load_rcnn_cache`: R-CNN-style per-image MATLAB files (``boxes``, ``feat``, optional
  ``gt``, ``class``, ``overlap``), v5 or v7.3.
- `load_voc_annotation`, `load_image_set`: the VOC devkit's per-image XML and image-set lists.

The latent AP-SVM's list files are read by `qs.data.latent_list`. All files are
untrusted: every fault raises a one-line ValueError naming the file and the position (line,
field, or image and box). Boxes come out as `DetectionData` boxes: x1 y1 x2 y2, 1-based
inclusive pixels.
"""

import hashlib
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qs.data.files import (
    IMAGE_ID,
    LIST_BYTES,
    SAMPLE_BYTES,
    as_float32,
    check_final_newline,
    check_regular,
    read_bytes,
    shown,
)
from qs.data.formats import read_isolated, read_mat
from qs.data.voc2007 import CLASSES, DetectionData

__all__ = ["VocAnnotation", "load_image_set", "load_rcnn_cache", "load_voc_annotation"]

_SHOWN = 5  # missing files named in one message, at most


def load_rcnn_cache(paths_or_dir: str | Path | Sequence[str | Path]) -> DetectionData:
    """Read R-CNN-style per-image ``.mat`` feature caches (v5 or v7.3) into `DetectionData`.

    Each file is one image, named by its stem. A file holds ``boxes`` (K x 4: x1 y1 x2 y2,
    1-based) and ``feat`` (K x d, d the same in every file), and optionally ``gt`` (K, true
    for the ground-truth boxes), ``class`` (K, their class 1..20, 0 elsewhere) and
    ``overlap`` (K x 20, IoU with each class's objects). With ``gt`` and ``class``, the ground-truth boxes are
    the image's objects (R-CNN's caches leave difficult objects out, so none is difficult);
    without, the objects are empty. The files are read in a worker process (a damaged one can
    crash scipy's or h5py's reader): see `qs.data.formats.read_isolated`.

    Parameters
    ----------
    paths_or_dir : str, pathlib.Path or sequence of them
        A directory (its ``*.mat`` files, sorted) or the files.

    Returns
    -------
    DetectionData
        The boxes' features (float32), the images' box offsets, boxes, ids and objects, and
        the source with the files' checksum.

    Raises
    ------
    ValueError
        On a missing, unreadable or malformed file (naming it and the variable), or files
        of different feature dimensions.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from scipy.io import savemat
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     boxes = np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]])
    ...     savemat(pathlib.Path(tmp) / "000005.mat", {"boxes": boxes, "feat": np.ones((2, 3))})
    ...     data = load_rcnn_cache(tmp)
    >>> data.X.shape, data.image_ids.tolist()
    ((2, 3), ['000005'])
    """
    paths = mat_paths(paths_or_dir)
    X, boxes, counts, objects, digest, d = [], [], [], [], hashlib.sha256(), None
    with closing(read_isolated(paths, read_rcnn_file)) as files:
        for path, (feat, b, obj) in zip(paths, files):
            if d is None:
                d = feat.shape[1]
            elif feat.shape[1] != d:
                raise ValueError(
                    f"{path}: feat has {feat.shape[1]} columns, but {paths[0]} "
                    f"has {d}; every file must hold the same feature dimension."
                )
            objects.append(obj)
            X.append(feat)
            boxes.append(b)
            counts.append(feat.shape[0])
            digest.update(path.read_bytes())
    source = (
        f"R-CNN .mat caches, {len(paths)} files in {paths[0].parent.resolve()} (sha256 "
        f"of their concatenation {digest.hexdigest()})"
    )
    return DetectionData(
        np.concatenate(X),
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        np.concatenate(boxes),
        np.array([p.stem for p in paths], dtype=str),
        tuple(objects),
        source,
    )


def read_rcnn_file(
    path: str | Path,
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One R-CNN cache file, checked, as `load_rcnn_cache` describes it.

    It is read in this process: callers isolate it (`qs.data.formats.read_isolated`, or
    `qs.data.convert`'s workers).

    Parameters
    ----------
    path : str or pathlib.Path
        The ``.mat`` file.

    Returns
    -------
    feat : numpy.ndarray of shape (K, d)
        The boxes' features, float32.
    boxes : numpy.ndarray of shape (K, 4)
        The boxes, x1 y1 x2 y2, 1-based, float64.
    objects : tuple of numpy.ndarray
        The ground-truth objects: their boxes, classes and difficult flags.

    Raises
    ------
    ValueError
        On a missing variable, a bad shape or a box that is not 1-based x1 y1 x2 y2.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from scipy.io import savemat
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "000005.mat"
    ...     savemat(path, {"boxes": np.array([[1.0, 1, 10, 10]]), "feat": np.ones((1, 3))})
    ...     feat, boxes, objects = read_rcnn_file(path)
    >>> feat.dtype, boxes.tolist(), objects[0].shape
    (dtype('float32'), [[1.0, 1.0, 10.0, 10.0]], (0, 4))
    """
    path = Path(path)
    names, found = read_mat(path, ("boxes", "feat", "gt", "class", "overlap"))
    missing = [k for k in ("boxes", "feat") if k not in found]
    if missing:
        raise ValueError(
            f"{path}: no variable {', '.join(missing)}; an R-CNN cache holds "
            f"boxes and feat; this file holds {', '.join(names) or 'none'}."
        )
    feat = _numeric(path, "feat", found["feat"], ndim=2)
    k = feat.shape[0]
    b = _numeric(path, "boxes", found["boxes"], ndim=2)
    if b.shape != (k, 4):
        raise ValueError(
            f"{path}: boxes must have shape ({k}, 4), one x1 y1 x2 y2 row per "
            f"row of feat; got {b.shape}."
        )
    bad = np.flatnonzero((b[:, :2] < 1).any(axis=1) | (b[:, 2] < b[:, 0]) | (b[:, 3] < b[:, 1]))
    if bad.size:
        raise ValueError(
            f"{path}: boxes row {bad[0]} is {b[bad[0]].tolist()}; expected "
            "1-based x1 y1 x2 y2 with x2 >= x1 and y2 >= y1."
        )
    return as_float32(path, "feat", feat), b, _rcnn_objects(path, found, b, k)


def mat_paths(paths_or_dir):
    """The R-CNN cache files of a directory (its ``*.mat`` files, sorted) or a list, each a
    regular file (a symlink to a device or a FIFO is refused before a reader opens it)."""
    if isinstance(paths_or_dir, (str, Path)) and Path(paths_or_dir).is_dir():
        paths = sorted(Path(paths_or_dir).glob("*.mat"))
        if not paths:
            raise ValueError(f"{paths_or_dir}: no .mat files in this directory.")
    else:
        paths = [
            Path(p)
            for p in ([paths_or_dir] if isinstance(paths_or_dir, (str, Path)) else paths_or_dir)
        ]
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
        raise ValueError(
            f"{path}: {name} must be finite; got {float(a.ravel()[bad[0]])} at flat "
            f"index {bad[0]} ({bad.size} non-finite in all)."
        )
    return a


def _rcnn_objects(path, found, boxes, k):
    """``(boxes, class index, difficult)`` of the ground-truth rows, checked against K."""
    for name, width in (("gt", None), ("class", None), ("overlap", len(CLASSES))):
        if name in found:
            a = _numeric(path, name, found[name], ndim=1 if width is None else 2)
            if a.shape != ((k,) if width is None else (k, width)):
                raise ValueError(
                    f"{path}: {name} must have shape "
                    f"{(k,) if width is None else (k, width)}, one row per box; "
                    f"got {a.shape}."
                )
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
        raise ValueError(
            f"{path}: class must be 1..{len(CLASSES)} on every gt box; got "
            f"{sorted(set(cls.tolist()))[:5]}."
        )
    return boxes[gt], cls.astype(np.int64) - 1, np.zeros(int(gt.sum()), bool)


@dataclass(frozen=True, eq=False)
class VocAnnotation:
    """One VOC devkit annotation: the image's id and size, and its objects (`load_voc_annotation`).

    Parameters
    ----------
    image_id : str
        The image's id.
    width : int
        The image's width in pixels.
    height : int
        The image's height in pixels.
    names : tuple of str
        Each object's class name.
    boxes : ndarray of shape (m, 4), float64
        Each object's box, x1 y1 x2 y2, 1-based inclusive pixels.
    classes : ndarray of shape (m,), int64
        Each object's class index into `qs.data.voc2007.CLASSES`.
    difficult : ndarray of shape (m,), bool
        Each object's difficult flag.
    truncated : ndarray of shape (m,), bool
        Each object's truncated flag.

    Examples
    --------
    >>> note = VocAnnotation("000005", 100, 80, ("dog",), np.array([[1.0, 2, 50, 60]]),
    ...                      np.array([11]), np.array([False]), np.array([True]))
    >>> CLASSES[int(note.classes[0])], note.boxes.shape
    ('dog', (1, 4))
    """

    image_id: str
    width: int
    height: int
    names: tuple
    boxes: np.ndarray  # float64 (m, 4)
    classes: np.ndarray  # int64 (m,)
    difficult: np.ndarray  # bool (m,)
    truncated: np.ndarray  # bool (m,)


def load_voc_annotation(xml_path: str | Path) -> VocAnnotation:
    """Read one VOC devkit annotation XML file (the image id is the file's stem).

    The XML is untrusted: it is parsed with defusedxml, which refuses DTDs, entities and
    external references (an entity-expansion "billion laughs" file would otherwise take the
    memory).

    Parameters
    ----------
    xml_path : str or pathlib.Path
        The annotation file.

    Returns
    -------
    VocAnnotation
        The image's id and size and its objects.

    Raises
    ------
    ValueError
        On XML that does not parse or is refused, an unknown class, a missing or
        non-integer field, or a box outside the image, naming the file and the object.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> xml = (
    ...     "<annotation><size><width>100</width><height>80</height></size>"
    ...     "<object><name>dog</name><difficult>0</difficult><truncated>1</truncated>"
    ...     "<bndbox><xmin>1</xmin><ymin>2</ymin><xmax>50</xmax><ymax>60</ymax></bndbox>"
    ...     "</object></annotation>"
    ... )
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "000005.xml"
    ...     _ = path.write_text(xml)
    ...     note = load_voc_annotation(path)
    >>> note.image_id, note.names, note.boxes.tolist(), note.truncated.tolist()
    ('000005', ('dog',), [[1.0, 2.0, 50.0, 60.0]], [True])
    """
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    xml_path = Path(xml_path)
    raw = read_bytes(xml_path, "the VOC annotation", SAMPLE_BYTES)
    try:
        root = fromstring(raw, forbid_dtd=True)
    except (ParseError, DefusedXmlException) as err:
        raise ValueError(
            f"Cannot read the VOC annotation {xml_path}: {type(err).__name__}: {err}"
        ) from None
    width = _xml_int(xml_path, root, "size/width", "the image")
    height = _xml_int(xml_path, root, "size/height", "the image")
    if width < 1 or height < 1:
        raise ValueError(f"{xml_path}: image size {width} x {height}; both must be >= 1.")
    names, boxes, difficult, truncated = [], [], [], []
    for j, obj in enumerate(root.findall("object"), 1):
        where = f"object {j}"
        name = (obj.findtext("name") or "").strip()
        if name not in CLASSES:
            raise ValueError(
                f"{xml_path}: {where} has class {shown(name)}; expected one of "
                f"{', '.join(CLASSES)}."
            )
        box = [
            _xml_int(xml_path, obj, f"bndbox/{f}", where) for f in ("xmin", "ymin", "xmax", "ymax")
        ]
        if not (1 <= box[0] <= box[2] <= width and 1 <= box[1] <= box[3] <= height):
            raise ValueError(
                f"{xml_path}: {where} ({name}) has bndbox {box} (xmin ymin xmax "
                f"ymax); expected 1 <= xmin <= xmax <= {width} and 1 <= ymin <= "
                f"ymax <= {height}."
            )
        names.append(name)
        boxes.append(box)
        difficult.append(_xml_flag(xml_path, obj, "difficult", where))
        truncated.append(_xml_flag(xml_path, obj, "truncated", where))
    return VocAnnotation(
        xml_path.stem,
        width,
        height,
        tuple(names),
        np.array(boxes, dtype=np.float64).reshape(-1, 4),
        np.array([CLASSES.index(n) for n in names], dtype=np.int64),
        np.array(difficult, dtype=bool),
        np.array(truncated, dtype=bool),
    )


def _xml_int(path, node, field, where):
    text = node.findtext(field)
    if text is None:
        raise ValueError(f"{path}: {where} has no {field} field.")
    try:
        return int(float(text.strip()))  # a few VOC files write coordinates as "273.0"
    except ValueError:
        raise ValueError(
            f"{path}: {where} has {field} {shown(text.strip())}; expected an integer."
        ) from None


def _xml_flag(path, node, field, where):
    """A 0/1 flag; absent means 0, as in the devkit."""
    if node.find(field) is None:
        return False
    value = _xml_int(path, node, field, where)
    if value not in (0, 1):
        raise ValueError(f"{path}: {where} has {field} {value}; expected 0 or 1.")
    return bool(value)


def load_image_set(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """Read a VOC image-set list: a list of ids, or a class list of ids and labels.

    An id names its files (``ID.mat``, ``ID.xml``), so it is letters, digits and ``._-``
    only; every line ends with a newline.

    Parameters
    ----------
    path : str or pathlib.Path
        A list of ids (``trainval.txt``), or a class list (``aeroplane_trainval.txt``: an
        id and 1 present, -1 absent, 0 only difficult per line).

    Returns
    -------
    ids : numpy.ndarray of str
        The image ids, in the file's order.
    labels : numpy.ndarray of int or None
        The labels of a class list; None for a list of ids.

    Raises
    ------
    ValueError
        On a missing final newline, lines of different widths, an id that is no plain
        file name, a repeated id or a label other than 1, -1 or 0, naming the line.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "aeroplane_trainval.txt"
    ...     _ = path.write_text("000005 -1\\n000007  1\\n")
    ...     ids, labels = load_image_set(path)
    >>> ids.tolist(), labels.tolist()
    (['000005', '000007'], [-1, 1])
    """
    path = Path(path)
    raw = read_bytes(path, "the image set", LIST_BYTES)
    check_final_newline(path, raw)
    text = raw.decode("utf-8", errors="replace")
    rows = [(no, line.split()) for no, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not rows:
        return np.array([], dtype=str), None
    width = len(rows[0][1])
    if width not in (1, 2):
        raise ValueError(
            f"{path}, line {rows[0][0]}: expected an image id, or an id and a "
            f"label; got {shown(' '.join(rows[0][1]))}."
        )
    ids, labels = [], []
    seen: dict[str, int] = {}  # id -> the line it was first on
    for no, fields in rows:
        if len(fields) != width:
            raise ValueError(
                f"{path}, line {no}: expected {width} field(s) as on line "
                f"{rows[0][0]}; got {shown(' '.join(fields))}."
            )
        if not IMAGE_ID.fullmatch(fields[0]) or fields[0] in (".", ".."):
            raise ValueError(
                f"{path}, line {no}: the image id {shown(fields[0])} is not a "
                "file name of letters, digits and ._- (no directory, nothing that "
                "climbs out of one); expected an id such as 000005."
            )
        if fields[0] in seen:
            raise ValueError(
                f"{path}, line {no}: image {shown(fields[0])} is listed twice (first "
                f"on line {seen[fields[0]]})."
            )
        seen[fields[0]] = no
        ids.append(fields[0])
        if width == 2:
            if fields[1] not in ("1", "-1", "0"):
                raise ValueError(
                    f"{path}, line {no}: expected the label 1, -1 or 0; got {shown(fields[1])}."
                )
            labels.append(int(fields[1]))
    return np.array(ids, dtype=str), (np.array(labels, dtype=np.int8) if width == 2 else None)
