"""The sources `qs.data.convert` reads box-feature data from: each says which images there are
and reads one image on demand (features in the store's dtype, boxes, ground-truth objects).

`SyntheticSource` (the seeded generator of `qs.data.voc2007`), `RcnnSource` (R-CNN per-image
``.mat`` caches, optionally with VOC annotations) and `LatentListSource` (a latent AP-SVM list
file and its feature files).
"""

import hashlib
import json
from itertools import pairwise
from pathlib import Path

import numpy as np

from qs.data.boxes import load_image_set, load_voc_annotation, mat_paths, read_rcnn_file
from qs.data.files import LIST_BYTES, read_bytes
from qs.data.formats import mat_shapes
from qs.data.latent_list import (
    annotated_objects,
    corner_boxes,
    feature_files,
    image_id,
    latent_feature_files,
    parse_latent_list,
    read_latent_features,
)
from qs.data.reading import read_images

__all__ = ["LatentListSource", "RcnnSource", "SyntheticSource"]

_FLOAT16_MAX = float(np.finfo(np.float16).max)


class SyntheticSource:
    """The images of one split of `SyntheticVOC2007`."""

    kind = "synthetic"
    has_gt = True

    def __init__(self, generator, split, dtype="float32"):
        self.gen, self.split, self.dtype = generator, split, np.dtype(dtype)
        self.image_ids = generator.image_ids(split)
        self.k_max, self.d = generator.boxes_per_image, generator.n_features

    def describe(self):
        return self.gen.source(self.split)

    def name(self, i):
        return f"synthetic image {self.image_ids[i]}"

    def key(self, i):
        return json.dumps(
            [
                vars(self.gen).get(f)
                for f in (
                    "seed",
                    "scale",
                    "boxes_per_image",
                    "n_features",
                    "signal",
                    "noise",
                    "difficult_rate",
                )
            ]
            + [self.split, i]
        )

    def read(self, i):
        X, boxes, objects = self.gen.image(self.split, i)
        return _as_dtype(self.name(i), X, self.dtype), boxes, objects


class RcnnSource:
    """R-CNN per-image ``.mat`` caches: a directory (its ``*.mat`` files, sorted) or a list of
    files, or with ``image_set`` (a VOC image-set list) the files ``ID.mat`` of its ids in the
    directory. ``annotations``: a directory of VOC ``ID.xml`` files; their objects (difficult
    flags included) replace the caches' ``gt`` boxes, and every box is checked to lie inside
    its image. The files' shapes are read first (`scan`) to size the store."""

    kind = "rcnn"

    def __init__(self, paths_or_dir, dtype="float32", *, annotations=None, image_set=None):
        if image_set is not None:
            if not Path(paths_or_dir).is_dir():
                raise ValueError(
                    f"With an image set, the source must be the directory of the "
                    f"ID.mat files; {paths_or_dir} is not a directory."
                )
            ids, _ = load_image_set(image_set)
            self.paths = [Path(paths_or_dir) / f"{i}.mat" for i in ids]
            missing = [p.name for p in self.paths if not p.is_file()]
            if missing:
                raise ValueError(
                    f"{image_set}: {len(missing)} of {len(ids)} images have no "
                    f"cache in {paths_or_dir}: {', '.join(missing[:5])}"
                    f"{' ...' if len(missing) > 5 else ''}."
                )
        else:
            self.paths = mat_paths(paths_or_dir)
        self.dtype = np.dtype(dtype)
        self.image_ids = np.array([p.stem for p in self.paths], dtype=str)
        self.notes, self.annotations = None, annotations
        self.split = Path(image_set).stem if image_set is not None else None
        if annotations is not None:
            self.notes = [
                load_voc_annotation(Path(annotations) / f"{i}.xml") for i in self.image_ids
            ]
        self.k_max = self.d = None
        self.has_gt = self.notes is not None

    def describe(self):
        where = {p.parent.resolve() for p in self.paths}
        text = f"R-CNN .mat caches, {len(self.paths)} files in {', '.join(map(str, sorted(where)))}"
        if self.notes is not None:
            text += f", VOC annotations in {Path(self.annotations).resolve()}"
        return text

    def name(self, i):
        return str(self.paths[i])

    def key(self, i):
        stat = self.paths[i].stat()
        return f"{self.paths[i].name} {stat.st_size} {stat.st_mtime_ns}"

    def shape(self, i):
        """``(K, d, holds gt and class)`` of file ``i`` from its headers."""
        path = self.paths[i]
        shapes = mat_shapes(path)
        if "feat" not in shapes or "boxes" not in shapes:
            raise ValueError(
                f"{path}: no variable {'feat' if 'feat' not in shapes else 'boxes'}"
                f"; an R-CNN cache holds boxes and feat; this file holds "
                f"{', '.join(sorted(shapes)) or 'none'}."
            )
        feat = shapes["feat"]
        if len(feat) != 2:
            raise ValueError(f"{path}: feat must be 2-D; got shape {feat}.")
        return int(feat[0]), int(feat[1]), {"gt", "class"} <= shapes.keys()

    def scan(self, workers=1, progress=False):
        """Read every file's shape (in worker processes): set ``k_max``, ``d`` and whether the
        caches hold ground truth; files disagreeing in d, or in holding gt, are an error."""
        shapes = dict(
            read_images(self, range(len(self.paths)), workers, "shape", progress and "scanning")
        )
        k, d, gt = (np.array([shapes[i][j] for i in range(len(self.paths))]) for j in range(3))
        wrong = np.flatnonzero(d != d[0])
        if wrong.size:
            raise ValueError(
                f"{self.paths[wrong[0]]}: feat has {d[wrong[0]]} columns, but "
                f"{self.paths[0]} has {d[0]}; every file must hold the same "
                "feature dimension."
            )
        if self.notes is None and gt.any() and not gt.all():
            raise ValueError(
                f"{self.paths[np.flatnonzero(gt != gt[0])[0]]} "
                f"{'holds' if not gt[0] else 'lacks'} the variables gt and class, "
                f"unlike {self.paths[0]}; the ground truth must come from every "
                "file or none (or from --annotations)."
            )
        self.k_max, self.d = max(int(k.max()), 1), int(d[0])
        self.has_gt = self.notes is not None or bool(gt.all())

    def read(self, i):
        feat, boxes, objects = read_rcnn_file(self.paths[i])
        if feat.shape[1] != self.d:
            raise ValueError(
                f"{self.paths[i]}: feat has {feat.shape[1]} columns, but "
                f"{self.paths[0]} has {self.d}; every file must hold the same "
                "feature dimension."
            )
        if feat.shape[0] > self.k_max:
            raise ValueError(
                f"{self.paths[i]}: holds {feat.shape[0]} boxes, more than when "
                f"it was scanned ({self.k_max} at most); was it changed?"
            )
        if self.notes is not None:
            note = self.notes[i]
            outside = np.flatnonzero(
                (boxes[:, :2] < 1).any(axis=1)
                | (boxes[:, 2] > note.width)
                | (boxes[:, 3] > note.height)
            )
            if outside.size:
                raise ValueError(
                    f"{self.paths[i]}: boxes row {outside[0]} "
                    f"{boxes[outside[0]].tolist()} (x1 y1 x2 y2) is outside image "
                    f"{note.image_id!r} of {note.width} x {note.height} pixels."
                )
            objects = (note.boxes, note.classes, note.difficult)
        return _as_dtype(self.name(i), feat, self.dtype), boxes, objects


