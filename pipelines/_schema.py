"""Declared experiment configs: a pydantic model per experiment (types, defaults, one line of
help per key), validated into the plain dict the pipeline reads, with one-line errors that
name the key path, what was expected and what was given.

The leaf types below keep a value as given (an integer stays an integer, so tables print the
C or the grid a config wrote) and state what they expect in words the errors reuse.
"""

import copy
import math
import numbers
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, create_model

from qsrank.pipelines._config import merge
from qsrank.pipelines._yaml import parse_yaml, shown


class Section(BaseModel):
    """A mapping of declared keys; any other key is an error."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class Expected(ValueError):
    """A value that is not what a key expects; the message says what it expects, and `given`
    (when set) what was given in its place (e.g. the bad entry of a list)."""

    def __init__(self, expected, given=None):
        super().__init__(expected)
        self.given = given


def _leaf(check, expected):
    """An annotated type whose validator `check(value)` returns the value or raises Expected."""

    def validate(value):
        try:
            return check(value)
        except Expected:
            raise
        except (TypeError, ValueError):
            raise Expected(expected) from None

    return PlainValidator(validate, json_schema_input_type=Any)


def checker(leaf):
    """The function that checks a value of the leaf type `leaf` (returns it or raises
    Expected), to check an entry of a larger value by hand."""
    return leaf.__metadata__[0].func


def custom(check, expected):
    """A leaf checked by `check(value)`, which returns the value to keep or raises
    Expected (or TypeError/ValueError: then the error says `expected`)."""
    return Annotated[Any, _leaf(check, expected)]


def number(*, integer=False, low=None, strict=False, high=None, high_strict=True):
    """A finite integer (or real, unless `integer`), not a boolean, within the given bounds;
    numpy scalars are accepted and stored as plain Python numbers."""
    kind = "integer" if integer else "number"
    bounds = [
        f"{'>' if strict else '>='} {low}" if low is not None else "",
        f"{'<' if high_strict else '<='} {high}" if high is not None else "",
    ]
    expected = " ".join(["a finite", kind, " and ".join(b for b in bounds if b)]).strip()

    def check(value):
        if isinstance(value, bool) or not isinstance(
            value, numbers.Integral if integer else numbers.Real
        ):
            raise Expected(expected)
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
        ok = math.isfinite(value)
        if ok and low is not None:
            ok = value > low if strict else value >= low
        if ok and high is not None:
            ok = value < high if high_strict else value <= high
        if not ok:
            raise Expected(expected)
        return value

    return Annotated[Any, _leaf(check, expected)]


def _accept(ok, expected):
    """A leaf holding the values for which `ok(value)` is true, kept as given."""

    def check(value):
        if not ok(value):
            raise Expected(expected)
        return value

    return Annotated[Any, _leaf(check, expected)]


def choice(allowed):
    """One of the strings `allowed`."""
    allowed = tuple(allowed)
    return _accept(lambda v: isinstance(v, str) and v in allowed, f"one of {', '.join(allowed)}")


def member(allowed, expected):
    """One of the values `allowed` (not a boolean); `expected` says which in words."""
    allowed = tuple(allowed)
    return _accept(lambda v: not isinstance(v, bool) and v in allowed, expected)


def flag():
    """true or false."""
    return _accept(lambda v: isinstance(v, bool), "true or false")


def text():
    """A string (a path, a name)."""
    return _accept(lambda v: isinstance(v, str), "a string")


def optional(leaf, what="null"):
    """`leaf`, or None."""
    return _or(leaf, lambda value: value is None, f"{what} or {{}}")


def either(leaf, literal):
    """`leaf`, or the string `literal` (e.g. a C value or 'cv')."""
    return _or(
        leaf, lambda value: value == literal and isinstance(value, str), f"{{}} or {literal!r}"
    )


def _or(leaf, other, expected):
    """`leaf`, or a value for which `other(value)` is true, kept as given; `expected` words
    the pair around the leaf's own expectation ({})."""
    inner = checker(leaf)

    def check(value):
        if other(value):
            return value
        try:
            return inner(value)
        except Expected as err:
            raise Expected(expected.format(err), err.given) from None

    return Annotated[Any, PlainValidator(check, json_schema_input_type=Any)]


