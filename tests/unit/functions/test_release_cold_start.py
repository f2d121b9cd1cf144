"""Cold start is a product feature: the release/wake targets load no heavy client
library at import, nor for an event the adapters drop (docs/design.md#dropped-events: irrelevant
events are acknowledged without any API or registry call).

Runs in a fresh interpreter so other tests' imports cannot hide a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

PROBE = r"""
import json, os, sys
os.environ.update({"COCOON_REGISTRY_BASE": "127.0.0.1:5000/snap", "KUBECONFIG": "/nonexistent"})
import functions_framework
from cloudevents.http import CloudEvent, to_binary
app = functions_framework.create_app(target="release", source=sys.argv[1])
client = app.test_client()
headers, body = to_binary(CloudEvent(
    {"type": "io.cocoonstack.snapshot.pushed", "source": "//t", "id": "1"},
    {"repository": "snap/vk-a-b-0", "tag": "latest", "digest": "sha256:" + "0" * 64},
))
status = client.post("/", headers=headers, data=body).status_code
loaded = {m.split(".")[0] for m in sys.modules}
heavy = sorted(loaded & {"kubernetes", "boto3", "botocore", "urllib3", "prometheus_client"})
print(json.dumps({"status": status, "heavy": heavy}))
"""


def test_an_irrelevant_push_loads_no_client_library() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "main.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=60,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"status": 200, "heavy": []}
