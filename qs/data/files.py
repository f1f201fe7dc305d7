"""Reading untrusted files with bounds: regular files only, of a bounded size, at paths that
stay inside their data directory, with their contents kept out of messages.

A device (``/dev/zero``) or a FIFO named where a data file is expected, directly or through
a symlink, would be read until memory runs out or block forever; a list file naming
``../elsewhere`` or ``/etc/passwd`` would read outside the data; and an error message that
quotes what it read would print a foreign file's contents. Each is a ValueError here.
"""

import json
import os
import re
import resource
import stat
from pathlib import Path, PurePath
from typing import Any

import numpy as np

__all__ = [
    "IMAGE_ID",
    "LIST_BYTES",
    "SAMPLE_BYTES",
    "Unreadable",
    "as_float32",
    "check_final_newline",
    "check_memory",
    "check_regular",
    "inside",
    "memory_available",
    "read_bytes",
    "read_json",
    "shown",
]

LIST_BYTES = 2**30  # a list file (10M boxes of a latent AP-SVM list take about 400 MB)
SAMPLE_BYTES = 2**26  # one sample's file (a dense 4096-d feature as text: about 100 KB)
IMAGE_ID = re.compile(r"[A-Za-z0-9._-]+")  # an image id names its files: portable characters
# What a message may quote of a file: a short field of a list file (names, numbers), or of
# a numeric format (``index:value`` pairs).
_FIELDS = re.compile(r"[\w.:+\- ]{0,60}", re.ASCII)
_NUMERIC = re.compile(r"[0-9.eE+\-]{0,40}|[0-9]{1,18}:[\w.:+\-]{0,24}", re.ASCII)


class Unreadable(ValueError):
    """A file that cannot or may not be read: a ValueError ``Cannot read WHAT PATH: REASON.``

    Parameters
    ----------
    what : str
        What the file is, for the message ("the feature file").
    path : str or pathlib.Path
        The file.
    reason : str
        Why it cannot be read; kept as ``reason``, for callers that say more.

    Examples
    --------
    >>> err = Unreadable("the list", "data/list.txt", "it is a FIFO, not a regular file")
    >>> str(err)
    'Cannot read the list data/list.txt: it is a FIFO, not a regular file.'
    >>> err.reason, isinstance(err, ValueError)
    ('it is a FIFO, not a regular file', True)
    """

    def __init__(self, what, path, reason):
        super().__init__(f"Cannot read {what} {path}: {reason}.")
        self.reason = reason


