"""Seeded synthetic bags of boxes shaped like VOC2007 detection; not the real data.

VOC2007 has 20 classes, 5011 trainval and 4952 test images, and the paper scores about 2000
selective-search boxes per image with a 4096-d CNN feature. Here each image holds a few
ground-truth objects (a class, a box, a difficult flag) and ``boxes_per_image`` candidate
boxes: some are jittered copies of the objects, the rest random. A box's feature is noise
plus, for every object it overlaps, that object's class signal scaled by the overlap (IoU),
so the best box of an image is the one on its object: the latent box matters, and NMS and
detection AP mean something. ``scale`` shrinks the image count from the paper's size.
"""

from dataclasses import dataclass

import numpy as np

from qs.metrics import box_iou

__all__ = ["CLASSES", "DetectionData", "make_voc2007_detection"]

CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
           "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa",
           "train", "tvmonitor")
SPLIT_SIZES = {"trainval": 5011, "test": 4952}
IMAGE_SIZE = (500, 375)  # width, height: VOC's most common


@dataclass(frozen=True)
class DetectionData:
    """One split of bags of boxes.

    X : float32 (n_boxes, d) box features, image after image. offsets : int64 (n_images + 1,):
    image ``i`` holds boxes ``offsets[i]:offsets[i+1]``. boxes : (n_boxes, 4) x1 y1 x2 y2,
    1-based inclusive pixels. image_ids : (n_images,) str. objects : per image, a tuple
    ``(boxes (m, 4), class index (m,), difficult (m,) bool)``. source : where the data came from.
    """

    X: np.ndarray
    offsets: np.ndarray
    boxes: np.ndarray
    image_ids: np.ndarray
    objects: tuple
    source: str

    @property
    def n_images(self):
        return self.offsets.size - 1

    def image_labels(self, cls):
        """1 for each image holding an object of class `cls` (its index), else 0."""
        return np.array([int((c == cls).any()) for _, c, _ in self.objects], dtype=np.int8)

    def ground_truth(self, cls):
        """``{image_id: (boxes, difficult)}`` of class `cls`, the form detection AP takes."""
        return {image: (b[c == cls], d[c == cls])
                for image, (b, c, d) in zip(self.image_ids, self.objects)}


def make_voc2007_detection(seed=0, *, scale=0.05, boxes_per_image=40, n_features=64,
                           signal=4.0, noise=1.0, difficult_rate=0.1):
    """``{"trainval": DetectionData, "test": DetectionData}``: ``scale`` times VOC2007's image
    counts (at least 20 per split), every class present in both splits."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1]; got {scale!r}.")
    if boxes_per_image < 2 or n_features < 1:
        raise ValueError("boxes_per_image must be >= 2 and n_features >= 1.")
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(len(CLASSES), n_features))
    directions *= signal / np.linalg.norm(directions, axis=1, keepdims=True)
    splits = {}
    for k, (split, full) in enumerate(SPLIT_SIZES.items()):
        n_images = max(len(CLASSES), round(scale * full))
        split_rng = np.random.default_rng([seed, k])
        splits[split] = _split(split_rng, split, n_images, boxes_per_image, directions, noise,
                               difficult_rate, seed, scale)
    return splits


def _split(rng, split, n_images, k, directions, noise, difficult_rate, seed, scale):
    X, boxes, objects = [], [], []
    n_classes, d = directions.shape
    for i in range(n_images):
        m = 1 + rng.poisson(0.6)
        classes = rng.integers(0, n_classes, m)
        classes[0] = i % n_classes  # every class occurs in every split
        obj = np.array([_random_box(rng) for _ in range(m)])
        difficult = rng.random(m) < difficult_rate
        on_objects = min(k // 4, 3 * m)
        cand = [_jitter(rng, obj[j % m]) for j in range(on_objects)]
        cand += [_random_box(rng) for _ in range(k - on_objects)]
        cand = np.array(cand)[rng.permutation(k)]
        overlap = np.stack([box_iou(o, cand) for o in obj], axis=1)  # (k, m)
        X.append(noise * rng.normal(size=(k, d)) + overlap @ directions[classes])
        boxes.append(cand)
        objects.append((obj, classes, difficult))
    source = (f"synthetic VOC2007-like bags of boxes (seed {seed}, scale {scale:g}, {split}); "
              "not the paper's data")
    return DetectionData(np.concatenate(X).astype(np.float32),
                         np.arange(0, (n_images + 1) * k, k, dtype=np.int64),
                         np.concatenate(boxes), np.array([f"{split}_{i:06d}" for i in
                                                          range(n_images)]),
                         tuple(objects), source)


def _random_box(rng):
    w, h = IMAGE_SIZE
    bw, bh = rng.integers(30, w // 2), rng.integers(30, h // 2)
    x1, y1 = rng.integers(1, w - bw), rng.integers(1, h - bh)
    return np.array([x1, y1, x1 + bw - 1, y1 + bh - 1], dtype=float)


def _jitter(rng, box):
    """A candidate box around an object: each side moved by up to 15% of the box's size."""
    w, h = box[2] - box[0] + 1, box[3] - box[1] + 1
    moved = box + rng.uniform(-0.15, 0.15, 4) * np.array([w, h, w, h])
    x1, y1 = np.clip(moved[:2], 1, IMAGE_SIZE)
    x2, y2 = np.clip(moved[2:], [x1, y1], IMAGE_SIZE)
    return np.round([x1, y1, x2, y2])
