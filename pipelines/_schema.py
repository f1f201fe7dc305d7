"""Declared experiment configs: a strict pydantic model per experiment, validated into the plain
dict a pipeline reads, with one-line errors naming the key path. Adds what pydantic lacks:
numbers kept as given, one value or a mapping per key, presets, and errors of one line."""

import copy
import re
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    WrapValidator,
    conint,
    create_model,
)

from qsrank.pipelines._config import merge
from qsrank.pipelines._yaml import parse_yaml, shown

STRICT = ConfigDict(strict=True)


class Section(BaseModel):
    """A mapping of declared keys; any other key is an error."""

    model_config = ConfigDict(extra="forbid", validate_default=True, strict=True)


def _as_given(value, handler):
    checked = handler(value)
    return value if type(value) is int else checked


def real(**bounds):
    """A finite number within `bounds` (`Field`'s gt, ge, lt, le); an integer stays one."""
    return Annotated[float, Field(allow_inf_nan=False, **bounds), WrapValidator(_as_given)]


def _no_repeats(values):
    if len(set(map(repr, values))) != len(values):
        raise ValueError(f"expected no repeated entries; got {shown(values)}")
    return values


def distinct(item, convert=None):
    """A non-empty list of distinct `item` values; `convert` maps each entry first."""
    before = BeforeValidator(lambda v: [convert(e) for e in v] if isinstance(v, list) else v)
    return Annotated[
        list[item], *([before] if convert else []), Field(min_length=1), AfterValidator(_no_repeats)
    ]


#: a non-empty list of distinct C values > 0 (a cross-validation grid)
C_GRID = distinct(real(gt=0))


def names(known, every=False):
    """A name of `known` or a non-empty list of them (`all`: every one, if `every`), no repeats."""

    def listed(value):
        if every and value == "all":
            return list(known)
        return [value] if isinstance(value, str) else value

    return Annotated[
        list[Literal[tuple(known)]],
        BeforeValidator(listed),
        Field(min_length=1),
        AfterValidator(lambda v: list(dict.fromkeys(v))),
    ]


def per_key(item, keys, defaults, cast=None):
    """One `item` per key of `keys`: one value for all, or a mapping of some (the rest from
    `defaults`), each passed through `cast`."""
    cast = cast or (lambda v: v)

    def resolve(value):
        if not isinstance(value, dict):
            return {k: cast(copy.deepcopy(value)) for k in keys}
        return {**copy.deepcopy(defaults), **{k: cast(v) for k, v in value.items()}}

    return Annotated[item | dict[Literal[tuple(keys)], item], AfterValidator(resolve)]


