"""`RealKube`: a real kube-apiserver + etcd on 127.0.0.1, for tests, benchmarks and the demo.

The binaries come from `devstack/scripts/build-control-plane.sh` (built from their Go
modules into a cache directory). Nothing else of a cluster runs: no
kube-controller-manager (so no garbage collector, namespace controller or
ServiceAccount controller) and no scheduler or kubelet — the cluster simulator
plays those over plain HTTP. A caller that needs a namespace's `default`
ServiceAccount (ServiceAccount admission refuses pods without it) creates it
(`ensure_namespace`).

What it configures, as a GKE-like cluster would:
- TLS with a generated CA; service-account signing keys (TokenRequest works);
- `--authorization-mode=RBAC`, and a static token file with the test identities:
  `admin` (system:masters) and the four function identities of
  `infra/k8s/gke-binding.yaml` with PROJECT_ID = `cocoon-test`;
- the admission plugins ServiceAccount, NamespaceLifecycle, ResourceQuota,
  PodSecurity, OwnerReferencesPermissionEnforcement (plus the defaults);
- the audit policy `infra/k8s/audit/policy.yaml` and a webhook backend to a local
  receiver (`audit_sink`), which records every batch and hands it to a callback;
  with `audit_log=True` also a log file of every request the function identities make;
- the CocoonSet CRD generated from our models, waited for until Established.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from devstack.certs import self_signed_ca
from devstack.processes import die_with_parent, free_port
from shared.crd import cocoonset_crd

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "devstack" / "scripts" / "build-control-plane.sh"
KUBE_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
PROJECT_ID = "cocoon-test"
FUNCTION_USERS = {
    role: f"cocoon-{role}@{PROJECT_ID}.iam.gserviceaccount.com"
    for role in ("release", "wake", "sweep", "ingest")
}
ADMISSION_PLUGINS = (
    "NamespaceLifecycle",
    "ServiceAccount",
    "ResourceQuota",
    "PodSecurity",
    "OwnerReferencesPermissionEnforcement",
    "DefaultTolerationSeconds",
    "LimitRanger",
    "Priority",
)
AUDIT_TOKEN = "real-kube-audit-token-0123456789abcdef"  # noqa: S105 - local, per-run receiver credential


class ControlPlaneUnavailable(RuntimeError):
    """The binaries are not built here (no `go`, or the build was not run)."""


def default_bin_dir() -> Path:
    """Where the build script puts the binaries unless told otherwise."""
    cache = Path(
        os.environ.get("COCOON_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cocoon-hibernation"
    )
    return cache / "control-plane" / f"k8s-{KUBE_VERSION}-etcd-{ETCD_VERSION}" / "bin"


def find_binaries() -> Path:
    """The directory holding `kube-apiserver` and `etcd`, or ControlPlaneUnavailable saying why.

    `COCOON_CONTROL_PLANE_BIN` (set by `make test`) wins; else the build script's default
    cache directory."""
    env = os.environ.get("COCOON_CONTROL_PLANE_BIN")
    candidates = [Path(env)] if env else [default_bin_dir()]
    for d in candidates:
        if (d / "kube-apiserver").is_file() and (d / "etcd").is_file():
            return d
    where = ", ".join(str(d) for d in candidates)
    hint = (
        "run `make controlplane` (needs Go)"
        if shutil.which("go")
        else "`go` is not installed, so `make controlplane` cannot build them"
    )
    raise ControlPlaneUnavailable(f"kube-apiserver/etcd not found in {where}: {hint}")


# -- certificates -------------------------------------------------------------------


def _pem_key(key: Any) -> bytes:
    data: bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return data


def _write_pki(d: Path) -> dict[str, Path]:
    """A CA, a serving certificate for 127.0.0.1/localhost, and the service-account key pair."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = self_signed_ca(ca_key, "cocoon-test-ca", valid=dt.timedelta(days=2))
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca.subject)
        .public_key(srv_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    # Service-account tokens are signed with RSA (RS256), what every cluster uses.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    paths = {
        "ca": d / "ca.crt",
        "cert": d / "apiserver.crt",
        "key": d / "apiserver.key",
        "sa_key": d / "sa.key",
        "sa_pub": d / "sa.pub",
    }
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(srv.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(_pem_key(srv_key))
    paths["sa_key"].write_bytes(_pem_key(sa_key))
    paths["sa_pub"].write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    for p in (paths["key"], paths["sa_key"]):
        p.chmod(0o600)
    return paths


# -- audit receiver ------------------------------------------------------------------


class AuditSink:
    """The audit webhook's receiver: records each EventList and hands it to `forward`.

    The real server posts JSON `audit.k8s.io/v1` EventLists with the bearer token of the
    webhook kubeconfig. A test sets `forward` to drive `ingest` with what arrives."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.forward: Callable[[bytes, dict[str, str]], None] | None = None
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items()}
                with sink.lock:
                    sink.raw.append(body)
                    with contextlib.suppress(ValueError):
                        sink.batches.append(json.loads(body))
                    forward = sink.forward
                if forward is not None:
                    # A failing forward is the test's business: the server still gets 200,
                    # as it would from a receiver that acknowledged and then failed.
                    with contextlib.suppress(Exception):
                        forward(body, headers)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}/kubernetes/audit"

    def start(self, certfile: Path, keyfile: Path) -> None:
        # https, not http: kube-apiserver loads the webhook kubeconfig with client-go's
        # clientcmd, which sends the user's credentials (the bearer token) only over TLS.
        # Over plain http the token is silently dropped and `ingest` answers 401.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certfile, keyfile)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [e for b in self.batches for e in b.get("items") or []]

    def clear(self) -> None:
        with self.lock:
            self.batches.clear()
            self.raw.clear()


# -- the control plane ---------------------------------------------------------------


class RealKube:
    """etcd + kube-apiserver as child processes, plus the audit receiver."""

    def __init__(
        self, bin_dir: Path | None = None, *, event_ttl: str = "1h", audit_log: bool = False
    ) -> None:
        self.bin_dir = bin_dir or find_binaries()
        self.event_ttl = event_ttl
        self.dir = Path(tempfile.mkdtemp(prefix="cocoon-realkube-"))
        # Every request of the function identities, logged for the RBAC-from-evidence test.
        self.audit_log: Path | None = self.dir / "audit.log" if audit_log else None
        self.port = free_port()
        self.tokens = {"admin": "admin-" + os.urandom(12).hex()}
        for role in FUNCTION_USERS:
            self.tokens[role] = f"{role}-" + os.urandom(12).hex()
        self.audit_sink = AuditSink()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._ssl = ssl.create_default_context()
        self.started_in: float = 0.0
        self._stopping = threading.Event()
        self._sa_thread = threading.Thread(
            target=self._serviceaccount_controller, name="realkube-sa-controller", daemon=True
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> RealKube:
        t0 = time.monotonic()
        pki = _write_pki(self.dir)
        self._ssl = ssl.create_default_context(cafile=str(pki["ca"]))
        # The sink serves with the API server's own certificate (127.0.0.1, our CA).
        self.audit_sink.start(pki["cert"], pki["key"])
        etcd_port, peer_port = free_port(), free_port()
        self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--data-dir",
                str(self.dir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer_port}",
                # A throwaway test store: losing it on a crash is fine, fsync per write is not.
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ],
        )
        tokens = self.dir / "tokens.csv"
        lines = [f'{self.tokens["admin"]},admin,admin,"system:masters"']
        lines += [f"{self.tokens[r]},{u},{u}," for r, u in FUNCTION_USERS.items()]
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        webhook = self.dir / "audit-webhook.kubeconfig"
        template = yaml.safe_load(
            (REPO_ROOT / "infra/k8s/audit/webhook-kubeconfig.yaml").read_text()
        )
        # The committed template, with its two placeholders filled in: what a user deploys.
        template["clusters"][0]["cluster"]["certificate-authority"] = str(pki["ca"])
        text = json.dumps(template).replace("INGEST_URL/kubernetes/audit", self.audit_sink.url)
        webhook.write_text(text.replace("AUDIT_TOKEN", AUDIT_TOKEN))
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--tls-cert-file={pki['cert']}",
                f"--tls-private-key-file={pki['key']}",
                f"--client-ca-file={pki['ca']}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--anonymous-auth=false",
                f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
                f"--service-account-key-file={pki['sa_pub']}",
                f"--service-account-signing-key-file={pki['sa_key']}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--event-ttl={self.event_ttl}",
                f"--audit-policy-file={self._audit_policy()}",
                f"--audit-webhook-config-file={webhook}",
                *self._audit_log_flags(),
                # Default batching waits up to 30 s; tests want the hint promptly.
                "--audit-webhook-batch-max-wait=200ms",
                "--audit-webhook-initial-backoff=100ms",
                f"--cert-dir={self.dir / 'certs'}",
                "--v=0",
            ],
        )
        try:
            self._wait_ready(timeout=120.0)
            self._install_crd()
            self.ensure_namespace("default")
            self._sa_thread.start()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def _audit_policy(self) -> Path:
        shipped = REPO_ROOT / "infra/k8s/audit/policy.yaml"
        if self.audit_log is None:
            return shipped
        # One policy serves every backend: the function identities' requests go first.
        policy = yaml.safe_load(shipped.read_text())
        policy["rules"].insert(0, {"level": "Metadata", "users": sorted(FUNCTION_USERS.values())})
        path = self.dir / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        return path

    def _audit_log_flags(self) -> list[str]:
        if self.audit_log is None:
            return []
        return [f"--audit-log-path={self.audit_log}", "--audit-log-format=json"]

    def audit_log_events(self) -> list[dict[str, Any]]:
        """The audit log's events so far (the log backend writes each as one JSON line)."""
        if self.audit_log is None or not self.audit_log.exists():
            return []
        lines = self.audit_log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.dir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only a prctl call, no locks
        )
        self._procs.append(proc)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for proc, name in zip(self._procs, ("etcd", "kube-apiserver"), strict=False):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}"
                    )
            try:
                status, body = self.request("GET", "/readyz")
                if status == 200:
                    return
                last = body.decode(errors="replace")[-300:]
            except OSError as e:
                last = str(e)
            time.sleep(0.3)
        raise RuntimeError(f"kube-apiserver not ready in {timeout:.0f} s: {last}")

    def _install_crd(self) -> None:
        crd = cocoonset_crd()
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        status, body = self.request("POST", path, crd)
        if status not in (201, 409):
            raise RuntimeError(f"CocoonSet CRD refused ({status}): {body[:500]!r}")
        name, group = crd["metadata"]["name"], crd["spec"]["group"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, body = self.request("GET", f"{path}/{name}")
            conds = json.loads(body).get("status", {}).get("conditions") or []
            established = any(c["type"] == "Established" and c["status"] == "True" for c in conds)
            # Established means served; the handler follows within moments.
            if established and self.request("GET", f"/apis/{group}/v1/cocoonsets")[0] == 200:
                return
            time.sleep(0.1)
        raise RuntimeError("the CocoonSet CRD did not become Established in 60 s")

    def _serviceaccount_controller(self) -> None:
        """kube-controller-manager's ServiceAccount controller, reduced to its visible
        effect: every new namespace gets a `default` ServiceAccount, moments after it is
        created (pods are refused by ServiceAccount admission until then)."""
        while not self._stopping.is_set():
            req = urllib.request.Request(  # noqa: S310 - our own server
                self.url + "/api/v1/namespaces?watch=1&timeoutSeconds=30",
                headers={"Authorization": f"Bearer {self.tokens['admin']}"},
            )
            try:
                with urllib.request.urlopen(req, context=self._ssl, timeout=40) as resp:  # noqa: S310
                    for line in resp:
                        if self._stopping.is_set():
                            return
                        ev = json.loads(line)
                        meta = (ev.get("object") or {}).get("metadata") or {}
                        if ev.get("type") == "ADDED" and not meta.get("deletionTimestamp"):
                            sa = {"metadata": {"name": "default"}}
                            ns = meta["name"]
                            self.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", sa)
            except (OSError, ValueError, KeyError):
                # The server is stopping, or the watch broke: start again from a fresh list.
                self._stopping.wait(0.2)

    def stop(self) -> None:
        self._stopping.set()
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self._procs):
            try:
                # A throwaway server: no need to drain open watches gracefully.
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self._procs.clear()
        with contextlib.suppress(Exception):
            self.audit_sink.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RealKube:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- plain HTTP access (as admin unless told) -----------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        identity: str = "admin",
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)  # noqa: S310
        req.add_header("Authorization", f"Bearer {self.tokens[identity]}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            # https to our own server only (self.url)
            with urllib.request.urlopen(req, context=self._ssl, timeout=30) as resp:  # noqa: S310
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read()

    def reset(self) -> None:
        """Bring the cluster back to its just-started state, between tests.

        With no controller-manager, nothing collects garbage or finishes a namespace
        deletion, so this does both by hand, as admin: every object of the kinds tests
        create goes (pods with grace 0, finalizers stripped first), test CRDs go (the
        apiextensions finalizer inside kube-apiserver deletes their objects), and test
        namespaces are emptied, deleted and finalized through `/finalize`."""
        keep_ns = {"default", "kube-system", "kube-public", "kube-node-lease"}
        _, body = self.request("GET", "/api/v1/namespaces")
        namespaces = [n["metadata"]["name"] for n in json.loads(body)["items"]]
        _, body = self.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        crds = json.loads(body)["items"]
        for crd in crds:
            if crd["metadata"]["name"] != "cocoonsets.cocoonset.cocoonstack.io":
                self._strip_finalizers_of_custom(crd)
                self.request(
                    "DELETE",
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}",
                )
        crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # A CRD's deletion finishes asynchronously (its objects go first): the next
            # test may create one of the same name.
            _, body = self.request("GET", crd_path)
            if len(json.loads(body)["items"]) <= 1:
                break
            time.sleep(0.05)
        for ns in namespaces:
            if ns in ("kube-system", "kube-public", "kube-node-lease"):
                continue
            self._empty_namespace(ns)
            if ns not in keep_ns:
                self.request("DELETE", f"/api/v1/namespaces/{ns}")
                self.request(
                    "PUT",
                    f"/api/v1/namespaces/{ns}/finalize",
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": ns},
                        "spec": {"finalizers": []},
                    },
                )
        self.request("DELETE", "/api/v1/nodes")
        for kind in ("clusterrolebindings", "clusterroles"):
            # Only what tests added: ours carry the app label, test-made ones a test label.
            self.request(
                "DELETE",
                f"/apis/rbac.authorization.k8s.io/v1/{kind}?labelSelector=cocoon-test",
            )
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            # A test's admission webhook (tests/fixtures/cocoon_webhook.py) must not
            # outlive it: with failurePolicy Fail it would refuse the next test's writes.
            self.request(
                "DELETE",
                f"/apis/admissionregistration.k8s.io/v1/{kind}?labelSelector=cocoon-test",
            )
        self.audit_sink.clear()
        self.audit_sink.forward = None

    def _strip_finalizers_of_custom(self, crd: dict[str, Any]) -> None:
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
        if not served:
            return
        base = f"/apis/{group}/{served[0]}/{plural}"
        status, body = self.request("GET", base)
        if status != 200:
            return
        for obj in json.loads(body).get("items") or []:
            if obj["metadata"].get("finalizers"):
                meta = obj["metadata"]
                ns = meta.get("namespace")
                path = (
                    f"/apis/{group}/{served[0]}/namespaces/{ns}/{plural}/{meta['name']}"
                    if ns
                    else f"{base}/{meta['name']}"
                )
                self.request(
                    "PATCH",
                    path,
                    {"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )

    def _empty_namespace(self, ns: str) -> None:
        co = f"/apis/cocoonset.cocoonstack.io/v1/namespaces/{ns}/cocoonsets"
        _, body = self.request("GET", co)
        for obj in json.loads(body).get("items") or []:
            if obj["metadata"].get("finalizers"):
                self.request(
                    "PATCH",
                    f"{co}/{obj['metadata']['name']}",
                    {"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )
        self.request("DELETE", co)
        # Pods first with grace 0: nothing else (no kubelet) would ever finish them.
        _, body = self.request("GET", f"/api/v1/namespaces/{ns}/pods")
        for obj in json.loads(body).get("items") or []:
            if obj["metadata"].get("finalizers"):
                self.request(
                    "PATCH",
                    f"/api/v1/namespaces/{ns}/pods/{obj['metadata']['name']}",
                    {"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )
        self.request("DELETE", f"/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0")
        for coll in (
            "events",
            "configmaps",
            "secrets",
            "resourcequotas",
            "limitranges",
        ):
            self.request("DELETE", f"/api/v1/namespaces/{ns}/{coll}")
        self.request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases")
        for kind in ("rolebindings", "roles"):
            self.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{kind}")
        _, body = self.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts")
        for obj in json.loads(body).get("items") or []:
            if obj["metadata"]["name"] != "default":
                self.request(
                    "DELETE", f"/api/v1/namespaces/{ns}/serviceaccounts/{obj['metadata']['name']}"
                )

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        """A namespace and its `default` ServiceAccount (no controller-manager creates it)."""
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        if labels:
            ns["metadata"]["labels"] = labels  # type: ignore[index]
        status, body = self.request("POST", "/api/v1/namespaces", ns)
        if status not in (201, 409):
            raise RuntimeError(f"namespace {name}: {status} {body[:300]!r}")
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        status, body = self.request("POST", f"/api/v1/namespaces/{name}/serviceaccounts", sa)
        if status not in (201, 409):
            raise RuntimeError(f"serviceaccount {name}/default: {status} {body[:300]!r}")

    def apply_manifest(self, text: str) -> None:
        """Create (or replace) the RBAC objects of a committed manifest, as admin."""
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            kind, meta = doc["kind"], doc["metadata"]
            plural = {
                "ClusterRole": "clusterroles",
                "ClusterRoleBinding": "clusterrolebindings",
                "Role": "roles",
                "RoleBinding": "rolebindings",
            }[kind]
            base = "/apis/rbac.authorization.k8s.io/v1"
            ns = meta.get("namespace")
            coll = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
            status, body = self.request("POST", coll, doc)
            if status == 409:
                _, cur = self.request("GET", f"{coll}/{meta['name']}")
                doc["metadata"]["resourceVersion"] = json.loads(cur)["metadata"]["resourceVersion"]
                status, body = self.request("PUT", f"{coll}/{meta['name']}", doc)
            if status not in (200, 201):
                raise RuntimeError(f"{kind} {meta['name']}: {status} {body[:300]!r}")

    def write_kubeconfig(
        self, path: str | Path, *, identity: str = "admin", namespace: str = "default"
    ) -> Path:
        """A kubeconfig for the official client and kubectl, as one of the test identities."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        ca = base64.b64encode((self.dir / "ca.crt").read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "real", "cluster": {"server": self.url, "certificate-authority-data": ca}}
            ],
            "users": [{"name": identity, "user": {"token": self.tokens[identity]}}],
            "contexts": [
                {
                    "name": "real",
                    "context": {"cluster": "real", "user": identity, "namespace": namespace},
                }
            ],
            "current-context": "real",
            "preferences": {},
        }
        partial = target.with_name(target.name + ".partial")
        partial.write_text(yaml.safe_dump(config, sort_keys=False))
        partial.replace(target)
        return target