class LatentListSource:
    """A latent AP-SVM list file (`qs.data.latent_list.load_latent_list` gives the layouts) with its
    ``STEM_id.feature`` files, relative stems in ``feature_dir`` (default: beside it),
    absolute ones as given, all inside ``feature_root`` when it is given; ``n_features``
    wide; one stored image per example of ``layout``. ``annotations``: a directory of VOC
    ``ID.xml`` files (ID: the stem's last component) for the objects and image sizes."""

    kind = "latent-list"

    def __init__(
        self,
        path,
        n_features,
        dtype="float32",
        *,
        layout="pooled",
        feature_dir=None,
        annotations=None,
        feature_root=None,
    ):
        self.path, self.layout = Path(path), layout
        if n_features is None or n_features < 1:
            raise ValueError(
                "A latent list file needs its feature dimension (n_features, "
                f"--features); got {n_features!r}."
            )
        self.feature_dir = self.path.parent if feature_dir is None else Path(feature_dir)
        self.feature_root = feature_root
        raw = read_bytes(self.path, "the latent list file", LIST_BYTES)
        self.sha256 = hashlib.sha256(raw).hexdigest()
        examples = parse_latent_list(self.path, raw.decode("utf-8", errors="replace"), layout)
        if not examples:
            raise ValueError(f"{self.path}: the list holds no images.")
        latent_feature_files(self.path, self.feature_dir, examples, feature_root)
        files = feature_files(examples)
        counts = [e.box_ids.size for e in examples]
        starts = np.concatenate([[0], np.cumsum(counts)])
        self.files = [files[a:b] for a, b in pairwise(starts)]
        boxes = corner_boxes(examples)
        self.boxes = [boxes[a:b] for a, b in pairwise(starts)]
        notes = None
        if annotations is not None:
            notes = {
                image_id(e.stem): load_voc_annotation(Path(annotations) / f"{image_id(e.stem)}.xml")
                for e in examples
            }
        self.objects = annotated_objects(self.path, examples, boxes, notes)
        self.annotations, self.split = annotations, None
        self.has_gt = annotations is not None
        self.image_ids = np.array([e.stem for e in examples], dtype=str)
        self.k_max, self.d, self.dtype = max(max(counts), 1), int(n_features), np.dtype(dtype)

    def describe(self):
        text = (
            f"latent AP-SVM list {self.path.resolve()} ({self.layout} layout, sha256 "
            f"{self.sha256}), feature files in {self.feature_dir.resolve()}"
        )
        if self.feature_root is not None:
            text += f" (confined to {Path(self.feature_root).resolve()})"
        if self.annotations is not None:
            text += f", VOC annotations in {Path(self.annotations).resolve()}"
        return text

    def name(self, i):
        return f"the feature files of image {self.image_ids[i]!r} in {self.feature_dir}"

    def key(self, i):
        return json.dumps([self.image_ids[i], self.files[i], self.boxes[i].tolist(), self.d])

    def read(self, i):
        X = read_latent_features([self.feature_dir / f for f in self.files[i]], self.d)
        objects = self.objects[i] if self.has_gt else None
        return _as_dtype(self.name(i), X, self.dtype), self.boxes[i], objects


def _as_dtype(name, X, dtype):
    """Features as ``dtype``; float16 refuses values beyond its range."""
    if dtype == np.float16:
        big = np.flatnonzero(np.abs(X.ravel()) > _FLOAT16_MAX)
        if big.size:
            raise ValueError(
                f"{name}: feature value {float(X.ravel()[big[0]]):g} is beyond "
                f"float16 (at most {_FLOAT16_MAX:g}); convert with --dtype "
                "float32."
            )
    return X.astype(dtype, copy=False)
