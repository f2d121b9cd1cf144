"""The `local` extra's missing-dependency error says how to install it from what exists.

The project is on no package index: `pip install 'cocoon-hibernation[local]'` (what
the old main said) fails for every user, and the wheel leaves the local stack out:
the hint names the clone's command.
"""

from __future__ import annotations

import pytest

from devstack import extra


def test_the_hint_installs_from_a_clone(monkeypatch: pytest.MonkeyPatch) -> None:
    # A module no environment has stands for the missing cel-python (the real one is
    # installed here, and uninstalling it mid-session would break the other tests).
    monkeypatch.setattr(extra, "_MODULES", {"no_such_module_cocoon": "cel-python"})
    with pytest.raises(extra.LocalExtraMissing) as info:
        extra.require_local_extra()
    message = str(info.value)
    assert "cel-python is missing" in message
    assert "uv sync --extra local" in message
    # The wheel leaves the local stack out (pyproject.toml): never offer it.
    assert ".whl" not in message
    assert "pip install 'cocoon-hibernation[local]'" not in message
    assert "\n" not in message
