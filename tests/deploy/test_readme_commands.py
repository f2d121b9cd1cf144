"""The README's commands run as written.

Two checks, on what a new user copies out of README.md:

- **The one-machine quick start runs from a fresh clone.** Every fenced ```bash block
  that follows an HTML comment `<!-- runs-in-test -->` is run, as one `bash -e`
  script, in a copy of the repository's files (tracked and untracked-but-not-ignored:
  what a clone of this working tree would hold; no `.venv`, no `dist/`), with a fresh
  virtualenv and the repository's own environment kept out (`VIRTUAL_ENV` unset).
  Then what those commands promise is checked: the version printed is pyproject's,
  the examples validate, the wheel is in `dist/`.
  `make demo` and `make test` are deliberately not among them: the demo is driven by
  `tests/e2e/test_demo.py`, and `make test` is this suite itself.
- **Every `make …` and `cocoon-hibernation …` command in README.md parses**: the
  Makefile has the target; for the command line, `<subcommand> --help` exits 0 and
  click accepts the words as written (an unknown option, a missing option value or
  an unknown subcommand fails; a file argument that only exists on the user's
  machine, such as their `terraform.tfvars`, is fine). That covers code blocks,
  indented blocks and inline code spans alike.
- The other quick starts (Terraform, self-hosted) need a cloud or a cluster; their
  lines must be the same commands the deploy guide and `infra/k8s/README.md` give,
  so the short version cannot drift from the tested long one.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import click
import pytest

from cocoon_hibernation.main import main as cli
from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
MARK = "<!-- runs-in-test -->"
FENCE_OPEN = re.compile(r"^```(\w*)\s*$")
SHELL_OPS = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "(", ")"})
PROG = "cocoon-hibernation"


# --- reading the README ---------------------------------------------------------------


def fenced_blocks(markdown: str) -> list[tuple[str, bool, str]]:
    """(language, marked runs-in-test, body) of every fenced block, in order."""
    blocks: list[tuple[str, bool, str]] = []
    lines = markdown.splitlines()
    i = 0
    last_text = ""  # the last non-blank line outside a block
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if m is None:
            if lines[i].strip():
                last_text = lines[i].strip()
            i += 1
            continue
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        blocks.append((m.group(1), last_text == MARK, "\n".join(body) + "\n"))
        last_text = ""
        i += 1
    return blocks


def shell_lines(script: str) -> list[str]:
    """The logical lines of a shell script: `\\`-continuations joined, blanks dropped."""
    return [ln.strip() for ln in script.replace("\\\n", " ").splitlines() if ln.strip()]


def command_candidates(markdown: str) -> list[str]:
    """Shell text that may hold commands: every line of a fenced or 4-space indented
    block, and every inline code span."""
    out: list[str] = []
    in_fence = False
    continued = False  # the previous block line ended in `\`
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or line.startswith("    "):
            text = line.strip()
            if continued:
                out[-1] = out[-1][:-1] + " " + text
            else:
                out.append(text)
            continued = text.endswith("\\")
        else:
            continued = False
            out.extend(re.findall(r"`([^`]+)`", line))
    return out


def commands(text: str) -> list[list[str]]:
    """Each simple command in `text` (split at pipes, `&&`, `;` and redirections),
    as words; unparseable shell text yields nothing."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return []
    out: list[list[str]] = [[]]
    redirect = False
    for word in words:
        if word in SHELL_OPS or set(word) <= set(";&|<>()"):
            redirect = word in {">", ">>", "<", "2>"}
            out.append([])
            continue
        if redirect:  # the file a redirection names is not an argument
            redirect = False
            continue
        out[-1].append(word)
    return [c for c in out if c]


def cli_words(command: list[str]) -> list[str] | None:
    """The words after `cocoon-hibernation` for `uv run cocoon-hibernation …` or
    `cocoon-hibernation …`; None for any other command."""
    if command[:3] == ["uv", "run", PROG]:
        return command[3:]
    if command[:1] == [PROG]:
        return command[1:]
    return None