def list_of(leaf, expected, *, length=None, distinct=False, convert=None, why=False):
    """A non-empty list of `leaf` values (of `length` values, when given; without repeats,
    if `distinct`); `convert` maps each entry first. A bad entry is named, with what it is
    not when `why`."""
    inner = checker(leaf)

    def check(value):
        if not isinstance(value, list) or not value or length not in (None, len(value)):
            raise Expected(expected)
        out = []
        for k, entry in enumerate(value):
            try:
                out.append(inner(convert(entry) if convert else entry))
            except Expected as err:
                raise Expected(
                    expected, f"entry {k}: {shown(entry)}" + (f" (not {err})" if why else "")
                ) from None
        if distinct and len(set(map(repr, out))) != len(out):
            raise Expected(expected, f"{shown(value)} (with repeats)")
        return out

    return Annotated[Any, _leaf(check, expected)]


def distinct_list(leaf, what, *, convert=None):
    """A non-empty list of distinct `leaf` values; `convert` maps each entry first."""
    return list_of(
        leaf, f"a non-empty list of distinct {what}", distinct=True, convert=convert, why=True
    )


def sized_list(leaf, length, what):
    """A list of `length` `leaf` values."""
    return list_of(leaf, f"a list of {length} {what}", length=length)


def c_grid():
    """A non-empty list of distinct C values > 0 (a cross-validation grid)."""
    return list_of(
        number(low=0, strict=True), "a non-empty list of distinct C values > 0", distinct=True
    )


def names(known, what, convert=None):
    """A name or a non-empty list of names from `known`, as a list without repeats;
    `convert` maps the value first (e.g. 'all' to every name)."""
    expected = f"one or more {what} names from {', '.join(known)}"

    def check(value):
        value = convert(value) if convert else value
        given = [value] if isinstance(value, str) else value
        if not isinstance(given, list) or not given:
            raise Expected(expected)
        unknown = [n for n in given if n not in known]
        if unknown:
            raise Expected(expected, f"unknown {what} name(s) {', '.join(map(shown, unknown))}")
        return list(dict.fromkeys(given))

    return Annotated[Any, _leaf(check, expected)]


def per_key(leaf, keys, defaults, what, cast=None):
    """One `leaf` value for every key of `keys`, given as one value (for all) or a mapping
    of some keys (the others from `defaults`); resolved to the full mapping, each given value
    passed through `cast` when set."""
    check_one = checker(leaf)

    def inner(value):
        value = check_one(value)
        return cast(value) if cast else value

    keys = tuple(keys)
    expected = f"{what}, or a mapping of {', '.join(keys)} to one"

    def check(value):
        if not isinstance(value, dict):
            try:
                one = inner(value)
            except Expected:
                raise Expected(expected) from None
            return {k: copy.deepcopy(one) for k in keys}
        unknown = [k for k in value if k not in keys]
        if unknown:
            raise Expected(expected, f"unknown key(s) {', '.join(map(shown, unknown))}")
        out = copy.deepcopy(defaults)
        for k, v in value.items():
            try:
                out[k] = inner(v)
            except Expected:
                raise Expected(expected, f"{k}: {shown(v)}") from None
        return out

    return Annotated[Any, _leaf(check, expected)]


def presets(builtin, keys, leaves, expected):
    """Named presets of sizes: the `builtin` ones with the config's laid over them, key by key;
    per preset and vary (a key of `keys`), a mapping of exactly the keys `keys[vary]`, each
    value a `leaves[key]` (default: an integer >= 1)."""
    count = checker(number(integer=True, low=1))

    def check(value):
        if not isinstance(value, dict):
            raise Expected(expected)
        out = merge(builtin, value)
        for name, preset in out.items():
            for vary, spec in preset.items() if isinstance(preset, dict) else [(None, None)]:
                where = f"{name}.{vary}" if vary else str(name)
                if vary not in keys or not isinstance(spec, dict) or set(spec) != set(keys[vary]):
                    raise Expected(expected, f"{where}: {shown(spec)}")
                for k, entry in spec.items():
                    try:
                        spec[k] = checker(leaves[k])(entry) if k in leaves else count(entry)
                    except Expected as err:
                        given = err.given or shown(entry)
                        raise Expected(expected, f"{where}.{k}: {given}") from None
        return out

    return Annotated[Any, _leaf(check, expected)]


