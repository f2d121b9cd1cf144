"""Citations of the repository's own docs cannot rot.

Comments, Terraform, manifests and Markdown cite `docs/<file>.md#<anchor>`; the
Markdown files under `docs/` also link to each other (`other.md#anchor`) and to
their own sections (`#anchor`). Every such anchor must exist in the file it
names: a heading's GitHub anchor (lower-case, spaces -> '-', punctuation
dropped, a `-1`, `-2` suffix for repeats) or an explicit `<a id="…">`.
A renamed heading or a deleted section then fails here, not in a reader's
browser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SUFFIXES = frozenset({".py", ".tf", ".yaml", ".yml", ".md", ".toml", ".hcl"})
SKIP_DIRS = frozenset(
    {
        ".git",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".terraform",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "build",
        "dist",
    }
)

# `docs/<file>.md#<anchor>`, optionally after `./` or `../` (a relative Markdown link).
# The character before `docs/` must not continue a longer path (`mydocs/`, `x/docs/`).
CITATION = re.compile(r"(?<![\w/.-])(?:\.{1,2}/)*docs/([\w.-]+\.md)#([\w-]+)")
# Inside any Markdown file: `](#anchor)`, `](other.md#anchor)` and relative paths such as
# `](../infra/k8s/README.md#anchor)` (one such anchor was broken unnoticed).
DOC_LINK = re.compile(r"\]\((?:\./)?([\w./-]*\.md)?#([\w-]+)\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
EXPLICIT_ID = re.compile(r"""<[a-zA-Z][^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""")
HTML_TAG = re.compile(r"<[^>]+>")
MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's rendered text.

    Markup is rendered away first (HTML tags, link targets, emphasis and code
    marks), then: lower-case, drop every character that is not a letter, a
    digit, a space, '-' or '_', and turn each space into '-'.
    """
    text = HTML_TAG.sub("", heading)
    text = MD_LINK.sub(r"\1", text)
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors_of(markdown: str) -> set[str]:
    """Every anchor a Markdown file offers: heading slugs (deduplicated as GitHub does)
    and explicit ids. Headings inside fenced code blocks are not headings."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fence: str | None = None
    for line in markdown.splitlines():
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark[0] * 3
            elif mark.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        found.update(EXPLICIT_ID.findall(line))
        h = HEADING.match(line)
        if h:
            slug = github_slug(h.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


@dataclass(frozen=True)
class Citation:
    where: str  # file:line of the citation
    doc: str  # path of the cited doc, relative to the root
    anchor: str


def _files(root: Path) -> Iterator[Path]:
    # os.walk, pruned: a virtualenv alone holds tens of thousands of files.
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if path.suffix in SUFFIXES:
                yield path


def citations(root: Path) -> Iterator[Citation]:
    for path in _files(root):
        rel = path.relative_to(root)
        in_docs = path.suffix == ".md"
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), start=1):
            where = f"{rel}:{no}"
            for m in CITATION.finditer(line):
                yield Citation(where, f"docs/{m.group(1)}", m.group(2))
            if in_docs:
                for m in DOC_LINK.finditer(line):
                    target = rel.parent / m.group(1) if m.group(1) else rel
                    yield Citation(where, os.path.normpath(target.as_posix()), m.group(2))


def broken(root: Path) -> list[str]:
    """Every citation whose file or anchor does not exist, as `where: doc#anchor (why)`."""
    cache: dict[str, set[str] | None] = {}
    out: list[str] = []
    for c in citations(root):
        if c.doc not in cache:
            doc = root / c.doc
            cache[c.doc] = anchors_of(doc.read_text(encoding="utf-8")) if doc.is_file() else None
        anchors = cache[c.doc]
        if anchors is None:
            out.append(f"{c.where}: {c.doc}#{c.anchor} (no such file)")
        elif c.anchor not in anchors:
            out.append(f"{c.where}: {c.doc}#{c.anchor} (no such anchor)")
    return out


# Every Markdown link target: `](target)` or `](target "title")`.
LINK_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)


def broken_relative_links(root: Path) -> list[str]:
    """Every relative link in a Markdown file (outside code) whose target file or
    directory does not exist, as `file:line: target`. Anchors are the business of
    `broken()`; here only the path before `#` counts."""
    out: list[str] = []
    for path in _files(root):
        if path.suffix != ".md":
            continue
        rel = path.relative_to(root)
        fence: str | None = None
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            m = FENCE.match(line)
            if m:
                mark = m.group(1)
                if fence is None:
                    fence = mark[0] * 3
                elif mark.startswith(fence):
                    fence = None
                continue
            if fence is not None or line.startswith("    "):
                continue
            for target in LINK_TARGET.findall(re.sub(r"`[^`]*`", "", line)):
                if EXTERNAL.match(target):
                    continue
                file_part = target.split("#", 1)[0]
                if not (path.parent / file_part).exists():
                    out.append(f"{rel}:{no}: {target}")
    return out


# --- the repository ---------------------------------------------------------------


def test_every_relative_link_in_the_markdown_resolves() -> None:
    """README.md, docs/*.md and every other Markdown file of the repository."""
    problems = broken_relative_links(ROOT)
    assert not problems, "relative links to files that do not exist:\n" + "\n".join(problems)


def test_the_readme_links_into_docs() -> None:
    # Vacuity guard: the README is short because it links to docs/; those links exist.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = {t.split("#", 1)[0] for t in LINK_TARGET.findall(readme)}
    assert {"docs/README.md", "docs/deploy.md", "docs/configuration.md"} <= targets


def test_every_cited_docs_anchor_exists() -> None:
    problems = broken(ROOT)
    assert not problems, "citations of missing docs anchors:\n" + "\n".join(problems)


def test_the_design_document_is_cited_by_anchor() -> None:
    # The check above is vacuous without citations; the design document at least
    # links its own sections, so a broken internal link fails too.
    cited = [c for c in citations(ROOT) if c.doc == "docs/design.md"]
    assert len(cited) >= 10


# --- the checker itself (it must be able to fail) ---------------------------------

# Built by concatenation so this file is not itself a citation the scan would read.
_DOCS = "docs" + "/"


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Release and wake (the reconciler)", "release-and-wake-the-reconciler"),
        (
            "The seat economy: reclaim, sleep windows, CPU activity, fair order",
            "the-seat-economy-reclaim-sleep-windows-cpu-activity-fair-order",
        ),
        ("4–6. Flag, delete, settle", "46-flag-delete-settle"),
        ("`ingest` and `/pubsub`", "ingest-and-pubsub"),
        ("A [link](https://example.com) in it", "a-link-in-it"),
        ("snake_case stays", "snake_case-stays"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_anchors_of_headings_ids_repeats_and_fences() -> None:
    md = "\n".join(
        [
            '<a id="explicit"></a>',
            "## Same",
            "## Same",
            "```sh",
            "# not a heading",
            "```",
            '### Heading <a name="also-explicit"></a>',
        ]
    )
    assert anchors_of(md) == {"explicit", "same", "same-1", "heading", "also-explicit"}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_a_missing_anchor_a_missing_file_and_a_broken_internal_link_are_caught(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            "docs/a.md": '# Title\n<a id="kept"></a>\nSee [x](#gone) and [y](b.md#nope).\n',
            "docs/b.md": "## Only\n",
            "pkg/mod.py": f"# fine: {_DOCS}a.md#kept; rotten: {_DOCS}a.md#renamed\n",
            "infra/x.yaml": f"# {_DOCS}missing.md#any\n",
            "main.tf": f"# ../{_DOCS}b.md#only and mydocs/a.md#ignored\n",
        },
    )
    assert broken(root) == [
        f"docs/a.md:3: {_DOCS}a.md#gone (no such anchor)",
        f"docs/a.md:3: {_DOCS}b.md#nope (no such anchor)",
        f"infra/x.yaml:1: {_DOCS}missing.md#any (no such file)",
        f"pkg/mod.py:1: {_DOCS}a.md#renamed (no such anchor)",
    ]


def test_skipped_directories_are_not_scanned(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {"docs/a.md": "# A\n", ".venv/lib/x.py": f"# {_DOCS}a.md#nothing\n"},
    )
    assert broken(root) == []


def test_a_broken_relative_link_is_caught(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "README.md": f"[ok]({_DOCS}a.md) [gone]({_DOCS}gone.md) [web](https://x.org/y.md)\n"
            "[dir](docs) [here](#top) `[in code](nope.md)`\n"
            "```\n[fenced](nope.md)\n```\n",
            "docs/a.md": '[up](../README.md) [no](../infra/none.yaml "t") [mail](mailto:a@b)\n',
        },
    )
    assert broken_relative_links(root) == [
        "README.md:1: docs/gone.md",
        "docs/a.md:1: ../infra/none.yaml",
    ]
