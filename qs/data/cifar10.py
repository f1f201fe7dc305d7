"""CIFAR-10 as users hold it (the python or the binary batches), and digits-as-CIFAR.

Both CIFAR-10 versions hold five training batches and one test batch of 32x32 colour images
in 10 classes, pixels stored channel-major (1024 red, 1024 green, 1024 blue bytes per image):

- python (``cifar-10-batches-py``): ``data_batch_1`` ... ``data_batch_5``, ``test_batch``,
  each a pickled dict with ``b"data"`` (n x 3072 uint8) and ``b"labels"`` (n ints), plus
  ``batches.meta`` (``b"label_names"``);
- binary (``cifar-10-batches-bin``): ``data_batch_1.bin`` ... ``test_batch.bin``, records of
  1 label byte and 3072 pixel bytes, plus ``batches.meta.txt`` (one class name a line).

Trust: the python batches are pickles. They are read with an unpickler that resolves only
the few numpy globals an array needs (no other class or function can be built), so a
hostile file cannot run code through ``find_class``; numpy's array reconstruction itself is
trusted, as in ``numpy.load(allow_pickle=True)`` of a file one holds.

``digits_as_cifar`` is the default of the CIFAR-10 experiment that needs no download:
scikit-learn's bundled 8x8 digits, upsampled to 32x32 and repeated over 3 channels. It is
not CIFAR-10, and its ``source`` says so.
"""

import codecs
import io
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qs.data.files import LIST_BYTES, read_bytes

N_CLASSES = 10
SIDE = 32
RECORD = 3 * SIDE * SIDE  # pixel bytes per image
BATCH_BYTES = 2**28  # the most read of one batch file (a CIFAR-10 batch holds 30.7 MB)
TRAIN_BATCHES = tuple(f"data_batch_{k}" for k in range(1, 6))
TEST_BATCH = "test_batch"
CLASS_NAMES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
DIGITS_NOTE = "digits-as-CIFAR (not CIFAR-10)"

# The globals a pickled uint8 array needs (numpy's, and the codec protocol 2 writes bytes
# with under Python 3); the values are the real objects.
_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1, np.uint8))[0]
_ALLOWED = {
    ("_codecs", "encode"): codecs.encode,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
}


@dataclass(frozen=True)
class ImageData:
    """Images and labels of a training pool and a test set, shaped as CIFAR-10's.

    Parameters
    ----------
    X_train : ndarray of shape (n_train, 3, 32, 32), uint8
        The training pool's images.
    y_train : ndarray of shape (n_train,), int64
        Their labels, 0..9.
    X_test : ndarray of shape (n_test, 3, 32, 32), uint8
        The test set's images.
    y_test : ndarray of shape (n_test,), int64
        Their labels, 0..9.
    class_names : tuple of str
        The 10 classes, in label order.
    source : str
        Where the images came from.

    Examples
    --------
    >>> data = digits_as_cifar(297, seed=0)
    >>> data.X_train.shape, data.X_test.shape, data.class_names[:3]
    ((1500, 3, 32, 32), (297, 3, 32, 32), ('0', '1', '2'))
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple
    source: str


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return _ALLOWED[module, name]
        except KeyError:
            raise pickle.UnpicklingError(
                f"global {module}.{name} is not allowed in a CIFAR-10 batch"
            ) from None


def _unpickle(path):
    raw = read_bytes(path, "the CIFAR-10 batch", BATCH_BYTES)
    try:
        return _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as err:  # any malformed pickle: truncated, wrong type, bad opcode
        raise ValueError(
            f"{path}: not a readable CIFAR-10 python batch ({type(err).__name__}: {err})"
        ) from None


def _checked(path, pixels, labels):
    """(pixels (n, 3072), labels (n,)) as images (n, 3, 32, 32) uint8 and int64 labels."""
    n = len(labels)
    if pixels.ndim != 2 or pixels.shape[1] != RECORD or pixels.shape[0] != n or n == 0:
        raise ValueError(
            f"{path}: expected data of shape (n, {RECORD}) with n = {n} labels "
            f"(n > 0); got data of shape {pixels.shape}"
        )
    bad = (labels < 0) | (labels >= N_CLASSES)
    if bad.any():
        raise ValueError(
            f"{path}: labels must be in 0..{N_CLASSES - 1}; got "
            f"{labels[bad][0]} at record {int(np.argmax(bad))}"
        )
    return np.ascontiguousarray(pixels.reshape(n, 3, SIDE, SIDE)), labels.astype(np.int64)


def read_python_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch of CIFAR-10's python version (a pickled dict), read without running code.

    Parameters
    ----------
    path : str or pathlib.Path
        The batch file.

    Returns
    -------
    images : numpy.ndarray of shape (n, 3, 32, 32)
        The images, uint8.
    labels : numpy.ndarray of shape (n,)
        Their labels in 0..9, int64.

    Raises
    ------
    ValueError
        On a file that is no such pickled dict, pixels that are not uint8 records of 3072,
        or labels out of range, naming the file.

    Examples
    --------
    >>> import pathlib, pickle, tempfile
    >>> batch = {b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, 7]}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "test_batch"
    ...     _ = path.write_bytes(pickle.dumps(batch))
    ...     images, labels = read_python_batch(path)
    >>> images.shape, labels.tolist()
    ((2, 3, 32, 32), [3, 7])
    """
    batch = _unpickle(path)
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise ValueError(f"{path}: expected a pickled dict with keys b'data' and b'labels'")
    pixels, labels = np.asarray(batch[b"data"]), np.asarray(batch[b"labels"])
    if pixels.dtype != np.uint8:
        raise ValueError(f"{path}: data must be uint8 pixels; got dtype {pixels.dtype}")
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{path}: labels must be a list of integers")
    return _checked(path, pixels, labels)


def read_binary_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch of CIFAR-10's binary version: records of a label byte and 3072 pixel bytes.

    Parameters
    ----------
    path : str or pathlib.Path
        The batch file.

    Returns
    -------
    images : numpy.ndarray of shape (n, 3, 32, 32)
        The images, uint8.
    labels : numpy.ndarray of shape (n,)
        Their labels in 0..9, int64.

    Raises
    ------
    ValueError
        On a file that is not a whole number of records, or labels out of range, naming
        the file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> records = np.zeros((2, 3073), np.uint8)
    >>> records[:, 0] = [3, 7]
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "test_batch.bin"
    ...     _ = path.write_bytes(records.tobytes())
    ...     images, labels = read_binary_batch(path)
    >>> images.shape, labels.tolist()
    ((2, 3, 32, 32), [3, 7])
    """
    raw = np.frombuffer(read_bytes(path, "the CIFAR-10 batch", BATCH_BYTES), dtype=np.uint8)
    if raw.size == 0 or raw.size % (RECORD + 1):
        raise ValueError(
            f"{path}: {raw.size} bytes is not a whole number of {RECORD + 1}-byte "
            "records (1 label byte + 3072 pixel bytes); truncated or not CIFAR-10"
        )
    records = raw.reshape(-1, RECORD + 1)
    return _checked(path, records[:, 1:], records[:, 0])


def _version_of(directory):
    """('python' | 'binary', the folder holding the batches), or a ValueError."""
    for folder in (
        directory,
        directory / "cifar-10-batches-py",
        directory / "cifar-10-batches-bin",
    ):
        if (folder / TEST_BATCH).is_file():
            return "python", folder
        if (folder / f"{TEST_BATCH}.bin").is_file():
            return "binary", folder
    raise ValueError(
        f"{directory}: no CIFAR-10 batches found (expected {TEST_BATCH} and "
        f"data_batch_1..5 of the python version, or the same names with .bin, "
        "here or in cifar-10-batches-py/ or cifar-10-batches-bin/)"
    )


def _class_names(folder, version):
    """The names in batches.meta (python) or batches.meta.txt (binary); the standard ones if
    the file is absent."""
    if version == "python":
        path = folder / "batches.meta"
        if not path.is_file():
            return CLASS_NAMES
        meta = _unpickle(path)
        names = meta.get(b"label_names") if isinstance(meta, dict) else None
        names = [n.decode() if isinstance(n, bytes) else n for n in names or []]
    else:
        path = folder / "batches.meta.txt"
        if not path.is_file():
            return CLASS_NAMES
        text = read_bytes(path, "the class names", LIST_BYTES).decode("utf-8", "replace")
        names = [line.strip() for line in text.splitlines() if line.strip()]
    if len(names) != N_CLASSES or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"{path}: expected {N_CLASSES} class names (strings), one a line; got {len(names)}"
        )
    return tuple(names)


def load_cifar10(directory: str | Path) -> ImageData:
    """CIFAR-10 from `directory`, in either version: the training pool and the test set.

    Parameters
    ----------
    directory : str or pathlib.Path
        The folder of the batches (``data_batch_1`` .. ``data_batch_5`` and ``test_batch``,
        with ``.bin`` for the binary version), or its parent.

    Returns
    -------
    ImageData
        The training images (batches 1-5 in order, 50000 for the real data), the test
        images (10000), the class names (from the batches' meta file when present) and
        the source.

    Raises
    ------
    ValueError
        On a missing directory or batch, or a batch that does not read (see
        `read_python_batch` and `read_binary_batch`).

    Examples
    --------
    Six binary batches of one image each:

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     for name in (*TRAIN_BATCHES, TEST_BATCH):
    ...         _ = (pathlib.Path(tmp) / f"{name}.bin").write_bytes(bytes(3073))
    ...     data = load_cifar10(tmp)
    >>> data.X_train.shape, data.X_test.shape, data.class_names[0]
    ((5, 3, 32, 32), (1, 3, 32, 32), 'airplane')
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"CIFAR-10 directory {directory} does not exist")
    version, folder = _version_of(directory)
    suffix, read = ("", read_python_batch) if version == "python" else (".bin", read_binary_batch)
    paths = [folder / f"{name}{suffix}" for name in (*TRAIN_BATCHES, TEST_BATCH)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"{folder}: missing CIFAR-10 batch(es) {', '.join(missing)}")
    train = [read(p) for p in paths[:-1]]
    X_test, y_test = read(paths[-1])
    return ImageData(
        np.concatenate([x for x, _ in train]),
        np.concatenate([y for _, y in train]),
        X_test,
        y_test,
        _class_names(folder, version),
        f"CIFAR-10 {version} batches in {folder.resolve()}",
    )


