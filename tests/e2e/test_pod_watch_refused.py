"""A refused pod WATCH is a Warning: it silently costs every early push its seat otherwise.

`report_wait` watches the one pod whose report a push beat; an RBAC without
`watch` on pods (the shipped one lacked it) made every such push wait for the
next event or sweep, logged at INFO. The refusal is the real server's (RBAC)
where only a fake can answer it here: the LIST is served by the embedded API,
only the WATCH is answered 403 in front of it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from shared.clients.kube import KubeClient
from tests.e2e.test_release_e2e import POD, hibernated_main, suspended_set
from tests.fixtures.cocoon_objects import NS
from tests.fixtures.reconcile_world import World

pytestmark = [pytest.mark.e2e, pytest.mark.embedded_only("answers the WATCH in front of the API")]


def test_a_refused_pod_watch_is_logged_as_a_warning(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hibernated_main(world, suspended_set(world), state="hibernating")
    client = KubeClient.from_kubeconfig(str(world.kubeconfig))
    served = client._core.list_namespaced_pod

    def rbac_without_watch(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("watch"):
            raise ApiException(status=403, reason="Forbidden")
        return served(*args, **kwargs)

    monkeypatch.setattr(client._core, "list_namespaced_pod", rbac_without_watch)

    seen = list(client.watch_pod(NS, POD, timeout=2.0))

    assert [p.name if p else None for p in seen] == [POD]  # the LIST, then no watch
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    [refused] = [r for r in lines if r.get("message") == "pod watch not opened"]
    assert refused["severity"] == "WARNING"
