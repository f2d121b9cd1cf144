"""A 404 on the CocoonSet resource is two things: the object is gone, or the type is not
served at all (the CRD is not installed). Only the Status' details tell them apart: an
object's 404 names it (kube-apiserver and the emulator alike)."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from shared.clients.kube import translate
from shared.errors import ConfigError, CrdNotInstalled, NotFound

OBJECT_GONE = {
    "kind": "Status",
    "status": "Failure",
    "message": 'cocoonsets.cocoonstack.io "a" not found',
    "reason": "NotFound",
    "details": {"name": "a", "group": "cocoonstack.io", "kind": "cocoonsets"},
    "code": 404,
}
TYPE_NOT_SERVED = {
    "kind": "Status",
    "status": "Failure",
    "message": "the server could not find the requested resource",
    "reason": "NotFound",
    "details": {},
    "code": 404,
}


def _err(body: dict[str, object]) -> ApiException:
    err = ApiException(status=404, reason="Not Found")
    err.body = json.dumps(body)
    return err


@pytest.mark.parametrize("what", ["GET cocoonset team/a", "LIST cocoonsets", "PATCH cocoonset t/a"])
def test_the_type_not_served_is_the_crd_missing(what: str) -> None:
    out = translate(_err(TYPE_NOT_SERVED), what)
    assert isinstance(out, CrdNotInstalled) and isinstance(out, ConfigError)
    assert str(out).startswith("CocoonSet CRD not installed")


def test_a_missing_object_stays_not_found() -> None:
    assert type(translate(_err(OBJECT_GONE), "GET cocoonset team/a")) is NotFound


def test_other_resources_naming_a_set_stay_not_found() -> None:
    # A pod's LIST names the set's label; metrics.k8s.io not served is its own case.
    for what in ("LIST pods cocoonset.cocoonstack.io/name in team", "LIST podmetrics x in t"):
        assert type(translate(_err(TYPE_NOT_SERVED), what)) is NotFound