def read_bytes(path: str | Path, what: str, limit: int) -> bytes:
    """The bytes of a regular file, refused above a size.

    The file is opened without blocking, so that a FIFO is refused rather than waited on,
    and read to its size (a byte more, then on in small steps should it grow), so that a
    large `limit` asks for no more memory than the file takes.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    what : str
        What it is, for messages ("the feature file").
    limit : int
        The most bytes read.

    Returns
    -------
    bytes
        The file's contents.

    Raises
    ------
    Unreadable
        A ValueError: a missing or unreadable file, one that is not regular (a directory,
        FIFO or device), or one over `limit` bytes.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "list.txt"
    ...     _ = path.write_bytes(b"12345")
    ...     data = read_bytes(path, "the list", 10)
    ...     try:
    ...         read_bytes(path, "the list", 4)
    ...     except Unreadable as err:
    ...         reason = err.reason
    >>> data, reason
    (b'12345', 'it is larger than 4 bytes, the most read for one; is it the right file?')
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise Unreadable(what, path, err.strerror) from None
    try:
        info = os.fstat(fd)
        _check_mode(path, what, info)
    except Unreadable:
        os.close(fd)
        raise
    too_large = Unreadable(
        what,
        path,
        f"it is larger than {limit:,} bytes, the most read for one; is it the right file?",
    )
    if info.st_size > limit:
        os.close(fd)
        raise too_large
    chunks, size, step = [], 0, info.st_size + 1
    with os.fdopen(fd, "rb") as fh:
        try:
            while size <= limit and (chunk := fh.read(min(step, limit + 1 - size))):
                chunks.append(chunk)
                size += len(chunk)
                step = 2**20
        except OSError as err:
            raise Unreadable(what, path, err.strerror) from None
    if size > limit:
        raise too_large
    return b"".join(chunks)


def check_regular(path, what):
    """Refuse a path unless it is a regular file (after symlinks), for files another library opens.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    what : str
        What it is, for messages.

    Raises
    ------
    Unreadable
        A missing path, or one that is a directory, FIFO or device.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     try:
    ...         check_regular(tmp, "the cache")
    ...     except Unreadable as err:
    ...         reason = err.reason
    >>> reason
    'it is a directory, not a regular file'
    """
    try:
        info = os.stat(path)
    except OSError as err:
        raise Unreadable(what, path, err.strerror) from None
    _check_mode(path, what, info)


def _check_mode(path, what, info):
    mode = info.st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise Unreadable(what, path, f"it is {kind}, not a regular file")


def check_final_newline(path, data):
    """Refuse a non-empty text file whose last line has no newline: a file cut short mid-line.

    A copy or a download that stopped would otherwise read as a shorter last number.

    Parameters
    ----------
    path : str or pathlib.Path
        The file, for the message.
    data : bytes or str
        Its contents.

    Raises
    ------
    ValueError
        When ``data`` is not empty and does not end with a newline.

    Examples
    --------
    >>> check_final_newline("list.txt", b"1 2\\n")
    >>> check_final_newline("list.txt", "1 2")
    Traceback (most recent call last):
        ...
    ValueError: list.txt: the last line ends without a newline; the file looks cut short ...
    """
    if data and not data.endswith(b"\n" if isinstance(data, bytes) else "\n"):
        raise ValueError(
            f"{path}: the last line ends without a newline; the file looks cut "
            "short (every line of this format ends with one)."
        )


def inside(root, name, where):
    """The path of a name read from a list file, refused unless it stays inside ``root``.

    Parameters
    ----------
    root : str or pathlib.Path
        The data directory.
    name : str
        The name read from the file.
    where : str
        The file and line, for the message.

    Returns
    -------
    pathlib.Path
        ``root / name``.

    Raises
    ------
    ValueError
        For an absolute name, one that climbs out with ``..``, or one holding a NUL.

    Examples
    --------
    >>> inside("data", "img_1.feature", "list.txt line 2").as_posix()
    'data/img_1.feature'
    >>> inside("data", "../secret", "list.txt line 2")
    Traceback (most recent call last):
        ...
    ValueError: list.txt line 2: <9 characters, not shown> is not a path inside the data ...
    """
    pure = PurePath(name)
    if pure.is_absolute() or ".." in pure.parts or "\0" in name:
        raise ValueError(
            f"{where}: {shown(name)} is not a path inside the data directory "
            f"{root}; expected a relative name without '..'."
        )
    return Path(root) / pure


def shown(text, numeric=False):
    """Text read from a file, quoted for a message when it looks like a field, else its length.

    A foreign file's contents (a path, a password line) are thus never printed.

    Parameters
    ----------
    text : str
        What was read.
    numeric : bool, default False
        Quote only a number, or an index, ':' and a short value (a sparse feature file's
        fields); otherwise a short run of word characters, digits and ``.:+-`` (a list
        file's fields).

    Returns
    -------
    str
        ``repr(text)``, or ``<N characters, not shown>``.

    Examples
    --------
    >>> shown("img_1"), shown("root:x:0:0:root:/root:/bin/bash")
    ("'img_1'", '<31 characters, not shown>')
    >>> shown("3:0.5", numeric=True), shown("abc", numeric=True)
    ("'3:0.5'", '<3 characters, not shown>')
    """
    if (_NUMERIC if numeric else _FIELDS).fullmatch(text):
        return repr(text)
    return f"<{len(text)} characters, not shown>"


def as_float32(path, name, a):
    """Finite float64 values as float32, refused where they overflow it.

    Parameters
    ----------
    path : str or pathlib.Path
        The file they were read from, for the message.
    name : str
        What they are, for the message.
    a : ndarray
        The values.

    Returns
    -------
    ndarray
        ``a`` as float32.

    Raises
    ------
    ValueError
        When a value's magnitude exceeds float32's largest.

    Examples
    --------
    >>> as_float32("x.mat", "feat", np.array([0.5, -2.0])).dtype
    dtype('float32')
    >>> as_float32("x.mat", "feat", np.array([1e300]))
    Traceback (most recent call last):
        ...
    ValueError: x.mat: feat hold 1e+300, beyond float32 (the features are kept as float32).
    """
    big = np.flatnonzero(np.abs(a.ravel()) > np.finfo(np.float32).max)
    if big.size:
        raise ValueError(
            f"{path}: {name} hold {float(a.ravel()[big[0]])}, beyond float32 "
            f"(the features are kept as float32)."
        )
    return a.astype(np.float32)


def read_json(path: str | Path) -> Any:
    """The JSON document in a file, or None when it is missing or unreadable.

    A record that a killed writer left half-written counts as absent, as does a FIFO, a
    device or a file over ``SAMPLE_BYTES``, so that reading a record never blocks or fills
    memory.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.

    Returns
    -------
    Any
        The document, or None.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "record.json"
    ...     _ = path.write_text('{"done": true}')
    ...     print(read_json(path), read_json(pathlib.Path(tmp) / "missing.json"))
    {'done': True} None
    """
    try:
        return json.loads(read_bytes(path, "a JSON record", SAMPLE_BYTES))
    except ValueError:  # Unreadable, a decoding error, text that is not JSON
        return None


def memory_available():
    """Bytes this process may still allocate.

    The machine's available memory (``MemAvailable`` of /proc/meminfo, else the free
    pages), within the address-space limit (``RLIMIT_AS``) less what the process already
    maps.

    Returns
    -------
    int
        The bytes.

    Examples
    --------
    >>> memory_available() > 0
    True
    """
    available = None
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit != resource.RLIM_INFINITY:
        available = min(available, max(limit - _mapped(), 0))
    return available


def _mapped():
    """Bytes of address space this process maps now (``VmSize``), 0 when unknown."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def check_memory(what, n_bytes):
    """Refuse, before anything is allocated, what would take more memory than is available.

    Parameters
    ----------
    what : str
        What would be allocated, for the message (e.g. "path: X of shape (10, 2000000000)
        as dense float64").
    n_bytes : int
        The memory it takes.

    Raises
    ------
    ValueError
        When ``n_bytes`` exceeds `memory_available`.

    Examples
    --------
    >>> check_memory("a small array", 1024)
    >>> check_memory("X of shape (2**40, 2**40) as float64", 8 * 2**80)
    Traceback (most recent call last):
        ...
    ValueError: X of shape (2**40, 2**40) as float64 would take ... of memory; this machine ...
    """
    available = memory_available()
    if n_bytes > available:
        raise ValueError(
            f"{what} would take {_size(n_bytes)} of memory; this machine can give "
            f"{_size(available)}."
        )


def _size(n_bytes):
    return f"{n_bytes / 2**30:,.1f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:,.1f} MiB"
