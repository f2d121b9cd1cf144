"""A missing tool: a visible skip on a developer's machine, a failure under CI=true."""

from __future__ import annotations

import pytest

from tests.fixtures.tools import Tool, require_tool

ABSENT_CI_TOOL = Tool("no-such-tool", lambda: None, "apt-get install no-such-tool", True)
ABSENT_OPTIONAL = Tool("no-such-optional", lambda: None, "not in CI", False)
PRESENT = Tool("present", lambda: "/usr/bin/present", "-", True)


@pytest.mark.parametrize("ci", ["", "false", "0"])
def test_outside_ci_a_missing_tool_skips_with_its_install_hint(
    monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="apt-get install no-such-tool"):
        require_tool(ABSENT_CI_TOOL)


@pytest.mark.parametrize("ci", ["true", "TRUE", "1", "yes"])
def test_in_ci_a_missing_tool_that_ci_installs_fails(
    monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="no-such-tool is not installed"):
        require_tool(ABSENT_CI_TOOL)


def test_in_ci_a_tool_ci_does_not_install_still_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.skip.Exception):
        require_tool(ABSENT_OPTIONAL)


def test_a_present_tool_lets_the_test_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    require_tool(PRESENT)  # neither skips nor fails


def test_make_test_prints_skip_reasons() -> None:
    from tests.conftest import REPO_ROOT

    recipe = (REPO_ROOT / "Makefile").read_text(encoding="utf-8").split("\ntest:", 1)[1]
    pytest_line = next(line for line in recipe.splitlines() if "pytest" in line)
    assert "-rs" in pytest_line.split()
