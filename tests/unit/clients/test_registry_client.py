"""Registry client pieces that need no registry: ECR mode, client reuse, cold start.

ECR cannot run here (no AWS account, no network): its tests use `botocore.stub.Stubber`
on a real boto3 ECR client and assert the exact API calls and parameters the client
makes. Everything the Distribution HTTP API covers is tested against the real server
in tests/integration/test_registry_client.py.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from shared.clients import registry as registry_mod
from shared.clients.registry import ManifestInfo, RegistryClient, get_client, reset_clients
from shared.config import RegistryAuth, Settings, parse_registry_base
from shared.errors import ConfigError, RegistryAuthError, RegistryError
from tests.conftest import REPO_ROOT

ECR_HOST = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
REPO = "snapshots/vk-team-a-agent-0"
DIGEST = "sha256:" + "ab" * 32


def ecr_settings(host: str = ECR_HOST) -> Settings:
    return Settings(
        registry_base=parse_registry_base(f"{host}/snapshots"), registry_auth=RegistryAuth.ECR
    )


@pytest.fixture
def ecr() -> Iterator[tuple[RegistryClient, Stubber]]:
    boto_client = boto3.client(
        "ecr",
        region_name="eu-west-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-secret",
    )
    with Stubber(boto_client) as stub:
        yield RegistryClient(ecr_settings(), ecr_client=boto_client), stub
        stub.assert_no_pending_responses()


def test_ecr_presence_uses_describe_images_by_tag(ecr: tuple[RegistryClient, Stubber]) -> None:
    client, stub = ecr
    stub.add_response(
        "describe_images",
        {
            "imageDetails": [
                {
                    "registryId": "123456789012",
                    "repositoryName": REPO,
                    "imageDigest": DIGEST,
                    "imageTags": ["hibernate"],
                    "imageSizeInBytes": 1234,
                    "imagePushedAt": datetime(2026, 1, 1, tzinfo=UTC),
                    "imageManifestMediaType": "application/vnd.oci.image.manifest.v1+json",
                }
            ]
        },
        expected_params={
            "registryId": "123456789012",
            "repositoryName": REPO,
            "imageIds": [{"imageTag": "hibernate"}],
        },
    )
    assert client.head_manifest(REPO, "hibernate") == ManifestInfo(
        repository=REPO,
        reference="hibernate",
        digest=DIGEST,
        media_type="application/vnd.oci.image.manifest.v1+json",
        size=1234,
    )
    assert client.requests_made == 1


@pytest.mark.parametrize(
    "code", ["ImageNotFoundException", "RepositoryNotFoundException"], ids=["image", "repository"]
)
def test_ecr_not_found_is_absent(ecr: tuple[RegistryClient, Stubber], code: str) -> None:
    client, stub = ecr
    stub.add_client_error("describe_images", service_error_code=code, http_status_code=400)
    assert client.snapshot_present("vk-team-a-agent-0") is False


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        pytest.param("AccessDeniedException", 400, RegistryAuthError, id="access-denied"),
        pytest.param("ExpiredTokenException", 400, RegistryAuthError, id="expired-credentials"),
        pytest.param("UnrecognizedClientException", 403, RegistryAuthError, id="bad-key"),
        pytest.param("ServerException", 500, RegistryError, id="server"),
        pytest.param("ThrottlingException", 400, RegistryError, id="throttled"),
    ],
)
def test_ecr_errors_are_typed(
    ecr: tuple[RegistryClient, Stubber], code: str, status: int, error: type[Exception]
) -> None:
    client, stub = ecr
    stub.add_client_error("describe_images", service_error_code=code, http_status_code=status)
    with pytest.raises(error) as raised:
        client.snapshot_present("vk-team-a-agent-0")
    assert type(raised.value) is error  # not a botocore exception


def test_ecr_drop_snapshot_deletes_only_the_tag(ecr: tuple[RegistryClient, Stubber]) -> None:
    """ECR's batch_delete_image by tag untags when other tags remain: no shared-manifest check."""
    client, stub = ecr
    stub.add_response(
        "batch_delete_image",
        {"imageIds": [{"imageDigest": DIGEST, "imageTag": "hibernate"}], "failures": []},
        expected_params={
            "registryId": "123456789012",
            "repositoryName": REPO,
            "imageIds": [{"imageTag": "hibernate"}],
        },
    )
    assert client.drop_snapshot("vk-team-a-agent-0") is True
    assert client.requests_made == 1  # no tag listing, no HEADs


def test_ecr_delete_of_an_absent_tag_is_success(ecr: tuple[RegistryClient, Stubber]) -> None:
    client, stub = ecr
    stub.add_response(
        "batch_delete_image",
        {
            "failures": [
                {
                    "imageId": {"imageTag": "hibernate"},
                    "failureCode": "ImageNotFound",
                    "failureReason": "Requested image not found",
                }
            ],
        },
    )
    stub.add_client_error("batch_delete_image", service_error_code="RepositoryNotFoundException")
    assert client.drop_snapshot("vk-team-a-agent-0") is True
    assert client.drop_snapshot("vk-team-a-agent-0") is True


def test_ecr_other_delete_failures_are_reported_as_not_removed(
    ecr: tuple[RegistryClient, Stubber],
) -> None:
    client, stub = ecr
    stub.add_response(
        "batch_delete_image",
        {
            "failures": [
                {
                    "imageId": {"imageTag": "hibernate"},
                    "failureCode": "ImageReferencedByManifestList",
                    "failureReason": "referenced by an index",
                }
            ],
        },
    )
    assert client.drop_snapshot("vk-team-a-agent-0") is False


def test_ecr_client_is_built_for_the_region_of_the_host() -> None:
    client = RegistryClient(ecr_settings())
    built = client._ecr_client()
    assert built.meta.region_name == "eu-west-1"
    assert built.meta.config.connect_timeout == registry_mod.CONNECT_TIMEOUT
    assert built.meta.config.read_timeout == registry_mod.READ_TIMEOUT


def test_ecr_mode_with_a_non_ecr_host_is_a_config_error() -> None:
    client = RegistryClient(ecr_settings("registry.example.com"))
    with pytest.raises(ConfigError, match="not an ECR registry"):
        client.snapshot_present("vk-team-a-agent-0")


def test_get_client_reuses_one_client_per_settings() -> None:
    reset_clients()
    a = Settings(registry_base=parse_registry_base("127.0.0.1:5000"), registry_insecure=True)
    b = Settings(registry_base=parse_registry_base("127.0.0.1:5001"), registry_insecure=True)
    try:
        assert get_client(a) is get_client(a)
        # A warm instance parses the same environment again: an equal Settings, same client.
        assert get_client(dataclasses.replace(a)) is get_client(a)
        assert get_client(b) is not get_client(a)
    finally:
        reset_clients()


def test_no_registry_configured_is_a_config_error() -> None:
    client = RegistryClient(Settings())
    with pytest.raises(ConfigError, match="COCOON_REGISTRY_BASE"):
        client.snapshot_present("vk-team-a-agent-0")
    assert client.requests_made == 0


def test_importing_the_client_loads_no_heavy_library() -> None:
    """Cold start: an irrelevant event must not pay for requests, boto3 or google.auth."""
    # Compared with the interpreter's own start-up: site-packages' namespace .pth files
    # register bare `google`/`google.cloud` packages before any code runs.
    code = (
        "import sys, json; before = set(sys.modules);"
        "import shared.clients.registry, shared.clients.registry_auth;"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in"
        " ('requests', 'urllib3', 'boto3', 'botocore', 'google'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []
