"""Irrelevant events cost no heavy import: proven in a fresh interpreter.

Cold start is a product feature (STYLE "Heavy imports"): a blob push, a
`:latest` push, a read in an audit batch or a malformed body must be answered
before `kubernetes`, `google.cloud.pubsub`, `boto3` or `google.auth` is
imported. A subprocess gives a clean `sys.modules` (the test session itself
has imported everything by now).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tests.data.events import EVENTS_DIR

HEAVY = ("kubernetes", "google.cloud.pubsub", "boto3", "botocore", "google.auth", "google.oauth2")

SCRIPT = """
import json, sys
import functions_framework

REGISTRY_TOKEN = "cold-registry-token-0123456789abcd"

app = functions_framework.create_app(target="ingest", source=sys.argv[1])
client = app.test_client()
statuses = []
for route, path in json.loads(sys.argv[2]):
    body = b"{not json" if path is None else open(path, "rb").read()
    token = "cold-audit-token-0123456789abcdef" if "audit" in route else REGISTRY_TOKEN
    response = client.post(route, data=body, headers={"Authorization": "Bearer " + token})
    statuses.append(response.status_code)
heavy = json.loads(sys.argv[3])
print(json.dumps({"statuses": statuses, "loaded": [m for m in heavy if m in sys.modules]}))
"""

IRRELEVANT = [
    ("/registry", "distribution_blob_push"),
    ("/registry", "distribution_push_latest"),
    ("/registry", "distribution_pull"),
    ("/registry", "harbor_default_pull"),
    ("/registry", "ecr_push_failed"),
    ("/kubernetes/audit", "audit_eventlist_reads"),
    ("/registry", None),  # malformed
]


def test_irrelevant_events_import_no_client_library() -> None:
    requests = [
        [route, None if n is None else str(EVENTS_DIR / f"{n}.json")] for route, n in IRRELEVANT
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COCOON_")} | {
        "COCOON_INGEST_TOKEN": "cold-registry-token-0123456789abcd",
        "COCOON_AUDIT_TOKEN": "cold-audit-token-0123456789abcdef",
        "COCOON_REGISTRY_BASE": "127.0.0.1:5000/cocoon",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            str(REPO_ROOT / "main.py"),
            json.dumps(requests),
            json.dumps(HEAVY),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["statuses"] == [202] * len(IRRELEVANT)
    assert report["loaded"] == []
