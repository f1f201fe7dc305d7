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
    """The images of one split of the synthetic VOC2007 look-alike, made on demand.

    Parameters
    ----------
    generator : SyntheticVOC2007
        The generator (`qs.data.voc2007.SyntheticVOC2007`).
    split : str
        "trainval" or "test".
    dtype : str, default "float32"
        The features' type in the store: "float16", "float32" or "float64".

    Examples
    --------
    >>> from qs.data.voc2007 import SyntheticVOC2007
    >>> src = SyntheticSource(SyntheticVOC2007(scale=0.001, boxes_per_image=4), "test")
    >>> src.image_ids.size, src.k_max, src.d, src.has_gt
    (20, 4, 64, True)
    """

    kind = "synthetic"
    has_gt = True

    def __init__(self, generator, split, dtype="float32"):
        self.gen, self.split, self.dtype = generator, split, np.dtype(dtype)
        self.image_ids = generator.image_ids(split)
        self.k_max, self.d = generator.boxes_per_image, generator.n_features

    def describe(self):
        """Where the data come from, for the store's ``source``.

        Returns
        -------
        str
            The generator's settings and split.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> src = SyntheticSource(SyntheticVOC2007(scale=0.001, boxes_per_image=4), "test")
        >>> src.describe()
        "synthetic VOC2007-like bags of boxes (seed 0, scale 0.001, test); not the paper's data"
        """
        return self.gen.source(self.split)

    def name(self, i):
        """Image ``i`` as an error message names it.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        str
            Its name.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> src = SyntheticSource(SyntheticVOC2007(scale=0.001, boxes_per_image=4), "test")
        >>> src.name(0)
        'synthetic image test_000000'
        """
        return f"synthetic image {self.image_ids[i]}"

    def key(self, i):
        """What identifies image ``i``'s data: the generator's settings, the split and ``i``.

        A block of a store already written is kept by a resumed conversion when the keys
        of its images are unchanged.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        str
            The key, JSON.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> src = SyntheticSource(SyntheticVOC2007(scale=0.001, boxes_per_image=4), "test")
        >>> src.key(0)
        '[0, 0.001, 4, 64, 4.0, 1.0, 0.1, "test", 0]'
        """
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
        """Make image ``i``.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        tuple
            ``(features (K, d) in dtype, boxes (K, 4), (object boxes (m, 4), object classes
            (m,), difficult (m,)))``.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> src = SyntheticSource(SyntheticVOC2007(scale=0.001, boxes_per_image=4), "test")
        >>> X, boxes, (obj, classes, difficult) = src.read(0)
        >>> X.dtype, X.shape, boxes.shape, obj.shape[1]
        (dtype('float32'), (4, 64), (4, 4), 4)
        """
        X, boxes, objects = self.gen.image(self.split, i)
        return _as_dtype(self.name(i), X, self.dtype), boxes, objects