def digits_as_cifar(test_size, seed):
    """scikit-learn's 1797 digits as CIFAR-10-shaped images, split by a seeded stratified split.

    Each 8x8 digit becomes a 32x32x3 uint8 image: each pixel a 4x4 block, grey over the 3
    channels.

    Parameters
    ----------
    test_size : int or float
        The test set's images, as scikit-learn's ``train_test_split`` takes it.
    seed : int
        The split's seed.

    Returns
    -------
    ImageData
        The training pool and test set; the source says they are not CIFAR-10.

    Examples
    --------
    >>> data = digits_as_cifar(297, seed=0)
    >>> data.X_test.shape, data.X_test.dtype, sorted(set(data.y_test.tolist())) == list(range(10))
    ((297, 3, 32, 32), dtype('uint8'), True)
    >>> data.source.startswith(DIGITS_NOTE)
    True
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    grey = np.rint(X.reshape(-1, 8, 8) * (255 / 16)).astype(np.uint8)
    images = np.repeat(np.repeat(grey, 4, axis=1), 4, axis=2)
    images = np.ascontiguousarray(np.repeat(images[:, None], 3, axis=1))
    X_train, X_test, y_train, y_test = train_test_split(
        images, y.astype(np.int64), test_size=test_size, stratify=y, random_state=seed
    )
    return ImageData(
        X_train,
        y_train,
        X_test,
        y_test,
        tuple(map(str, range(10))),
        f"{DIGITS_NOTE}: scikit-learn load_digits, 1797 8x8 images upsampled to "
        f"32x32x3; stratified split seed {seed}",
    )