def key(default, help, name=None):
    """A declared key: its default (a Section class: that section's defaults), its one line
    of help, and its name in the config when that is no Python name (`class`, `01`)."""
    if isinstance(default, type) and issubclass(default, BaseModel):
        return Field(default_factory=default, description=help, alias=name)
    if isinstance(default, (list, dict)):
        return Field(default_factory=lambda: copy.deepcopy(default), description=help, alias=name)
    return Field(default, description=help, alias=name)


def with_defaults(section, **values):
    """`section` with other defaults for the (leaf) keys `values`, their types and help as
    declared."""
    fields = section.model_fields

    def declared(name):  # the key's type with its checks (Annotated needs at least one)
        meta = fields[name].metadata
        return Annotated[(fields[name].annotation, *meta)] if meta else fields[name].annotation

    return create_model(
        section.__name__,
        __base__=section,
        **{
            name: (declared(name), key(value, fields[name].description, fields[name].alias))
            for name, value in values.items()
        },
    )


def keys(model):
    """The config keys of a section, in order: {name in the config: field}."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def validate(model, config):
    """`config` (a mapping) checked against `model`: the resolved plain dict, or a ValueError
    of one line naming the key path, what was expected and what was given."""
    if not isinstance(config, dict):
        raise ValueError(f"config must be a mapping of keys; got {shown(config)}")
    try:
        return model.model_validate(config).model_dump(by_alias=True)
    except ValidationError as err:
        raise ValueError(error_line(model, err.errors()[0])) from None


def error_line(model, error):
    """One pydantic error as one line of text."""
    loc = [str(part) for part in error["loc"]]
    path = ".".join(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        allowed = ", ".join(keys(parent)) if parent else ""
        where = f" in {shown('.'.join(loc[:-1]))}" if len(loc) > 1 else ""
        return f"unknown config key {shown(path)}; allowed keys{where}: {allowed}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{path}: expected a mapping of keys; got {shown(error['input'])}"
    ctx_error = error.get("ctx", {}).get("error")
    if isinstance(ctx_error, Expected):
        given = ctx_error.given or shown(error["input"])
        return f"{path}: expected {ctx_error}; got {given}"
    message = str(ctx_error) if ctx_error is not None else error["msg"]
    return f"{path}: {message}" if path else message


def _model_at(model, loc):
    """The model class of the section at key path `loc` (None when it is no section)."""
    for part in loc:
        field = keys(model).get(part)
        model = field.annotation if field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
    return model


def help_lines(model, defaults=None, indent=""):
    """The keys of `model` with their defaults (or `defaults`, a resolved config) and one line
    of help each, as YAML a config could start from."""
    if defaults is None:  # unvalidated: the defaults as declared, whatever is installed
        defaults = model.model_construct().model_dump(by_alias=True)
    lines = []
    for name, field in keys(model).items():
        comment = f"  # {field.description}" if field.description else ""
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            lines.append(f"{indent}{_flow(name)}:{comment}")
            lines += help_lines(sub, defaults[name], indent + "  ")
        else:
            lines.append(f"{indent}{_flow(name)}: {_flow(defaults[name])}{comment}")
    return lines


def _flow(value):
    """`value` as one line of YAML that reads back as itself (a key '01' stays a string)."""
    text = yaml.safe_dump([value], default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()[1:-1]


def parse_sets(items):
    """`--set key.path=value` items as a nested mapping; each value read as a YAML scalar
    (or flow list/mapping), so `C.ap=10` gives the number 10 and `methods=[ap, 0-1]` a list."""
    out = {}
    for item in items:
        path, sep, raw = item.partition("=")
        names = path.strip().split(".")
        if not sep or not all(names):
            raise ValueError(f"--set {shown(item)}: expected KEY=VALUE with KEY a dotted key path")
        try:  # by the rules of a config file: 1e-5 a float, no aliases, ...
            value = parse_yaml(raw, f"--set {path.strip()}") if raw.strip() else None
        except ValueError as err:
            raise ValueError(f"--set {shown(item)}: {err}") from None
        node = out
        for name in names[:-1]:
            node = node.setdefault(name, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {shown(item)}: {shown(name)} is set to a value above")
        node[names[-1]] = value
    return out