class RcnnSource:
    """R-CNN per-image ``.mat`` caches (`qs.data.boxes.load_rcnn_cache` tells their variables).

    The files' shapes are read first (`scan`) to size the store; ``k_max`` and ``d`` are None
    until then.

    Parameters
    ----------
    paths_or_dir : str, pathlib.Path or sequence of them
        A directory (its ``*.mat`` files, sorted) or the files; with ``image_set``, the
        directory of the ``ID.mat`` files.
    dtype : str, default "float32"
        The features' type in the store: "float16", "float32" or "float64".
    annotations : str, pathlib.Path or None, default None
        A directory of VOC ``ID.xml`` files; their objects (difficult flags included)
        replace the caches' ``gt`` boxes, and every box is checked to lie inside its image.
    image_set : str, pathlib.Path or None, default None
        A VOC image-set list: the images to read, and the store's split name.

    Raises
    ------
    ValueError
        With ``image_set``, when the source is not a directory or lacks an image's file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from scipy.io import savemat
    >>> tmp = tempfile.TemporaryDirectory()
    >>> arrays = {"boxes": np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]]), "feat": np.ones((2, 3))}
    >>> savemat(pathlib.Path(tmp.name) / "000005.mat", arrays)
    >>> src = RcnnSource(tmp.name)
    >>> src.image_ids.tolist(), src.k_max
    (['000005'], None)
    >>> src.scan(workers=0)
    >>> src.k_max, src.d, src.has_gt
    (2, 3, False)
    >>> tmp.cleanup()
    """

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
        """Where the data come from, for the store's ``source``.

        Returns
        -------
        str
            The number of files and their directories (and the annotations' directory).

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from scipy.io import savemat
        >>> tmp = tempfile.TemporaryDirectory()
        >>> arrays = {"boxes": np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]]), "feat": np.ones((2, 3))}
        >>> savemat(pathlib.Path(tmp.name) / "000005.mat", arrays)
        >>> src = RcnnSource(tmp.name)
        >>> src.describe().startswith("R-CNN .mat caches, 1 files in ")
        True
        >>> tmp.cleanup()
        """
        where = {p.parent.resolve() for p in self.paths}
        text = f"R-CNN .mat caches, {len(self.paths)} files in {', '.join(map(str, sorted(where)))}"
        if self.notes is not None:
            text += f", VOC annotations in {Path(self.annotations).resolve()}"
        return text

    def name(self, i):
        """Image ``i`` as an error message names it: its file.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        str
            The file's path.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from scipy.io import savemat
        >>> tmp = tempfile.TemporaryDirectory()
        >>> arrays = {"boxes": np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]]), "feat": np.ones((2, 3))}
        >>> savemat(pathlib.Path(tmp.name) / "000005.mat", arrays)
        >>> src = RcnnSource(tmp.name)
        >>> pathlib.Path(src.name(0)).name
        '000005.mat'
        >>> tmp.cleanup()
        """
        return str(self.paths[i])

    def key(self, i):
        """What identifies image ``i``'s data: its file's name, size and modification time.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        str
            The key.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from scipy.io import savemat
        >>> tmp = tempfile.TemporaryDirectory()
        >>> arrays = {"boxes": np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]]), "feat": np.ones((2, 3))}
        >>> savemat(pathlib.Path(tmp.name) / "000005.mat", arrays)
        >>> src = RcnnSource(tmp.name)
        >>> src.key(0).split()[0]
        '000005.mat'
        >>> tmp.cleanup()
        """
        stat = self.paths[i].stat()
        return f"{self.paths[i].name} {stat.st_size} {stat.st_mtime_ns}"

    def shape(self, i):
        """The shape of file ``i``, read from its headers.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        tuple
            ``(K boxes, d features, whether it holds gt and class)``.

        Raises
        ------
        ValueError
            When the file lacks ``feat`` or ``boxes``, or ``feat`` is not 2-D.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from scipy.io import savemat
        >>> tmp = tempfile.TemporaryDirectory()
        >>> arrays = {"boxes": np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]]), "feat": np.ones((2, 3))}
        >>> savemat(pathlib.Path(tmp.name) / "000005.mat", arrays)
        >>> src = RcnnSource(tmp.name)
        >>> src.shape(0)
        (2, 3, False)
        >>> tmp.cleanup()
        """
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
        """Read every file's shape: set ``k_max``, ``d`` and whether the caches hold ground truth.

        Parameters
        ----------
        workers : int, default 1
            Processes reading the files (0: read here, without crash isolation).
        progress : bool, default False
            Show a progress bar.

        Raises
        ------
        ValueError
            When the files disagree in d, or in holding ``gt`` and ``class``.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from scipy.io import savemat
        >>> tmp = tempfile.TemporaryDirectory()
        >>> arrays = {"boxes": np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]]), "feat": np.ones((2, 3))}
        >>> savemat(pathlib.Path(tmp.name) / "000005.mat", arrays)
        >>> src = RcnnSource(tmp.name)
        >>> src.scan(workers=0)
        >>> src.k_max, src.d
        (2, 3)
        >>> tmp.cleanup()
        """
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
        """Read image ``i``'s file (after `scan`).

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        tuple
            ``(features (K, d) in dtype, boxes (K, 4), (object boxes (m, 4), object classes
            (m,), difficult (m,)))``; the objects from the annotations when given.

        Raises
        ------
        ValueError
            When the file changed since `scan`, or a box lies outside its annotated image.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from scipy.io import savemat
        >>> tmp = tempfile.TemporaryDirectory()
        >>> arrays = {"boxes": np.array([[1.0, 1, 10, 10], [2, 2, 5, 8]]), "feat": np.ones((2, 3))}
        >>> savemat(pathlib.Path(tmp.name) / "000005.mat", arrays)
        >>> src = RcnnSource(tmp.name)
        >>> src.scan(workers=0)
        >>> X, boxes, (obj, classes, difficult) = src.read(0)
        >>> X.dtype, X.shape, boxes[1].tolist(), obj.shape
        (dtype('float32'), (2, 3), [2.0, 2.0, 5.0, 8.0], (0, 4))
        >>> tmp.cleanup()
        """
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
    """A latent AP-SVM list file and its ``STEM_id.feature`` files, one stored image per example.

    `qs.data.latent_list.load_latent_list` describes the files and their layouts.

    Parameters
    ----------
    path : str or pathlib.Path
        The list file.
    n_features : int
        The feature dimension.
    dtype : str, default "float32"
        The features' type in the store: "float16", "float32" or "float64".
    layout : str, default "pooled"
        "pooled" or "unpooled".
    feature_dir : str, pathlib.Path or None, default None
        The directory relative stems are read from (None: the list file's).
    annotations : str, pathlib.Path or None, default None
        A directory of VOC ``ID.xml`` files (ID: the stem's last component) for the
        objects and the image sizes boxes are checked against.
    feature_root : str, pathlib.Path or None, default None
        A directory every feature file must lie in (links followed).

    Raises
    ------
    ValueError
        On a missing feature dimension, an empty or malformed list, or a missing or
        outside feature file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> _ = (folder / "list.txt").write_text("1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n")
    >>> _ = (folder / "img_1.feature").write_text("1:0.5\\n")
    >>> _ = (folder / "img_2.feature").write_text("3:2\\n")
    >>> src = LatentListSource(folder / "list.txt", 3)
    >>> src.image_ids.tolist(), src.k_max, src.d, src.has_gt
    (['img'], 2, 3, False)
    >>> tmp.cleanup()
    """

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
        """Where the data come from, for the store's ``source``.

        Returns
        -------
        str
            The list file with its layout and SHA-256, and the feature files' directory.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> folder = pathlib.Path(tmp.name)
        >>> _ = (folder / "list.txt").write_text("1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n")
        >>> _ = (folder / "img_1.feature").write_text("1:0.5\\n")
        >>> _ = (folder / "img_2.feature").write_text("3:2\\n")
        >>> src = LatentListSource(folder / "list.txt", 3)
        >>> src.describe().startswith("latent AP-SVM list ")
        True
        >>> tmp.cleanup()
        """
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
        """Image ``i`` as an error message names it.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        str
            Its stem and the feature files' directory.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> folder = pathlib.Path(tmp.name)
        >>> _ = (folder / "list.txt").write_text("1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n")
        >>> _ = (folder / "img_1.feature").write_text("1:0.5\\n")
        >>> _ = (folder / "img_2.feature").write_text("3:2\\n")
        >>> src = LatentListSource(folder / "list.txt", 3)
        >>> src.name(0).startswith("the feature files of image 'img' in ")
        True
        >>> tmp.cleanup()
        """
        return f"the feature files of image {str(self.image_ids[i])!r} in {self.feature_dir}"

    def key(self, i):
        """What identifies image ``i``'s data: its stem, feature files, boxes and dimension.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        str
            The key, JSON.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> folder = pathlib.Path(tmp.name)
        >>> _ = (folder / "list.txt").write_text("1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n")
        >>> _ = (folder / "img_1.feature").write_text("1:0.5\\n")
        >>> _ = (folder / "img_2.feature").write_text("3:2\\n")
        >>> src = LatentListSource(folder / "list.txt", 3)
        >>> json.loads(src.key(0))[:2]
        ['img', ['img_1.feature', 'img_2.feature']]
        >>> tmp.cleanup()
        """
        return json.dumps([self.image_ids[i], self.files[i], self.boxes[i].tolist(), self.d])

    def read(self, i):
        """Read image ``i``'s feature files.

        Parameters
        ----------
        i : int
            The image's index.

        Returns
        -------
        tuple
            ``(features (K, d) in dtype, boxes (K, 4), objects)``; the objects, ``(boxes
            (m, 4), classes (m,), difficult (m,))``, only with annotations, else None.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> folder = pathlib.Path(tmp.name)
        >>> _ = (folder / "list.txt").write_text("1\\nimg 2\\n1 1 10 10 1 0\\n5 5 10 10 2 0\\n1\\n")
        >>> _ = (folder / "img_1.feature").write_text("1:0.5\\n")
        >>> _ = (folder / "img_2.feature").write_text("3:2\\n")
        >>> src = LatentListSource(folder / "list.txt", 3)
        >>> X, boxes, objects = src.read(0)
        >>> X.tolist(), objects is None
        ([[0.5, 0.0, 0.0], [0.0, 0.0, 2.0]], True)
        >>> tmp.cleanup()
        """
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