def custom(check, expected):
    """A value checked by `check` (returning it; TypeError/ValueError: expected `expected`)."""

    def validate(value):
        try:
            return check(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected {expected}") from None

    return Annotated[Any, PlainValidator(validate, json_schema_input_type=Any)]


def split_paths(what, synthetic=False):
    """{trainval: PATH, test: PATH}, each a non-empty `what` (or 'synthetic', if allowed)."""

    def check(value):
        if synthetic and value == "synthetic":
            return value
        if (
            not isinstance(value, dict)
            or set(value) != {"trainval", "test"}
            or not all(isinstance(v, str) and v for v in value.values())
        ):
            raise ValueError(value)
        return {"trainval": value["trainval"], "test": value["test"]}

    either = "'synthetic' or " if synthetic else ""
    return custom(check, f"{either}a mapping {{trainval: PATH, test: PATH}}, each {what}")


def presets(builtin, keys, leaves, expected):
    """Named presets: `builtin` with the config's laid over them; per preset and vary of `keys`,
    exactly the keys `keys[vary]`, each checked by `leaves[key]` (default: an integer >= 1)."""

    def check(value):
        if not isinstance(value, dict):
            raise ValueError(f"expected {expected}")
        out = merge(builtin, value)
        for name, preset in out.items():
            for vary, spec in preset.items() if isinstance(preset, dict) else [(None, None)]:
                where = f"{name}.{vary}" if vary else str(name)
                if vary not in keys or not isinstance(spec, dict) or set(spec) != set(keys[vary]):
                    raise ValueError(f"expected {expected}; got {where}: {shown(spec)}")
                for k, entry in spec.items():
                    leaf = TypeAdapter(leaves.get(k, conint(ge=1)), config=STRICT)
                    try:
                        spec[k] = leaf.validate_python(entry)
                    except ValidationError as err:
                        given = f"{where}.{k}: {shown(entry)} ({_message(err.errors()[0])})"
                        raise ValueError(f"expected {expected}; got {given}") from None
        return out

    return Annotated[Any, PlainValidator(check, json_schema_input_type=Any)]


def key(default, help, name=None):
    """A declared key: its default (a Section: its defaults), help, and config name if no Python
    name."""
    if isinstance(default, type) and issubclass(default, BaseModel):
        return Field(default_factory=default, description=help, alias=name)
    if isinstance(default, (list, dict)):
        return Field(default_factory=lambda: copy.deepcopy(default), description=help, alias=name)
    return Field(default, description=help, alias=name)


def with_defaults(section, **values):
    """`section` with other defaults for the leaf keys `values`."""
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
    """`config` checked against `model`: the resolved plain dict, or a one-line ValueError."""
    if not isinstance(config, dict):
        raise ValueError(f"config must be a mapping of keys; got {shown(config)}")
    _check_integers(config, [])
    try:
        return model.model_validate(config).model_dump(by_alias=True, warnings=False)
    except ValidationError as err:
        raise ValueError(error_line(model, err.errors())) from None


def _check_integers(value, path):
    """Refuse an integer beyond 64 bits anywhere in `value` (YAML's have no bound; numpy and
    `float()` overflow on them), naming its key path."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_integers(v, [*path, str(k)])
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_integers(v, [*path, str(i)])
    elif isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        raise ValueError(
            f"{'.'.join(path) or 'config'}: expected an integer of at most 64 bits; got "
            f"{shown(value)}"
        )


def _path(error):
    """An error's key path, without the tags pydantic gives the members of a union."""
    return [str(p) for p in error["loc"] if not (isinstance(p, str) and _TAG.fullmatch(p))]


_TAG = re.compile(r".*\[.*|(constrained-)?(int|float|str|bool|list|dict)")


#: pydantic's error types, as what was expected (filled in from the error's context)
_WORDS = {
    "bool_type": "true or false",
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "list_type": "a list",
    "dict_type": "a mapping",
    "greater_than": "a value > {gt}",
    "greater_than_equal": "a value >= {ge}",
    "less_than": "a value < {lt}",
    "less_than_equal": "a value <= {le}",
    "too_short": "a list of {min_length} or more",
    "too_long": "a list of {max_length} or fewer",
}


def _number(value):
    return f"{value:g}" if isinstance(value, float) else value


def _message(error):
    """What an error expected, in a few words ("an integer", "one of a, b")."""
    ctx = error.get("ctx", {})
    if "error" in ctx:
        return str(ctx["error"]).removeprefix("expected ")
    if error["type"] == "literal_error" and " or " in ctx["expected"]:
        return "one of " + ctx["expected"].replace("'", "").replace(" or ", ", ")
    if error["type"] in _WORDS:  # a bound of 0 as written, not 0.0
        return _WORDS[error["type"]].format(**{k: _number(v) for k, v in ctx.items()})
    return error["msg"].removeprefix("Input should be ")


def error_line(model, errors):
    """pydantic's errors as one line: the deepest key path's expectations joined by "or"."""
    errors = [e for e in errors if len(_path(e)) == max(len(_path(e)) for e in errors)]
    loc = _path(errors[0])
    path = ".".join(loc)
    kind = errors[0]["type"]
    given = shown(errors[0]["input"])
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        allowed = ", ".join(keys(parent)) if parent else ""
        where = f" in {shown('.'.join(loc[:-1]))}" if len(loc) > 1 else ""
        return f"unknown config key {shown(path)}; allowed keys{where}: {allowed}"
    if kind in ("model_type", "model_attributes_type") and not errors[1:]:
        return f"{path}: expected a mapping of keys; got {given}"
    if kind == "value_error" and not str(errors[0]["ctx"]["error"]).startswith("expected "):
        message = str(errors[0]["ctx"]["error"])  # a check across keys: its own words
        return f"{path}: {message}" if path else message
    expected = dict.fromkeys(_message(e) for e in errors if _path(e) == loc)
    line = f"{path}: expected {' or '.join(expected)}"
    return line if "; got " in line else f"{line}; got {given}"


def _model_at(model, loc):
    """The model class of the section at key path `loc` (None when it is no section)."""
    for part in loc:
        field = keys(model).get(part)
        model = field.annotation if field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
    return model


def help_lines(model, defaults=None, indent=""):
    """The keys of `model` with their defaults (or the resolved `defaults`) and help, as YAML a
    config could start from."""
    if defaults is None:  # unvalidated: the defaults as declared, whatever is installed
        defaults = model.model_construct().model_dump(by_alias=True, warnings=False)
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
    """`--set key.path=value` items as a nested mapping, each value read as YAML (`C.ap=10` a
    number, `methods=[ap, 0-1]` a list)."""
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
