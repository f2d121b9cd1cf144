"""Static reading of the Terraform in `terraform/` (no terraform binary).

python-hcl2 parses each file; this module flattens the result into lookups by
address and resolves the few `local.*` references the tests need. Strings keep
Terraform's own spelling: literals come back bare (`google`), expressions as
`${...}`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2

from tests.conftest import REPO_ROOT

TF_ROOT = REPO_ROOT / "terraform"
MODULE_DIR = TF_ROOT / "modules" / "cocoon-hibernation"
EXAMPLE_DIR = TF_ROOT / "examples" / "gke"


def parse_file(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        # python-hcl2 8.x must be asked for the shape the tests read: bare
        # literals and `${...}` expressions, blocks as plain dicts, no comments.
        shape = hcl2.SerializationOptions(
            with_comments=False, explicit_blocks=False, strip_string_quotes=True
        )
        result: dict[str, Any] = hcl2.load(fh, serialization_options=shape)
        return result


def _unquote(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == '"' else key


@dataclass
class TfDir:
    """One Terraform root or module directory, merged across its files."""

    path: Path
    resources: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    data: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    terraform: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, rtype: str) -> dict[str, dict[str, Any]]:
        return {name: body for (t, name), body in self.resources.items() if t == rtype}

    def resource(self, rtype: str, name: str) -> dict[str, Any]:
        return self.resources[(rtype, name)]


def load_dir(path: Path) -> TfDir:
    out = TfDir(path=path)
    for tf in sorted(path.glob("*.tf")):
        doc = parse_file(tf)
        for group in doc.get("resource", []):
            for rtype, named in group.items():
                for name, body in named.items():
                    out.resources[(_unquote(rtype), _unquote(name))] = body
        for group in doc.get("data", []):
            for dtype, named in group.items():
                for name, body in named.items():
                    out.data[(_unquote(dtype), _unquote(name))] = body
        for group in doc.get("variable", []):
            for name, body in group.items():
                out.variables[_unquote(name)] = body
        for group in doc.get("output", []):
            for name, body in group.items():
                out.outputs[_unquote(name)] = body
        for group in doc.get("locals", []):
            out.locals.update(group)
        for group in doc.get("module", []):
            for name, body in group.items():
                out.modules[_unquote(name)] = body
        out.terraform.extend(doc.get("terraform", []))
    return out


def walk(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (path, scalar) pair under a parsed document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, (*path, str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, (*path, str(i)))
    else:
        yield path, node


def blocks(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Nested blocks `name { ... }`, static or the content of `dynamic "name"`."""
    found = [b for b in body.get(name, []) if isinstance(b, dict)]
    for dyn in body.get("dynamic", []):
        for dyn_name, dyn_body in dyn.items():
            if _unquote(dyn_name) == name:
                found.extend(c for c in dyn_body.get("content", []) if isinstance(c, dict))
    return found


_LOCAL_REF = re.compile(r"local\.([A-Za-z_][A-Za-z0-9_]*)")


def merged_locals(expr: str, tf: TfDir) -> dict[str, Any]:
    """Resolve `${local.a}` or `${merge(local.a, local.b, ...)}` to one dict."""
    inner = expr.strip()
    if not (inner.startswith("${") and inner.endswith("}")):
        raise ValueError(f"not an expression: {expr!r}")
    inner = inner[2:-1].strip()
    names = _LOCAL_REF.findall(inner)
    shape_ok = re.fullmatch(r"local\.\w+", inner) or re.fullmatch(
        r"merge\(\s*local\.\w+(\s*,\s*local\.\w+)*\s*,?\s*\)", inner
    )
    if not names or not shape_ok:
        raise ValueError(f"cannot resolve {expr!r} statically: use local.x or merge(local.x, ...)")
    merged: dict[str, Any] = {}
    for name in names:
        value = tf.locals[name]
        if not isinstance(value, dict):
            raise ValueError(f"local.{name} is not a map")
        merged.update(value)
    return merged


def hcl_regexes(condition: str) -> list[re.Pattern[str]]:
    """The `regex("...")` patterns inside a validation condition, as Python regexes.

    HCL string escapes double the backslashes; RE2 and Python agree on the
    constructs the module uses (anchors, classes, groups, alternation).
    """
    raw = re.findall(r'regex\("((?:[^"\\]|\\.)*)"', condition)
    return [re.compile(r.encode().decode("unicode_escape")) for r in raw]


def norm(expr: str) -> str:
    """An expression without blanks and double quotes, for comparing shapes.

    python-hcl2 7.x drops the quotes of some string literals nested in
    expressions (`toset(["a"])` comes back as `toset([a])`), 8.x keeps them.
    """
    return re.sub(r'[\s"]', "", expr)


def names(expr: Any) -> set[str]:
    """The strings of a list literal, bare or wrapped (`toset([...])`)."""
    if isinstance(expr, list):
        return {str(x) for x in expr}
    match = re.search(r"\[([^\]]*)\]", str(expr))
    assert match, f"no list literal in {expr!r}"
    return {p.strip().strip('"') for p in match.group(1).split(",") if p.strip()}
