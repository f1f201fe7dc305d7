"""Reading a YAML config safely: a regular UTF-8 file of at most `CONFIG_BYTES`, no anchors or
aliases (alias bombs), nesting at most `MAX_DEPTH`, no repeated keys or subnormal numbers,
``1e-5`` a float; every fault one line."""

import math
import re

import yaml

from qs.data.files import Unreadable, read_bytes

__all__ = ["CONFIG_BYTES", "MAX_DEPTH", "parse_yaml", "read_config"]

CONFIG_BYTES = 2**20  # configs are a few hundred bytes; a megabyte is not a config
MAX_DEPTH = 32  # mappings and lists in lists; the deepest built-in config nests 4
_TINY = 2.2250738585072014e-308  # the smallest normal float64


def read_config(path):
    """The YAML value (None for an empty file) of the config file ``path``; an OSError says why it
    cannot be read, a ValueError what is wrong in it."""
    try:
        raw = read_bytes(path, "the config", CONFIG_BYTES)
    except Unreadable as err:
        raise OSError(err.reason) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ValueError(
            f"line {line}: byte 0x{raw[err.start]:02x} is not UTF-8 text; save the config as UTF-8"
        ) from None
    return parse_yaml(text, "the config")


def parse_yaml(text, name="the value"):
    """The YAML value of ``text`` by `read_config`'s rules; ``name`` stands for it in messages."""
    try:
        loader = _ConfigLoader(text)
    except yaml.YAMLError as err:  # its reader refuses a control character at once
        message = " ".join(str(err).split()).replace('"<unicode string>"', name)
        raise ValueError(message) from None
    loader.name = name  # instead of "<unicode string>"
    try:
        return loader.get_single_data()
    except yaml.YAMLError as err:
        raise ValueError(" ".join(str(err).split())) from None
    finally:
        loader.dispose()


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader without anchors and aliases, with bounded nesting, unique keys, decimal
    exponents as floats and subnormal numbers refused."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _error(
                event,
                "anchors and aliases (&name, *name) are not allowed in a "
                "config; write the value out",
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _error(event, f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: yaml's own message says so
                break
            if first is not key_node:
                raise _error(
                    key_node,
                    f"key {_brief(key)} is repeated (first on line "
                    f"{first.start_mark.line + 1}); give each key once",
                )
            items = value_node.value if isinstance(value_node, yaml.SequenceNode) else ()
            for item in (value_node, *items):
                if self._subnormal(item):
                    what = _brief(key, quote=False)
                    raise _too_small(item, what if item is value_node else f"an entry of {what}")
        return super().construct_mapping(node, deep)

    def construct_yaml_float(self, node):
        if self._subnormal(node):  # one the mappings did not catch (in nested lists)
            raise _too_small(node)
        return super().construct_yaml_float(node)

    def _subnormal(self, node):
        if not (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:float"):
            return False
        value = super().construct_yaml_float(node)
        return value != 0 and math.isfinite(value) and abs(value) < _TINY


_ConfigLoader.add_constructor("tag:yaml.org,2002:float", _ConfigLoader.construct_yaml_float)
# YAML 1.1 wants a dot and a signed exponent (1.0e+5); a config writes 1e-5 and 1.0e308
_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _error(where, problem):
    """A MarkedYAMLError at the event or node ``where``: its line is in the message."""
    return yaml.MarkedYAMLError(problem=f"line {where.start_mark.line + 1}: {problem}")


def _too_small(node, what=None):
    """The error of a subnormal number at `node` (`what`: the key it is the value of)."""
    value = f"{node.value} is" if what is None else f"{what} is {node.value},"
    problem = f"{value} below the smallest normal float ({_TINY:.4g})"
    return _error(node, f"{problem}; no setting takes a value that small")


def _brief(value, limit=40, quote=True):
    """``value`` for a message, cut short: a config's message never prints a whole value."""
    text = repr(value) if quote or not isinstance(value, str) else value
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


#: the longest given value an error message quotes
SHOWN = 60


def shown(value):
    """`value` as a config writes it, cut to SHOWN characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
