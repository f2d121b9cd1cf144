"""Importing a module of `shared/` loads nothing of a higher layer.

The layers are those of the import-linter `layers` contract in pyproject.toml
(entry points > reconcile > seats > sweep > lifecycle > clients > base), read
from there so the two cannot drift. import-linter checks the imports written
in the code, lazy ones included; this checks what an import *runs*: a module's
package `__init__` counts too (importing `shared.reconcile.ports` once ran
`shared/reconcile/__init__`, and so loaded the whole executor, for a Protocol).

Each module is imported in a child forked from an interpreter that has loaded
no module of this project, so each starts as fresh as a new process, at the
cost of one interpreter start in all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROJECT = ("shared", "functions", "devstack", "cocoon_hibernation")

# Runs in a fresh interpreter: for each module named on stdin, fork, import it in
# the child and print what of this project it loaded.
_CHILD = """
import json, os, sys
# Third-party, loaded once before the forks (only speed: no project module).
for lib in ("pydantic", "pydantic.fields", "pydantic._internal._model_construction", "cronsim"):
    try:
        __import__(lib)
    except ImportError:
        pass
project = tuple(sys.argv[1:])
for name in json.loads(sys.stdin.read()):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            __import__(name)
            out = sorted(m for m in sys.modules if m.split(".")[0] in project)
        except BaseException as err:
            out = {"error": repr(err)}
        with os.fdopen(w, "w") as f:
            json.dump(out, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    print(json.dumps([name, json.loads(data)]))
"""


def _layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    assert len(contracts) == 1, "expected one layers contract in pyproject.toml"
    return [
        [m.strip() for part in layer.split("|") for m in part.split(":")]
        for layer in contracts[0]["layers"]
    ]


def _layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The index of the layer holding `module` (0 = the top), None when unlisted."""
    for i, members in enumerate(layers):
        if any(module == m or module.startswith(m + ".") for m in members):
            return i
    return None


def _shared_modules() -> list[str]:
    out = []
    for path in sorted((ROOT / "shared").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts == ("shared", "__init__"):
            continue  # the empty root package: in every layer's path, in none itself
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_every_shared_module_is_in_a_layer() -> None:
    layers = _layers()
    unlisted = [m for m in _shared_modules() if _layer_of(m, layers) is None]
    assert unlisted == [], f"modules in no layer of the pyproject contract: {unlisted}"


def test_importing_a_shared_module_loads_no_module_of_a_higher_layer() -> None:
    layers = _layers()
    modules = _shared_modules()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *PROJECT],
        input=json.dumps(modules),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    loaded = dict(json.loads(line) for line in proc.stdout.splitlines())
    assert sorted(loaded) == sorted(modules), proc.stderr[-2000:]
    problems: list[str] = []
    for module, seen in loaded.items():
        if isinstance(seen, dict):
            problems.append(f"{module}: import failed: {seen['error']}")
            continue
        own = _layer_of(module, layers)
        assert own is not None
        for other in seen:
            theirs = _layer_of(other, layers)
            if theirs is not None and theirs < own:
                problems.append(f"{module} (layer {own}) loads {other} (layer {theirs})")
    assert problems == [], "\n".join(problems)
