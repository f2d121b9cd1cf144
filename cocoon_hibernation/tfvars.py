"""Read a Terraform variables file: `*.tfvars` (HCL literals) or `*.tfvars.json`.

A tfvars file holds only literal values, so this reads exactly that subset of
HCL: `name = value` where a value is a string ("..." with HCL's escapes, or a
heredoc), a number, true/false/null, a list `[...]` or an object `{...}` whose
keys are identifiers or strings and whose items are separated by newlines or
commas; `#`, `//` and `/* */` comments. An expression (a reference, a
function call, an interpolation) is refused with its line: a tfvars file
cannot hold one either.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


class TfvarsError(ValueError):
    """The file is not a tfvars file this reader (or Terraform) accepts."""


class _Reader:
    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name
        self.pos = 0

    # --- lexical -----------------------------------------------------------------

    def error(self, message: str) -> TfvarsError:
        line = self.text.count("\n", 0, self.pos) + 1
        return TfvarsError(f"{self.name}:{line}: {message}")

    def skip(self, *, newlines: bool = True) -> None:
        """Skip blanks and comments (and newlines, unless they separate items)."""
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.pos += 1
            elif ch == "#" or self.text.startswith("//", self.pos):
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end == -1 else end
            elif self.text.startswith("/*", self.pos):
                end = self.text.find("*/", self.pos + 2)
                if end == -1:
                    raise self.error("unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        self.skip()
        if self.peek() != ch:
            raise self.error(f"expected {ch!r}, found {self.peek() or 'end of file'!r}")
        self.pos += 1

    # --- values --------------------------------------------------------------------

    def value(self) -> Any:
        self.skip()
        ch = self.peek()
        if ch == '"':
            return self.string()
        if ch == "[":
            return self.list_()
        if ch == "{":
            return self.object_()
        if self.text.startswith("<<", self.pos):
            return self.heredoc()
        number = _NUMBER.match(self.text, self.pos)
        if number:
            self.pos = number.end()
            raw = number.group(0)
            return float(raw) if any(c in raw for c in ".eE") else int(raw)
        ident = _IDENT.match(self.text, self.pos)
        if ident:
            word = ident.group(0)
            literal = {"true": True, "false": False, "null": None}
            if word in literal:
                self.pos = ident.end()
                return literal[word]
            raise self.error(f"{word!r} is an expression; a tfvars file holds literal values only")
        raise self.error(f"unexpected {ch or 'end of file'!r}")

    def string(self) -> str:
        self.pos += 1
        out: list[str] = []
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                raise self.error("unterminated string")
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                nxt = self.text[self.pos + 1 : self.pos + 2]
                if nxt in _ESCAPES:
                    out.append(_ESCAPES[nxt])
                    self.pos += 2
                    continue
                if nxt == "u":
                    out.append(chr(int(self.text[self.pos + 2 : self.pos + 6], 16)))
                    self.pos += 6
                    continue
                raise self.error(f"unknown escape \\{nxt}")
            if self.text.startswith(("${", "%{"), self.pos):
                raise self.error("a template (${...}) is an expression, not a literal")
            if self.text.startswith(("$${", "%%{"), self.pos):
                out.append(ch + "{")
                self.pos += 3
                continue
            out.append(ch)
            self.pos += 1

    def heredoc(self) -> str:
        match = re.compile(r"<<(-?)([A-Za-z_][A-Za-z0-9_]*)[ \t]*\n").match(self.text, self.pos)
        if not match:
            raise self.error("malformed heredoc")
        indent, marker = match.group(1) == "-", match.group(2)
        end = re.compile(rf"^[ \t]*{re.escape(marker)}[ \t]*$", re.MULTILINE)
        close = end.search(self.text, match.end())
        if not close:
            raise self.error(f"heredoc {marker} is not closed")
        body = self.text[match.end() : close.start()]
        self.pos = close.end()
        if "${" in body.replace("$${", ""):
            raise self.error("a template (${...}) is an expression, not a literal")
        lines = body.split("\n")[:-1] if body.endswith("\n") else body.split("\n")
        if indent:
            widths = [len(x) - len(x.lstrip(" \t")) for x in lines if x.strip()]
            cut = min(widths, default=0)
            lines = [x[cut:] for x in lines]
        return "\n".join(lines) + "\n"

    def list_(self) -> list[Any]:
        self.pos += 1
        items: list[Any] = []
        while True:
            self.skip()
            if self.peek() == "]":
                self.pos += 1
                return items
            items.append(self.value())
            self.skip()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                raise self.error("expected ',' or ']' in a list")

    def key(self) -> str:
        self.skip()
        if self.peek() == '"':
            return self.string()
        ident = _IDENT.match(self.text, self.pos)
        if not ident:
            raise self.error(f"expected a name, found {self.peek() or 'end of file'!r}")
        self.pos = ident.end()
        return ident.group(0)

    def object_(self) -> dict[str, Any]:
        self.pos += 1
        out: dict[str, Any] = {}
        while True:
            self.skip()
            if self.peek() == "}":
                self.pos += 1
                return out
            name = self.key()
            self.skip()
            if self.peek() not in ("=", ":"):
                raise self.error(f"expected '=' or ':' after {name!r}")
            self.pos += 1
            out[name] = self.value()
            self.skip(newlines=False)
            if self.peek() in (",", "\n"):
                self.pos += 1

    def document(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while True:
            self.skip()
            if self.pos >= len(self.text):
                return out
            name = self.key()
            if name in out:
                raise self.error(f"{name} is set twice")
            self.expect("=")
            out[name] = self.value()
            self.skip(newlines=False)
            if self.peek() not in ("\n", ""):
                raise self.error(f"expected a new line after {name}")


def parse_tfvars(text: str, name: str = "<tfvars>") -> dict[str, Any]:
    return _Reader(text, name).document()


def read_tfvars(path: Path) -> dict[str, Any]:
    """The variables a file sets; TfvarsError (with file:line) when it is not a tfvars file."""
    text = path.read_text(encoding="utf-8")
    if path.name.endswith(".json"):
        try:
            data = json.loads(text)
        except ValueError as err:
            raise TfvarsError(f"{path}: invalid JSON: {err}") from err
        if not isinstance(data, dict):
            raise TfvarsError(f"{path}: a .tfvars.json file holds one JSON object")
        return data
    return parse_tfvars(text, str(path))
