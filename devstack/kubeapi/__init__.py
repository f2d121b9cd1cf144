"""An in-memory Kubernetes API served over real HTTP, for tests, benchmarks and the demo.

The official `kubernetes` client and `kubectl` talk to it unmodified. Where it
and a real kube-apiserver could differ, it follows the real one (see docs/development.md).
"""

from devstack.kubeapi.embedded import EmbeddedKube, serve_forever

__all__ = ["EmbeddedKube", "serve_forever"]
