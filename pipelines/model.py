"""The model file of `qsrank fit`: data, never pickle. ``model.json`` (checked against `ModelMeta`,
with a checksum over both files) beside ``model.npz`` (read without pickle, only to the size its
declared shapes give), so that loading a model runs no code and a changed, foreign or zip-bomb
file is refused in one line."""

import hashlib
import io
import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from qs.data.files import read_bytes, shown
from qsrank.pipelines._io import write_json, write_npz
from qsrank.pipelines._provenance import _version

FORMAT = "qsrank-linear-model"
VERSION = 2  # 2: the checksum covers model.json too
JSON_NAME, WEIGHTS_NAME = "model.json", "model.npz"
ARRAYS = ("coef", "intercept", "mean", "scale")
_JSON_BYTES = 2**26  # feature names of a million features fit
_NPY_HEADER = 2**16  # the most a .npy member's header takes (format 1.0) and then some

_Finite = Annotated[float, Field(allow_inf_nan=False)]


class ModelMeta(BaseModel):
    """model.json as `write_model` writes it: every field typed, nothing else allowed."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    format: Literal[FORMAT]
    format_version: Literal[VERSION]
    qsrank_version: str | None
    n_features: Annotated[int, Field(gt=0, le=2**31)]
    feature_names: list[str] | None
    label_column: str | None
    classes: Annotated[list[str | bool | int | _Finite], Field(min_length=1, max_length=2**16)]
    loss: Literal["ap", "ndcg", "01"]
    solver: str
    C: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]
    scaling: Literal["standard", "none"]
    svmlight_zero_based: bool
    column_fingerprint: dict | None
    weights: Literal[WEIGHTS_NAME]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    @model_validator(mode="after")
    def _consistent(self):
        names = self.feature_names
        if names is not None and len(names) != self.n_features:
            raise ValueError(f"feature_names: {len(names)} names for {self.n_features} features")
        if names is not None and len(set(names)) != len(names):
            raise ValueError(f"feature_names: {repeated(names)} appears more than once")
        if len({str(c) for c in self.classes}) != len(self.classes):
            raise ValueError(
                f"classes: {repeated([str(c) for c in self.classes])} appears more than once"
            )
        if len(self.C) != len(self.classes):
            raise ValueError(f"C: {len(self.C)} values for {len(self.classes)} classes")
        if not _fingerprint_ok(self.column_fingerprint, self.n_features):
            raise ValueError("column_fingerprint: malformed for the model's feature columns")
        return self


def _fingerprint_ok(fingerprint, n_features):
    """Whether a column fingerprint is absent or well formed for ``n_features`` columns."""
    if fingerprint is None:
        return True
    if not isinstance(fingerprint, dict) or fingerprint.get("count") != n_features:
        return False
    lists = [fingerprint.get(k) for k in ("columns", "mean", "std")]
    if not all(isinstance(v, list) and len(v) == len(lists[0]) for v in lists):
        return False
    return all(isinstance(c, int) and 0 <= c < n_features for c in lists[0]) and all(
        isinstance(v, (int, float)) and math.isfinite(v) for v in lists[1] + lists[2]
    )


def _cut(value):
    """`value` as Python writes it, cut short: read from a file, it may be anything."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def repeated(items):
    """The first item of `items` seen before, as messages show values."""
    seen = set()
    return shown(next(x for x in items if x in seen or seen.add(x)))


@dataclass(frozen=True)
class Model:
    """A linear one-vs-rest model: the scores of X are ``((X - mean) / scale) @ coef.T +
    intercept``, one column per positive class of ``meta["classes"]``."""

    meta: dict
    coef: np.ndarray
    intercept: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    path: Path

    def scores(self, X):
        """(n_samples, n_classes) scores; X dense or scipy.sparse, never densified."""
        w = self.coef / self.scale
        return np.asarray(X @ w.T) + (self.intercept - w @ self.mean)


def model_digest(meta, weights):
    """SHA-256 of model.json's fields but ``sha256`` (canonical JSON), then of model.npz's bytes."""
    fields = {k: v for k, v in meta.items() if k != "sha256"}
    h = hashlib.sha256(
        json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    )
    h.update(weights)
    return h.hexdigest()


def write_model(directory, meta, **arrays):
    """Write model.npz (the `ARRAYS`) and model.json (`meta` with format, version and checksum) into
    `directory`; return the JSON's path."""
    directory = Path(directory)
    write_npz(directory / WEIGHTS_NAME, {k: np.asarray(arrays[k], np.float64) for k in ARRAYS})
    header = {"format": FORMAT, "format_version": VERSION, "qsrank_version": _version("qsrank")}
    meta = json.loads(json.dumps({**header, **meta, "weights": WEIGHTS_NAME}))  # as it reads back
    meta["sha256"] = model_digest(meta, (directory / WEIGHTS_NAME).read_bytes())
    write_json(directory / JSON_NAME, meta)
    return directory / JSON_NAME


class _RepeatedKey(Exception):
    """A JSON object naming a key twice (json would keep the last value silently)."""