def readme_cli_commands(markdown: str) -> list[list[str]]:
    found = []
    for text in command_candidates(markdown):
        for command in commands(text):
            words = cli_words(command)
            if words is not None:
                found.append(words)
    return found


def readme_make_targets(markdown: str) -> set[str]:
    return {
        command[1]
        for text in command_candidates(markdown)
        for command in commands(text)
        if command[0] == "make" and len(command) > 1
    }


# --- parsing a command line as the CLI would -----------------------------------------


def parse(words: list[str], cwd: Path) -> click.Context:
    """Parse `words` as `cocoon-hibernation` would, down to the leaf command, without
    running it. Raises click.UsageError for what the CLI would refuse as usage."""
    expanded: list[str] = []
    for word in words:  # the shell expands globs before the CLI sees them
        matches = sorted(glob.glob(word, root_dir=cwd)) if "*" in word else []
        expanded.extend(matches or [word])
    cmd: click.Command = cli
    name, parent, rest = PROG, None, expanded
    while True:
        try:
            ctx = cmd.make_context(name, list(rest), parent=parent)
        except click.exceptions.Exit:  # --version, --help: handled, exit 0
            return click.Context(cmd, info_name=name, parent=parent)
        except click.BadParameter as err:
            # A path that only exists on the user's machine (their terraform.tfvars).
            if "does not exist" in err.format_message():
                return click.Context(cmd, info_name=name, parent=parent)
            raise
        if not isinstance(cmd, click.Group):
            return ctx
        with warnings.catch_warnings():  # click 8.2 keeps the subcommand apart
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*getattr(ctx, "protected_args", ()), *ctx.args]
        if not rest:
            return ctx
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            raise click.UsageError(f"no such command {rest[0]!r}", ctx)
        cmd, name, parent, rest = sub, rest[0], ctx, rest[1:]


def subcommand_path(words: list[str]) -> list[str]:
    """The subcommand names at the start of `words` (`devstack up` -> both)."""
    path: list[str] = []
    group: click.Command = cli
    ctx = click.Context(cli, info_name=PROG)
    for word in words:
        if word.startswith("-") or not isinstance(group, click.Group):
            break
        sub = group.get_command(ctx, word)
        if sub is None:
            break
        path.append(word)
        group = sub
    return path


# --- the checks on the helpers themselves (they must be able to fail) ---------------


def test_the_extraction_finds_marked_blocks_commands_and_spans() -> None:
    md = "\n".join(
        [
            "Run `uv run cocoon-hibernation status -n agents` or `make demo`.",
            MARK,
            "```bash",
            "uv run cocoon-hibernation crd | kubectl apply -f -   # install it",
            "make check && make \\",
            "  test",
            "```",
            "```bash",
            "cocoon-hibernation validate x.yaml > out.txt",
            "```",
            "    cocoon-hibernation devstack up        # indented block",
        ]
    )
    blocks = fenced_blocks(md)
    assert [(lang, marked) for lang, marked, _ in blocks] == [("bash", True), ("bash", False)]
    assert shell_lines(blocks[0][2])[1] == "make check && make    test"
    assert readme_cli_commands(md) == [
        ["status", "-n", "agents"],
        ["crd"],
        ["validate", "x.yaml"],
        ["devstack", "up"],
    ]
    assert readme_make_targets(md) == {"demo", "check", "test"}


@pytest.mark.parametrize(
    "words",
    [["status", "--no-such-flag"], ["devstack", "no-such-command"], ["wake", "x", "--wait"]],
)
def test_parse_refuses_what_the_cli_refuses(words: list[str]) -> None:
    with pytest.raises(click.UsageError):
        parse(words, REPO_ROOT)


def test_parse_accepts_a_user_file_and_globs() -> None:
    assert parse(["deploy-check", "--var-file", "their.tfvars"], REPO_ROOT) is not None
    ctx = parse(["validate", "examples/valid/*.yaml"], REPO_ROOT)
    assert ctx.params["files"] and all("*" not in str(f) for f in ctx.params["files"])


