"""The pinned A2UI v0.9 schemas (tests/a2ui_schemas/) as jsonschema validators, offline."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parent / "a2ui_schemas" / "v0_9"
BASE = "https://a2ui.org/specification/v0_9/"


@lru_cache(maxsize=None)
def _registry() -> Registry:
    docs = {name: json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
            for name in ("server_to_client.json", "server_to_client_list.json", "common_types.json",
                         "basic_catalog.json")}
    resources = [(doc["$id"], Resource.from_contents(doc)) for doc in docs.values()]
    # server_to_client.json names the catalog in use as the relative "catalog.json": the basic one here.
    resources.append((BASE + "catalog.json", Resource.from_contents(docs["basic_catalog.json"])))
    return Registry().with_resources(resources)


def validator(name: str = "server_to_client.json") -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return Draft202012Validator(schema, registry=_registry())


def problems(message: dict, name: str = "server_to_client.json") -> list[str]:
    """Every way a message fails its schema, as readable lines (empty when it is valid)."""
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in validator(name).iter_errors(message)]
