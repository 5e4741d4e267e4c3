"""routerd's config file: written here, checked against its one definition first.

The definition is controller/routerd/config.schema.json; routerd's typed reader
(controller/routerd/src/config.rs) is held to the same file by a Rust test. The checker below
knows the part of JSON Schema that file uses (types, required, additionalProperties, enum,
items, $ref into $defs, minimum/maximum, and the formats ipv4, ipv4-prefix and mac), so no
schema library is needed.
"""
from __future__ import annotations

import ipaddress
import json
import re
from functools import lru_cache
from pathlib import Path

from concast import tools

SCHEMA_PATH = Path("controller") / "routerd" / "config.schema.json"

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int}
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


class ConfigError(ValueError):
    """A config that routerd would refuse, named by the key path that is wrong."""


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads((tools.ROOT / SCHEMA_PATH).read_text())


def _format_ok(fmt: str, value: str) -> bool:
    try:
        if fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv4-prefix":
            ipaddress.IPv4Network(value, strict=False)
            return "/" in value
        elif fmt == "mac":
            return bool(_MAC.match(value))
    except ValueError:
        return False
    return True


def _check(value, node: dict, path: str, root: dict) -> None:
    if "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    want = node.get("type")
    if want is not None:
        ok = isinstance(value, _TYPES[want]) and not (want == "integer" and isinstance(value, bool))
        if not ok:
            raise ConfigError(f"{path}: {value!r} is not {want}")
    if "enum" in node and value not in node["enum"]:
        raise ConfigError(f"{path}: {value!r} is not one of {node['enum']}")
    if "minimum" in node and value < node["minimum"]:
        raise ConfigError(f"{path}: {value} is below {node['minimum']}")
    if "maximum" in node and value > node["maximum"]:
        raise ConfigError(f"{path}: {value} is above {node['maximum']}")
    if "format" in node and not _format_ok(node["format"], value):
        raise ConfigError(f"{path}: {value!r} is not a {node['format']}")
    if want == "array":
        for i, item in enumerate(value):
            _check(item, node.get("items", {}), f"{path}[{i}]", root)
    if want == "object":
        props = node.get("properties", {})
        for key in node.get("required", []):
            if key not in value:
                raise ConfigError(f"{path}: no {key!r}")
        for key, item in value.items():
            if key not in props:
                if node.get("additionalProperties", True) is False:
                    raise ConfigError(f"{path}: unknown key {key!r} (not in {SCHEMA_PATH})")
                continue
            _check(item, props[key], f"{path}.{key}", root)


def validate(cfg: dict, name: str = "config") -> None:
    """Raise ConfigError if routerd would refuse `cfg`."""
    root = schema()
    _check(cfg, root, name, root)


def write(path: Path, cfg: dict) -> None:
    """Check `cfg`, then write it where routerd's `--config` reads it. Keys whose value is
    None (an oblivious router has no CPU port) are left out: routerd reads a missing key and
    a null alike, as not given."""
    cfg = {k: v for k, v in cfg.items() if v is not None}
    validate(cfg, path.name)
    path.write_text(json.dumps(cfg, indent=1) + "\n")
