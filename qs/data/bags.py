"""One split of a weakly supervised detection data set: images as bags of candidate boxes.

`BagSet` holds what the latent SVMs train on and detection AP is judged on, wherever the box
features live: in memory as a flat `~qs.data.voc2007.DetectionData`, or in a store written
by ``qsrank load cnn`` (`qs.data.store`), read block by block as a padded Dask array when it
is too large for memory. Every scoring of boxes goes through `qs.detection.score_bags` (its
argmax and its non-maximum suppression), so both kinds of split give the same numbers.
"""

from itertools import pairwise

import numpy as np

from qs.data.voc2007 import CLASSES, DetectionData
from qs.detection import bag_argmax, dask_scheduler, score_bags

__all__ = ["BagSet"]


class BagSet:
    """One split as latent SVMs train and detection AP evaluates on it.

    Image ids, labels and ground-truth objects are in memory; the box features are either in
    memory (``data``) or read block by block (``features`` with ``counts`` and ``boxes``).
    The constructors `in_memory`, `from_store` and `generated` fill in one or the other.

    Parameters
    ----------
    source : str
        Where the data came from.
    image_ids : array-like of shape (n_images,), str
        The images, in order.
    labels : ndarray of shape (n_images, 20), int8
        1: the image holds the class, 0: not, -1: unknown.
    objects : tuple or None
        Per image ``(boxes (m, 4), classes (m,), difficult (m,) bool)``; None when unknown.
    where : str
        How the features are read, for the run's record.
    data : DetectionData or None, default None
        The features in memory, flat (`qs.data.voc2007.DetectionData`).
    features : dask.array.Array or None, default None
        Without ``data``: the features padded to (n_images, K_max, d), read block by block.
    counts : ndarray of shape (n_images,), int64, or None, default None
        With ``features``: the boxes of each image.
    boxes : ndarray of shape (n_images, K_max, 4) or None, default None
        With ``features``: the boxes x1 y1 x2 y2, in memory (16 bytes a box).

    Examples
    --------
    >>> from qs.data.voc2007 import SyntheticVOC2007
    >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
    >>> bags = BagSet.in_memory(gen.split_data("test"))
    >>> bags.n_images, bags.n_boxes, bags.d, bags.labels.shape
    (20, 80, 3, (20, 20))
    """

    def __init__(
        self,
        source,
        image_ids,
        labels,
        objects,
        where,
        *,
        data=None,
        features=None,
        counts=None,
        boxes=None,
    ):
        self.source, self.image_ids, self.labels = source, np.asarray(image_ids), labels
        self.objects, self.where = objects, where
        self.data, self.features, self.counts, self.boxes = data, features, counts, boxes
        self._means = None

    @classmethod
    def in_memory(cls, data, *, labels=None, where="in memory"):
        """A split held in memory as `DetectionData`.

        Parameters
        ----------
        data : DetectionData
            The split (`qs.data.voc2007.DetectionData`).
        labels : ndarray of shape (n_images, 20), int8, or None, default None
            The image labels; None: 1 for each class among an image's objects, else 0.
        where : str, default "in memory"
            How the features are read, for the run's record.

        Returns
        -------
        BagSet
            The split, its features in memory.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> bags = BagSet.in_memory(gen.split_data("test"))
        >>> bags.where, bags.data is not None
        ('in memory', True)
        """
        if labels is None:
            labels = np.stack([data.image_labels(k) for k in range(len(CLASSES))], axis=1)
        return cls(data.source, data.image_ids, labels, data.objects, where, data=data)

    @classmethod
    def from_store(cls, store, max_bytes, scheduler=None):
        """A store's split: in memory when its features fit in `max_bytes`, else read by blocks.

        Parameters
        ----------
        store : BoxStore
            The store (`qs.data.store.open_store`).
        max_bytes : int
            The most bytes the features may take as float32 to be loaded in memory.
        scheduler : str or None, default None
            The Dask scheduler, as `qs.detection.score_bags` takes it; only named in
            ``where``.

        Returns
        -------
        BagSet
            The split, its features in memory or read from the store block by block.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from qs.data.convert import write_synthetic_store
        >>> from qs.data.store import open_store
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "test.zarr"
        ...     store = open_store(write_synthetic_store(
        ...         path, split="test", scale=0.001, boxes_per_image=4, n_features=3))
        ...     small = BagSet.from_store(store, max_bytes=10**6)
        ...     large = BagSet.from_store(store, max_bytes=0)
        ...     means = large.image_means()
        >>> small.data is not None, large.data is None, np.allclose(means, small.image_means())
        (True, True, True)
        """
        counts = store.counts[:].astype(np.int64)
        size = int(counts.sum()) * store.d * 4
        labels = store.labels[:].astype(np.int8)
        about = (
            f"store {store.path}: {size:,} bytes of features as float32, "
            f"{'at most' if size <= max_bytes else 'above'} in_memory_max_gb "
            f"({max_bytes / 1e9:g} GB)"
        )
        if size <= max_bytes:
            return cls.in_memory(
                store.to_detection_data(max_bytes),
                labels=labels,
                where=f"{about}: loaded in memory",
            )
        where = (
            f"{about}: read out of core, blocks of {store.chunk_images} images on "
            f"{_scheduler_name(scheduler)}"
        )
        return cls(
            store.source,
            np.array(store.image_ids[:].tolist(), dtype=str),
            labels,
            _store_objects(store),
            where,
            features=store.dask_features(),
            counts=counts,
            boxes=np.asarray(store.boxes[:]),
        )

    @classmethod
    def generated(cls, generator, split, *, dtype="float32", chunk_images=4, scheduler=None):
        """A synthetic split whose box features are generated block by block on every pass.

        The features are never held nor stored (the paper's size needs no 82 GB store); the
        boxes, labels and objects are in memory.

        Parameters
        ----------
        generator : SyntheticVOC2007
            The generator (`qs.data.voc2007.SyntheticVOC2007`).
        split : str
            "trainval" or "test".
        dtype : str, default "float32"
            The features' type: "float16", "float32" or "float64".
        chunk_images : int, default 4
            Images per generated block.
        scheduler : str or None, default None
            The Dask scheduler, as `qs.detection.score_bags` takes it; only named in
            ``where``.

        Returns
        -------
        BagSet
            The split, its features a lazy Dask array.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> lazy = BagSet.generated(gen, "test")
        >>> lazy.features.shape, lazy.n_boxes
        ((20, 4, 3), 80)
        >>> bool((lazy.best_boxes(np.ones(3)) == BagSet.in_memory(
        ...     gen.split_data("test")).best_boxes(np.ones(3))).all())
        True
        """
        n = generator.n_images(split)
        layouts = [generator.layout(split, i) for i in range(n)]
        objects = tuple(obj for _, obj in layouts)
        labels = np.array(
            [[int((c == k).any()) for k in range(len(CLASSES))] for _, c, _ in objects],
            dtype=np.int8,
        )
        where = (
            f"generated block by block from its seed on every pass ({dtype}, blocks of "
            f"{chunk_images} images) on {_scheduler_name(scheduler)}"
        )
        return cls(
            generator.source(split),
            generator.image_ids(split),
            labels,
            objects,
            where,
            features=generator.features(split, dtype=dtype, chunk_images=chunk_images),
            counts=np.full(n, generator.boxes_per_image, dtype=np.int64),
            boxes=np.stack([b for b, _ in layouts]),
        )

    @property
    def n_images(self):
        return self.labels.shape[0]

    @property
    def n_boxes(self):
        return self.data.X.shape[0] if self.data is not None else int(self.counts.sum())

    @property
    def d(self):
        return self.data.X.shape[1] if self.data is not None else self.features.shape[2]

    @property
    def sizes(self):
        """(n_images,) int64: the boxes of each image."""
        return np.diff(self.data.offsets) if self.data is not None else self.counts

    def fit(self, est, y):
        """Fit a latent SVM on the bags, wherever their features are.

        Parameters
        ----------
        est : LatentRankSVM
            The estimator (`qs.estimators.LatentRankSVM`).
        y : array-like of shape (n_images,)
            The image labels, 1 for a positive.

        Returns
        -------
        LatentRankSVM
            ``est``, fitted.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> from qs.estimators import LatentRankSVM
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> bags = BagSet.in_memory(gen.split_data("test"))
        >>> bags.fit(LatentRankSVM(C=1.0), bags.image_labels(0)).coef_.shape
        (3,)
        """
        if self.data is not None:
            return est.fit(self.data.X, y, offsets=self.data.offsets)
        return est.fit(self.features, y, counts=self.counts)

    def image_labels(self, cls):
        """The images' labels for one class.

        Parameters
        ----------
        cls : int
            The class index (into `qs.data.voc2007.CLASSES`).

        Returns
        -------
        ndarray of shape (n_images,), int8
            1: the image holds the class, 0: not, -1: unknown.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> BagSet.in_memory(gen.split_data("test")).image_labels(0)[:4].tolist()
        [1, 0, 0, 0]
        """
        return self.labels[:, cls]

    def ground_truth(self, cls):
        """The objects of one class in every image, in the form detection AP takes.

        Parameters
        ----------
        cls : int
            The class index.

        Returns
        -------
        dict
            ``{image_id: (boxes (m, 4), difficult (m,) bool)}``.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> truth = BagSet.in_memory(gen.split_data("test")).ground_truth(0)
        >>> len(truth), truth["test_000000"][0].shape
        (20, (1, 4))
        """
        return {
            image: (b[c == cls], d[c == cls])
            for image, (b, c, d) in zip(self.image_ids, self.objects)
        }

    def has_object(self, cls):
        """Whether some image holds an object of one class other than a difficult one.

        Parameters
        ----------
        cls : int
            The class index.

        Returns
        -------
        bool
            False also when the objects are unknown.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> BagSet.in_memory(gen.split_data("test")).has_object(0)
        True
        """
        return self.objects is not None and any((~d[c == cls]).any() for _, c, d in self.objects)

    def subset(self, images):
        """The split restricted to some of its images.

        Parameters
        ----------
        images : array-like of int
            The images' indices, sorted.

        Returns
        -------
        BagSet
            The images' bags, labels and objects; the features kept where they were.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> part = BagSet.in_memory(gen.split_data("test")).subset([0, 2])
        >>> part.image_ids.tolist(), part.n_boxes
        (['test_000000', 'test_000002'], 8)
        """
        images = np.asarray(images)
        objects = None if self.objects is None else tuple(self.objects[i] for i in images)
        kwargs = {}
        if self.data is not None:
            d = self.data
            rows = np.concatenate([np.arange(d.offsets[i], d.offsets[i + 1]) for i in images])
            sizes = np.diff(d.offsets)[images]
            kwargs["data"] = DetectionData(
                d.X[rows],
                np.concatenate([[0], np.cumsum(sizes)]),
                d.boxes[rows],
                d.image_ids[images],
                objects,
                d.source,
            )
        else:
            kwargs.update(
                features=self.features[images], counts=self.counts[images], boxes=self.boxes[images]
            )
        part = BagSet(
            self.source, self.image_ids[images], self.labels[images], objects, self.where, **kwargs
        )
        if self._means is not None:
            part._means = self._means[images]
        return part

    def image_means(self, scheduler=None):
        """Each image's mean box feature, computed in one pass and kept.

        Parameters
        ----------
        scheduler : str or None, default None
            The Dask scheduler for features read by blocks.

        Returns
        -------
        ndarray of shape (n_images, d), float64
            The means.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> data = gen.split_data("test")
        >>> means = BagSet.in_memory(data).image_means()
        >>> means.shape, np.allclose(means[0], data.X[:4].mean(axis=0))
        ((20, 3), True)
        """
        if self._means is None:
            if self.data is not None:
                d = self.data
                self._means = (
                    np.add.reduceat(d.X.astype(np.float64), d.offsets[:-1], axis=0)
                    / np.diff(d.offsets)[:, None]
                )
            else:  # padding rows are zeros
                with dask_scheduler(scheduler) as get:
                    sums = self.features.astype(np.float64).sum(axis=1).compute(scheduler=get)
                self._means = sums / self.counts[:, None]
        return self._means

    def best_boxes(self, w, scheduler=None):
        """Each image's best box under linear weights.

        Parameters
        ----------
        w : ndarray of shape (d,)
            The weights; a box's score is its features times ``w``.
        scheduler : str or None, default None
            The Dask scheduler for features read by blocks.

        Returns
        -------
        ndarray of shape (n_images,), int
            The index of the best box within its image's bag.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> data = gen.split_data("test")
        >>> best = BagSet.in_memory(data).best_boxes(np.ones(3))
        >>> int(best[0]) == int(np.argmax(data.X[:4].sum(axis=1)))
        True
        """
        if self.data is not None:
            d = self.data
            return bag_argmax(d.X @ w, d.offsets) - d.offsets[:-1]
        return score_bags(self.features, self.counts, w[:, None], scheduler=scheduler).best[:, 0]

    def mean_difference_boxes(self, y, scheduler=None):
        """The positive images' best boxes under the difference of the classes' mean features.

        The weights are the mean box feature of the positive images minus that of the
        negative ones: a latent SVM's initial boxes that need no training.

        Parameters
        ----------
        y : array-like of shape (n_images,)
            The image labels, 1 for a positive.
        scheduler : str or None, default None
            The Dask scheduler for features read by blocks.

        Returns
        -------
        ndarray of shape (n_positives,), int
            The index of each positive image's best box within its bag.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> bags = BagSet.in_memory(gen.split_data("test"))
        >>> bags.mean_difference_boxes(bags.image_labels(0)).shape
        (2,)
        """
        means, pos = self.image_means(scheduler), np.asarray(y) == 1
        w = means[pos].mean(axis=0) - means[~pos].mean(axis=0)
        return self.best_boxes(w, scheduler)[pos]

    def detections(self, coef, intercept, threshold, scheduler=None):
        """The detections of a linear box scorer: each image's boxes after non-maximum suppression.

        Parameters
        ----------
        coef : array-like of shape (d,)
            The scorer's weights.
        intercept : float
            Added to every score.
        threshold : float
            The overlap (IoU) above which a box is suppressed by a higher-scoring one.
        scheduler : str or None, default None
            The Dask scheduler for features read by blocks.

        Returns
        -------
        tuple
            ``(image ids (n,), boxes (n, 4) x1 y1 x2 y2 float64, scores (n,))`` of every
            image's surviving boxes.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> bags = BagSet.in_memory(gen.split_data("test"))
        >>> ids, boxes, scores = bags.detections(np.ones(3), 0.0, 0.5)
        >>> boxes.shape[1], len(ids) == len(scores) <= bags.n_boxes
        (4, True)
        """
        return self.class_detections(
            np.asarray(coef, dtype=np.float64)[:, None], [intercept], threshold, scheduler
        )[0]

    def class_detections(self, W, intercepts, threshold, scheduler=None):
        """`detections` of several linear scorers in one pass over the boxes.

        Parameters
        ----------
        W : ndarray of shape (d, n)
            One scorer's weights per column.
        intercepts : sequence of n float
            Each scorer's intercept.
        threshold : float
            The overlap (IoU) above which a box is suppressed by a higher-scoring one.
        scheduler : str or None, default None
            The Dask scheduler for features read by blocks.

        Returns
        -------
        list of tuple
            Per scorer, ``(image ids, boxes, scores)`` as `detections` gives them.

        Examples
        --------
        >>> from qs.data.voc2007 import SyntheticVOC2007
        >>> gen = SyntheticVOC2007(scale=0.001, boxes_per_image=4, n_features=3)
        >>> bags = BagSet.in_memory(gen.split_data("test"))
        >>> W = np.stack([np.ones(3), -np.ones(3)], axis=1)
        >>> both = bags.class_detections(W, [0.0, 1.0], 0.5)
        >>> np.allclose(both[1][2], bags.detections(-np.ones(3), 1.0, 0.5)[2])
        True
        """
        features, bounds = (
            (self.data.X, self.sizes) if self.data is not None else (self.features, self.counts)
        )
        boxes = self.data.boxes if self.data is not None else self.boxes
        found = score_bags(
            features,
            bounds,
            W,
            top=int(self.sizes.max()),
            boxes=boxes,
            nms_threshold=threshold,
            scheduler=scheduler,
        ).detections
        if self.data is not None:
            picked = self.data.boxes[self.data.offsets[found.image] + found.box]
        else:
            picked = self.boxes[found.image, found.box]
        out = []
        for column, intercept in enumerate(intercepts):
            mine = found.cls == column
            out.append(
                (
                    self.image_ids[found.image[mine]],
                    picked[mine].astype(np.float64),
                    found.score[mine] + intercept,
                )
            )
        return out


def _scheduler_name(scheduler):
    return (
        "Dask's threaded scheduler"
        if scheduler in (None, "threads")
        else f"the Dask scheduler {scheduler}"
    )


def _store_objects(store):
    """Per image ``(boxes, classes, difficult)`` of a store, or None when it has none."""
    if store.gt_offsets is None:
        return None
    bounds = store.gt_offsets[:]
    boxes = store.gt_boxes[:].astype(np.float64)
    classes, difficult = store.gt_class[:].astype(np.int64), store.gt_difficult[:].astype(bool)
    return tuple((boxes[a:b], classes[a:b], difficult[a:b]) for a, b in pairwise(bounds))
