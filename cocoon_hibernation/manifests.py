"""Reading Kubernetes manifests as kubectl does: YAML or JSON, `---` documents, `kind: List`
flattened, timestamps kept as strings; any failure is a one-line :class:`ManifestError`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml


class ManifestError(Exception):
    """The input cannot be read or parsed; the message is one line."""


class _Loader(yaml.SafeLoader):
    pass


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_text(source: str) -> str:
    """The text of a file, or of stdin for `-`."""
    try:
        if source == "-":
            return sys.stdin.read()
        return Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError("no such file") from None
    except IsADirectoryError:
        raise ManifestError("is a directory") from None
    except UnicodeDecodeError as e:
        raise ManifestError(f"not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise ManifestError(e.strerror or str(e)) from None


def parse_documents(text: str, *, json_only: bool = False) -> list[Any]:
    """Every document in `text` (empty documents dropped), parsed as YAML or JSON."""
    if json_only:
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as e:
            why = f"invalid JSON: line {e.lineno}, column {e.colno}: {e.msg}"
            raise ManifestError(why) from None
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ManifestError(f"invalid YAML: {where}{e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ManifestError(f"invalid YAML: {' '.join(str(e).split())}") from None


def objects(documents: list[Any]) -> Iterator[Any]:
    """The objects in parsed documents, with `kind: List` (and `*List`) flattened."""
    for doc in documents:
        items = doc.get("items") if isinstance(doc, dict) else None
        if isinstance(items, list) and str(doc.get("kind", "")).endswith("List"):
            yield from objects(items)
        else:
            yield doc