# --- the README -----------------------------------------------------------------------


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_readme_marks_a_one_machine_quick_start() -> None:
    marked = [body for lang, marked, body in fenced_blocks(_readme()) if marked]
    assert marked, f"no ```bash block follows {MARK} in README.md"
    assert all(lang == "bash" for lang, m, _ in fenced_blocks(_readme()) if m)
    lines = [ln for body in marked for ln in shell_lines(body)]
    # --all-extras, as `make` syncs: a bare `uv sync` would uninstall the local extra that
    # `make demo` installed, and the next `demo --keep` would fail.
    assert "uv sync --frozen --all-extras" in lines
    # make demo / make test are covered elsewhere (see the module docstring).
    assert not any(ln.startswith("make ") for ln in lines)


def test_every_make_target_in_the_readme_exists() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    defined = set(re.findall(r"^([A-Za-z][\w-]*):", makefile, flags=re.MULTILINE))
    targets = readme_make_targets(_readme())
    assert {"demo", "test", "check"} <= targets
    assert not targets - defined, (
        f"README names make targets the Makefile lacks: {targets - defined}"
    )


def test_every_cli_command_in_the_readme_parses() -> None:
    found = readme_cli_commands(_readme())
    assert len(found) >= 5
    problems = []
    for words in found:
        try:
            parse(words, REPO_ROOT)
        except click.UsageError as err:
            problems.append(f"cocoon-hibernation {shlex.join(words)}: {err.format_message()}")
    assert not problems, "\n".join(problems)


def test_every_cli_subcommand_in_the_readme_has_working_help() -> None:
    paths = {tuple(subcommand_path(words)) for words in readme_cli_commands(_readme())}
    paths.discard(())
    assert paths
    for path in sorted(paths):
        run = subprocess.run(
            [sys.executable, "-m", "cocoon_hibernation", *path, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO_ROOT,
            check=False,
        )
        assert run.returncode == 0, f"{' '.join(path)} --help: {run.stderr}"
        assert "Usage:" in run.stdout


def test_the_cloud_quick_starts_are_the_deploy_guides_commands() -> None:
    """README's Terraform and self-hosted blocks repeat docs/deploy.md and
    infra/k8s/README.md line for line, so the short version stays the tested one."""
    text = _readme()
    start = text.index("## Quick start")
    quick = text[start : text.index("\n## ", start + 1)]
    guides = "\n".join(
        (REPO_ROOT / p).read_text(encoding="utf-8")
        for p in ("docs/deploy.md", "infra/k8s/README.md")
    )
    guide_lines = {ln.strip() for ln in guides.splitlines()}
    unmarked = [body for _, marked, body in fenced_blocks(quick) if not marked]
    assert len(unmarked) >= 2
    missing = [
        ln
        for body in unmarked
        for ln in body.splitlines()
        if ln.strip() and ln.strip() not in guide_lines
    ]
    assert not missing, f"README quick-start lines not in the deploy guides: {missing}"


# --- running the one-machine quick start from a fresh copy ------------------------------


def _fresh_clone(dest: Path) -> Path:
    """The files a clone of this working tree holds (committed or not, never ignored)."""
    listed = subprocess.run(
        [
            "git",
            "-C",
            str(REPO_ROOT),
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO_ROOT / rel
        if not src.is_file():  # deleted in the working tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest


@pytest.mark.needs_tool("uv")
@pytest.mark.timeout(900)
def test_the_one_machine_quick_start_runs_from_a_fresh_clone(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: the files a clone holds cannot be listed")
    clone = _fresh_clone(tmp_path / "clone")
    assert not (clone / ".venv").exists()
    env = {
        k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"}
    }
    env["UV_LINK_MODE"] = "copy"
    outputs = []
    for _, marked, body in fenced_blocks(_readme()):
        if not marked:
            continue
        run = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-x", "-c", body],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
        assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
        outputs.append(run.stdout + run.stderr)  # validate reports its count on stderr
    out = "\n".join(outputs)
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"{PROG} {version}" in out
    assert re.search(r"checked \d+ CocoonSets", out)
    assert (clone / ".venv").is_dir()
    wheels = list((clone / "dist").glob(f"cocoon_hibernation-{version}-*.whl"))
    assert len(wheels) == 1, sorted(p.name for p in (clone / "dist").glob("*"))
