"""Cold start with lifecycle events on: `COCOON_EVENTS_TOPIC` set must not make any
target import the Pub/Sub library for an event that publishes nothing — and this
project's own lifecycle events, were the topic wired back to a target, are such
events (dropped by the adapters before any client is built).

Runs in a fresh interpreter so other tests' imports cannot hide a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

PROBE = r"""
import base64, json, os, sys
from datetime import UTC, datetime
os.environ.update({
    "COCOON_REGISTRY_BASE": "127.0.0.1:5000/snap",
    "KUBECONFIG": "/nonexistent",
    "COCOON_EVENTS_TOPIC": "projects/acme/topics/cocoon-lifecycle",
})
import functions_framework
from cloudevents.http import CloudEvent, to_binary

def post(target, ce_type, data):
    app = functions_framework.create_app(target=target, source=sys.argv[1])
    headers, body = to_binary(CloudEvent({"type": ce_type, "source": "//t", "id": "1"}, data))
    return app.test_client().post("/", headers=headers, data=body).status_code

# What our own topic carries, as Eventarc would deliver it to a target.
from shared import lifecycle
from shared.models import CocoonSet
cs = CocoonSet.model_validate({
    "apiVersion": "cocoonset.cocoonstack.io/v1", "kind": "CocoonSet",
    "metadata": {"name": "agent", "namespace": "team-a", "uid": "u", "resourceVersion": "7"},
    "spec": {"agent": {"image": "i"}},
})
msg = lifecycle.released(cs, deleted_pods=["agent-0"], hint="n", now=datetime.now(UTC)).message()
wired_back = {"message": {"data": base64.b64encode(msg.data).decode(),
                          "attributes": dict(msg.attributes), "messageId": "9"},
              "subscription": "projects/acme/subscriptions/loop"}

statuses = {
    "release-latest-tag": post("release", "io.cocoonstack.snapshot.pushed",
        {"repository": "snap/vk-a-b-0", "tag": "latest", "digest": "sha256:" + "0" * 64}),
    "wake-not-accepted": post("wake", "io.cocoonstack.sweep.requested", {"dryRun": False}),
    "sweep-not-accepted": post("sweep", "io.cocoonstack.cocoonset.wake.requested",
        {"namespace": "team-a", "name": "agent"}),
}
for target in ("release", "wake", "sweep"):
    statuses[f"{target}-own-lifecycle-event"] = post(
        target, "google.cloud.pubsub.topic.v1.messagePublished", wired_back)
loaded = sorted(
    m for m in sys.modules
    if m.startswith(("google.cloud.pubsub", "grpc", "kubernetes", "boto3"))
)
print(json.dumps({"statuses": statuses, "loaded": loaded}))
"""


def test_irrelevant_events_with_a_topic_set_load_no_pubsub_library() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "main.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=60,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # 200 everywhere: acknowledged. A sweep or reconcile would have needed the
    # (nonexistent) kubeconfig and answered 500.
    assert set(result["statuses"].values()) == {200}, result["statuses"]
    assert result["loaded"] == []
