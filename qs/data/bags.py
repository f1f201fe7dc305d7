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

    Image ids, labels (n_images, 20) int8 (1: holds the class, 0: not, -1: unknown) and the
    ground-truth objects (per image ``(boxes, classes, difficult)``, or None when unknown) are
    in memory. The box features are either in memory, ``data`` (a flat
    `~qs.data.voc2007.DetectionData`), or read block by block from a store: ``features`` (a
    padded Dask array), with ``counts`` and ``boxes`` (n_images, K_max, 4) in memory (16
    bytes a box: 160 MB for VOC2007's 10M boxes). ``source`` says where the data came from,
    ``where`` how they are read.
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
        """A split held as `DetectionData`; labels from its objects unless given."""
        if labels is None:
            labels = np.stack([data.image_labels(k) for k in range(len(CLASSES))], axis=1)
        return cls(data.source, data.image_ids, labels, data.objects, where, data=data)

    @classmethod
    def from_store(cls, store, max_bytes, scheduler=None):
        """A store's split: in memory when its features take at most `max_bytes` as float32,
        else read block by block (`scheduler`, as `qs.detection.score_bags` takes it, only
        names where in ``where``)."""
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
        """A split of the synthetic `~qs.data.voc2007.SyntheticVOC2007` whose box features
        are generated block by block from its seed on every pass (never held, never stored:
        the paper's size needs no 82 GB store); the boxes, labels and objects in memory
        (`scheduler` only names where in ``where``)."""
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
        """Fit the latent SVM estimator `est` (`qs.estimators.LatentRankSVM`) on the bags with
        image labels `y`."""
        if self.data is not None:
            return est.fit(self.data.X, y, offsets=self.data.offsets)
        return est.fit(self.features, y, counts=self.counts)

    def image_labels(self, cls):
        """Column `cls` (a class index) of the labels."""
        return self.labels[:, cls]

    def ground_truth(self, cls):
        """``{image_id: (boxes, difficult)}`` of class `cls`, the form detection AP takes."""
        return {
            image: (b[c == cls], d[c == cls])
            for image, (b, c, d) in zip(self.image_ids, self.objects)
        }

    def has_object(self, cls):
        """Whether some image holds an object of class `cls` other than a difficult one."""
        return self.objects is not None and any((~d[c == cls]).any() for _, c, d in self.objects)

    def subset(self, images):
        """The split restricted to the images `images` (sorted indices)."""
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
        """(n_images, d) float64: each image's mean box feature (one pass, kept)."""
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
        """Index (within its bag) of each image's best box under weights `w`."""
        if self.data is not None:
            d = self.data
            return bag_argmax(d.X @ w, d.offsets) - d.offsets[:-1]
        return score_bags(self.features, self.counts, w[:, None], scheduler=scheduler).best[:, 0]

    def mean_difference_boxes(self, y, scheduler=None):
        """The positive images' best boxes under the difference between the mean box feature
        of the positive and of the negative images (labels `y`, 1 positive): a latent SVM's
        initial boxes that need no training."""
        means, pos = self.image_means(scheduler), np.asarray(y) == 1
        w = means[pos].mean(axis=0) - means[~pos].mean(axis=0)
        return self.best_boxes(w, scheduler)[pos]

    def detections(self, coef, intercept, threshold, scheduler=None):
        """Detections of a linear box scorer (``coef`` (d,), ``intercept``): per image, its
        boxes after non-maximum suppression at `threshold`, as (image ids, boxes x1 y1 x2 y2,
        scores) of every image's survivors."""
        return self.class_detections(
            np.asarray(coef, dtype=np.float64)[:, None], [intercept], threshold, scheduler
        )[0]

    def class_detections(self, W, intercepts, threshold, scheduler=None):
        """`detections` of every column of ``W`` (d, n) with its intercept, in one pass
        over the boxes: a list of n (image ids, boxes, scores)."""
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