def _unique_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) < len(keys):
        raise _RepeatedKey(repeated(keys))
    return dict(pairs)


def model_files(path):
    """(model.json, model.npz) of the model at `path` (its model.json or a run directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / JSON_NAME
    return path, path.parent / WEIGHTS_NAME


def read_model(path):
    """The model at `path`, every field checked; a ValueError naming the file otherwise."""
    path, weights = model_files(path)
    raw = read_bytes(path, "the model file", _JSON_BYTES)
    try:
        meta = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except _RepeatedKey as err:
        raise ValueError(
            f"{path}: damaged qsrank model file: the key {err} appears more than once."
        ) from None
    except ValueError:  # not UTF-8, not JSON
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(
            f"{path}: not a qsrank model file (expected the {JSON_NAME} that `qsrank fit` writes)."
        )
    if meta.get("format_version") != VERSION:
        raise ValueError(
            f"{path}: model format version {_cut(meta.get('format_version'))}; "
            f"this qsrank reads version {VERSION} (written by qsrank "
            f"{_cut(meta.get('qsrank_version'))}); refit the model."
        )
    try:
        ModelMeta.model_validate(meta)
    except ValidationError as err:
        error = err.errors()[0]
        where = ".".join(map(str, error["loc"]))
        message = error["msg"].removeprefix("Value error, ")
        raise ValueError(
            f"{path}: damaged qsrank model file: {where + ': ' if where else ''}{message}."
        ) from None
    shapes = {
        "coef": (len(meta["classes"]), meta["n_features"]),
        "intercept": (len(meta["classes"]),),
        "mean": (meta["n_features"],),
        "scale": (meta["n_features"],),
    }
    inflated = sum(8 * math.prod(shape) + _NPY_HEADER for shape in shapes.values())
    raw = read_bytes(weights, "the model weights", inflated + inflated // 64 + 2**20)
    if model_digest(meta, raw) != meta["sha256"]:
        raise ValueError(
            f"{path}: its checksum does not match it and {weights.name}; the "
            "model was changed after `qsrank fit` wrote it, or its weights "
            "belong to another model."
        )
    arrays = _weights(weights, raw, shapes)
    return Model(meta, *(arrays[k] for k in ARRAYS), path)


def _weights(path, raw, shapes):
    """The arrays of model.npz (bytes `raw`), checked against the JSON's shapes before inflating."""
    try:
        _check_members(path, raw, shapes)
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in ARRAYS}
    except ValueError as err:
        if str(err).startswith(f"{path}:"):
            raise
        raise ValueError(f"{path}: not a readable .npz of model weights (ValueError).") from None
    except Exception as err:  # zip, zlib, ...
        raise ValueError(
            f"{path}: not a readable .npz of model weights ({type(err).__name__})."
        ) from None
    for name, shape in shapes.items():
        a = arrays[name]
        if a.dtype.kind != "f" or a.shape != shape or not np.isfinite(a).all():
            raise ValueError(
                f"{path}: {name} must be finite floats of shape {shape}; got "
                f"{a.dtype} of shape {a.shape}."
            )
    if (arrays["scale"] < np.finfo(np.float64).tiny).any():
        raise ValueError(
            f"{path}: scale must be at least {np.finfo(np.float64).tiny:.3g} (a "
            f"feature's spread); got {arrays['scale'].min():.3g}."
        )
    with np.errstate(all="ignore"):
        w = arrays["coef"] / arrays["scale"]
        offset = arrays["intercept"] - w @ arrays["mean"]
    if not (np.isfinite(w).all() and np.isfinite(offset).all()):
        raise ValueError(
            f"{path}: coef / scale overflows; the weights and the scaling do not "
            "describe a usable model."
        )
    return arrays


def _check_members(path, raw, shapes):
    """Refuse model.npz unless it holds exactly the `ARRAYS`, each a float64 .npy of its shape that
    inflates no further (a zip bomb is refused before it inflates)."""
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        members = {info.filename: info for info in zf.infolist()}
        if sorted(members) != sorted(f"{k}.npy" for k in ARRAYS):
            raise ValueError(
                f"{path}: expected the members {', '.join(ARRAYS)} (.npy); got "
                f"{', '.join(shown(m) for m in list(members)[:8])}."
            )
        for name, shape in shapes.items():
            info = members[f"{name}.npy"]
            if info.file_size > 8 * math.prod(shape) + _NPY_HEADER:
                raise ValueError(
                    f"{path}: {name} inflates to {info.file_size:,} bytes, more "
                    f"than an array of shape {shape} takes."
                )
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                read_header = {
                    (1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0,
                }.get(version)
                if read_header is None:
                    raise ValueError(
                        f"{path}: {name} is a .npy of version {version}, not one qsrank writes."
                    )
                got, _, dtype = read_header(fh)
            if got != shape or dtype != np.float64:
                raise ValueError(
                    f"{path}: {name} must be finite floats of shape {shape}; got "
                    f"{dtype} of shape {got}."
                )
