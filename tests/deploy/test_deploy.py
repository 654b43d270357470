"""deploy/: what the manifests, images and Compose file promise, checked without a container engine.

The Kubernetes tests render both overlays with `.venv-deploy/bin/kubectl kustomize` (made by
deploy/check.sh) and skip when it is absent. The rest needs only this environment: the probe script
against real health endpoints, the Dockerfile's targets and pins, the configs the images ship.
"""

from __future__ import annotations

import base64
import http.server
import importlib.util
import re
import socket
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from concurrent import futures
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import grpc
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ragstack.config import SERVICE_NAMES, Config, ServicesConfig, load_config
from ragstack.rpc.clients import GRPC_SERVICES

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBECTL = ROOT / ".venv-deploy" / "bin" / "kubectl"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
OVERLAYS = ("local", "production")
ALL = (*SERVICE_NAMES, "gateway")
HPA_SERVICES = {"retrieve", "agent", "verify"}
GPU_SERVICES = {"retrieve", "ingest"}
STORE_READERS = {"ingest", "retrieve", "agent"}  # mount the data volume
BUCKET_USERS = {"ingest", "retrieve"}  # the local overlay: the stores in MinIO's bucket
LOCAL_ONLY = {"minio"}  # Deployments of the local overlay besides RAGStack's


# --- the health probe of the images ------------------------------------------------------------------


def _load_probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ragstack_healthcheck", DEPLOY / "docker" / "healthcheck.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


probe = _load_probe()


def test_probe_knows_every_service_by_its_proto_name_and_default_port() -> None:
    defaults = ServicesConfig()
    assert set(probe.SERVICES) == set(ALL)
    for name in SERVICE_NAMES:
        assert probe.SERVICES[name] == (GRPC_SERVICES[name], getattr(defaults, name).port)
    assert probe.SERVICES["gateway"][1] == defaults.gateway.port


@pytest.fixture
def health_server() -> Iterator[tuple[int, health.HealthServicer]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port, servicer
    server.stop(None)


def test_grpc_probe_passes_only_while_the_service_is_serving(
    health_server: tuple[int, health.HealthServicer],
) -> None:
    port, servicer = health_server
    name = GRPC_SERVICES["retrieve"]
    assert probe.check_grpc(name, port) is not None  # unknown service: NOT_FOUND
    servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    assert probe.check_grpc(name, port) is None
    servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)  # draining on SIGTERM
    assert probe.check_grpc(name, port) == "NOT_SERVING"


def test_grpc_probe_fails_when_nothing_listens() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, and is closed now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert "UNAVAILABLE" in (probe.check_grpc("ragstack.v1.AgentService", port) or "")


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health/live" else 503)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_http_probe_reads_live_and_ready() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert probe.check_http(port, ready=False) is None
        assert probe.check_http(port, ready=True) == "HTTP 503"
    finally:
        server.shutdown()
        server.server_close()


def test_probe_takes_service_and_port_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSTACK__SERVICES__VERIFY__PORT", "6000")
    assert probe._port("verify") == 6000
    monkeypatch.setenv("RAGSTACK_SERVICE", "nonsense")
    assert probe.main([]) == 2


# --- the Dockerfile -----------------------------------------------------------------------------------


def _stages() -> dict[str, list[str]]:
    """Stage name -> its instruction lines (continuations joined)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if match := re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.I):
            current = stages.setdefault(match.group(2), [f"FROM {match.group(1)}"])
        elif line and not line.startswith("#"):
            current.append(line)
    return stages


def _pin(requirement_prefix: str, extra: str | None = None) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = project["optional-dependencies"][extra] if extra else project["dependencies"]
    (pin,) = [d for d in deps if d.startswith(f"{requirement_prefix}==")]
    return pin.split("==", 1)[1]


def test_every_service_has_a_target_that_runs_it_as_non_root_with_a_healthcheck() -> None:
    stages = _stages()
    for name in ALL:
        lines = stages[name]
        assert "USER 10001:10001" in lines, name
        assert f'CMD ["serve", "--service", "{name}"]' in lines, name
        (check,) = [line for line in lines if line.startswith("HEALTHCHECK")]
        assert f'"/opt/ragstack/healthcheck.py", "{name}"]' in check, name
        assert f"RAGSTACK__SERVICES__{name.upper()}__HOST=0.0.0.0" in " ".join(lines), name


def _ancestry(stages: dict[str, list[str]], name: str) -> list[str]:
    chain = [name]
    while (parent := stages[chain[-1]][0].split()[1]) in stages:
        chain.append(parent)
    return chain


def test_only_the_ingest_image_carries_the_ingest_extra() -> None:
    stages = _stages()
    assert any('"/src[ingest]"' in line for line in stages["builder-ingest"])
    assert not any("[ingest]" in line for line in stages["builder"])
    for name in ALL:
        copies = " ".join(line for stage in _ancestry(stages, name) for line in stages[stage])
        assert ("--from=builder-ingest" in copies) == (name == "ingest"), name
        # the embedder is in the images that run it (the agent and the gateway run no model)
        assert ("--from=models" in copies) == (name in {"ingest", "retrieve", "verify"}), name


def test_dockerfile_pins_follow_pyproject() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert set(re.findall(r"ARG ORT_VERSION=(\S+)", text)) == {_pin("onnxruntime")}
    assert set(re.findall(r"ARG TORCH_VERSION=(\S+)", text)) == {_pin("torch", "docling")}
    assert "onnxruntime-gpu[cuda,cudnn]==${ORT_VERSION}" in text
    base_images = [line.split()[1] for line in text.splitlines() if line.startswith("FROM ") and ":" in line]
    assert base_images and all(not image.endswith(":latest") for image in base_images)


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied: set[str] = set()
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("COPY") and "--from=" not in line:
            copied.update(arg for arg in line.split()[1:-1] if not arg.startswith("--"))
    outside = {p for p in copied if not any(p == a or p.startswith(f"{a}/") for a in allowed)}
    assert not outside, outside
    assert all((ROOT / path).exists() for path in copied)


def test_the_images_default_config_is_valid_and_binds_only_where_told(tmp_path: Path) -> None:
    path = DEPLOY / "docker" / "ragstack.yaml"
    cfg = load_config(path, {"RAGSTACK__SERVICES__RETRIEVE__HOST": "0.0.0.0"})
    assert cfg.data_dir == Path("/data")
    assert cfg.models.embedder_dir == Path("/opt/ragstack/models/all-minilm-l6-v2")
    assert cfg.services.retrieve.host == "0.0.0.0"  # its own bind address
    assert cfg.services.agent.host == "agent"  # a peer, dialled by its Compose/Kubernetes name


def test_compose_environment_is_a_valid_config() -> None:
    """Each Compose service's environment over the image's ragstack.yaml (and the image's own bind
    override) loads: no unknown key, no bad value."""
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text(encoding="utf-8"))
    for name in ALL:
        env = {
            key: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))
            for key, value in compose["services"][name]["environment"].items()
        }
        env[f"RAGSTACK__SERVICES__{name.upper()}__HOST"] = "0.0.0.0"
        cfg = load_config(DEPLOY / "docker" / "ragstack.yaml", env)
        assert cfg.telemetry.otlp_endpoint == "http://otel-collector:4317"
        assert cfg.llm.host == "http://ollama:11434"
        assert cfg.telemetry.service_name == f"ragstack-{name}"


# --- Kubernetes (rendered overlays) ------------------------------------------------------------------


@cache
def _render(overlay: str) -> str:
    if not KUBECTL.exists():
        pytest.skip(".venv-deploy is absent: run deploy/check.sh (make test does) to install kubectl")
    return subprocess.run(
        [str(KUBECTL), "kustomize", str(DEPLOY / "k8s" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, [doc for doc in yaml.safe_load_all(_render(request.param)) if doc]


def _of(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_every_deployment_is_locked_down(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    overlay_name, docs = overlay
    deployments = _of(docs, "Deployment")
    assert set(deployments) == set(ALL) | (LOCAL_ONLY if overlay_name == "local" else set())
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False, name
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] >= 10000, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        container = _container(deployment)
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True, name
        assert sc["allowPrivilegeEscalation"] is False, name
        assert sc["capabilities"]["drop"] == ["ALL"], name
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][bound]), (name, bound)
        tmp = next(v for v in pod["volumes"] if v["name"] == "tmp")
        assert "emptyDir" in tmp, name
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], name
        image = container["image"]
        assert re.search(r":[\w.-]+$", image) and not image.endswith(":latest"), image
        assert container["imagePullPolicy"] in {"Always", "IfNotPresent"}, name


def test_grpc_services_have_native_grpc_probes_on_their_port(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = overlay
    deployments = _of(docs, "Deployment")
    defaults = ServicesConfig()
    for name in SERVICE_NAMES:
        container = _container(deployments[name])
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["grpc"] == getattr(defaults, name).port, name
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[kind]["grpc"] == {"port": ports["grpc"], "service": GRPC_SERVICES[name]}, (
                name,
                kind,
            )
        assert container["args"] == ["serve", "--service", name]
    gateway = _container(deployments["gateway"])
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert gateway["startupProbe"]["httpGet"]["path"] == "/health/ready"


def test_hpa_for_retrieve_agent_verify_only(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    _, docs = overlay
    hpas = _of(docs, "HorizontalPodAutoscaler")
    assert set(hpas) == HPA_SERVICES
    deployments = _of(docs, "Deployment")
    for name, hpa in hpas.items():
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
        assert "replicas" not in deployments[name]["spec"], f"{name}: the HPA owns replicas"
        assert "cpu" in _container(deployments[name])["resources"]["requests"]


def test_ingest_scales_out_only_on_postgresql_state(
    overlay: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """On SQLite files ingest is the single writer (one replica, never two at once); on PostgreSQL
    its workers share the queue and take turns on the stores, so it runs several, replaced pod by pod."""
    name, docs = overlay
    ingest = _of(docs, "Deployment")["ingest"]
    assert "ingest" not in _of(docs, "HorizontalPodAutoscaler")
    cfg = _config(docs, tmp_path)
    if not cfg.state.url:
        assert ingest["spec"]["replicas"] == 1
        assert ingest["spec"]["strategy"]["type"] == "Recreate"
        return
    assert name == "production" and cfg.state.url.startswith("postgresql://")
    assert ingest["spec"]["replicas"] >= 2 and ingest["spec"]["strategy"]["type"] == "RollingUpdate"


def test_services_on_postgresql_state_migrate_first_and_get_its_password(
    overlay: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Every service that opens the state runs `ragstack migrate` for its own stores in an init
    container of its own image, and reads the password from the Secret, never from the config."""
    _, docs = overlay
    cfg = _config(docs, tmp_path)
    if not cfg.state.url:
        return
    assert "@" in cfg.state.url and ":" not in cfg.state.url.split("@")[0].removeprefix("postgresql://")
    for name, deployment in _of(docs, "Deployment").items():
        if name not in STORE_READERS:
            continue
        spec = deployment["spec"]["template"]["spec"]
        (init,) = spec["initContainers"]
        assert init["args"] == ["migrate", "--service", name]
        assert init["image"] == _container(deployment)["image"]
        for container in (init, _container(deployment)):
            password = {e["name"]: e for e in container["env"]}[cfg.state.password_env]
            assert password["valueFrom"]["secretKeyRef"] == {
                "name": "ragstack-secrets",
                "key": "state-password",
            }


def test_services_and_config_agree(overlay: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    """Peers dial services.<name>.host:port: it must be the Service of that name and port, and each
    Deployment binds its own entry on 0.0.0.0."""
    _, docs = overlay
    configmaps = {name.rsplit("-", 1)[0]: cm for name, cm in _of(docs, "ConfigMap").items()}
    config_file = tmp_path / "ragstack.yaml"
    config_file.write_text(configmaps["ragstack-config"]["data"]["ragstack.yaml"])
    env = dict(configmaps["ragstack-env"]["data"])
    cfg: Config = load_config(config_file, env)
    assert cfg.data_dir == Path("/data")
    services = _of(docs, "Service")
    deployments = _of(docs, "Deployment")
    for name in ALL:
        endpoint = getattr(cfg.services, name)
        assert endpoint.host == name
        (port,) = services[name]["spec"]["ports"]
        assert port["port"] == endpoint.port
        assert services[name]["spec"]["selector"] == {"app.kubernetes.io/name": name}
        container = _container(deployments[name])
        own = {k: v for k, v in _env(container).items() if isinstance(v, str)}
        assert own[f"RAGSTACK__SERVICES__{name.upper()}__HOST"] == "0.0.0.0"
        assert own["RAGSTACK_CONFIG"] == "/etc/ragstack/ragstack.yaml"
        bound = load_config(config_file, {**env, **own})
        assert getattr(bound.services, name).host == "0.0.0.0"


def test_secrets_come_from_the_secret(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = overlay
    deployments = _of(docs, "Deployment")
    secrets = _of(docs, "Secret")
    refs = set()
    for deployment_name in ALL:
        env = _env(_container(deployments[deployment_name]))
        token = env["RAGSTACK__SERVICES__TOKEN"]["secretKeyRef"]
        refs.add(token["name"])
        assert token["key"] == "services-token", deployment_name
        if deployment_name == "gateway":
            keys = env["RAGSTACK__GATEWAY__API_KEYS"]["secretKeyRef"]
            assert keys["key"] == "api-keys"
            refs.add(keys["name"])
    configmaps = {n.rsplit("-", 1)[0]: cm["data"] for n, cm in _of(docs, "ConfigMap").items()}
    file = yaml.safe_load(configmaps["ragstack-config"]["ragstack.yaml"])
    assert "token" not in file["services"] and "api_keys" not in file.get("gateway", {})
    assert not {"RAGSTACK__SERVICES__TOKEN", "RAGSTACK__GATEWAY__API_KEYS"} & set(configmaps["ragstack-env"])
    (ref,) = refs
    if name == "local":  # generated, development values (and MinIO's, tested below)
        assert {n.rsplit("-", 1)[0] for n in secrets} == {"ragstack-secrets", "object-store-credentials"}
        data = {k: base64.b64decode(v).decode() for k, v in secrets[ref]["data"].items()}
        assert set(data) == {"api-keys", "services-token"}
    else:  # created out of band (deploy/README.md)
        assert secrets == {} and ref == "ragstack-secrets"


def test_the_data_volume(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = overlay
    pvcs = _of(docs, "PersistentVolumeClaim")
    pvc = pvcs.pop("ragstack-data")
    assert set(pvcs) == ({"minio-data"} if name == "local" else set())  # the bucket's own volume
    expected = "ReadWriteOnce" if name == "local" else "ReadWriteMany"
    assert pvc["spec"]["accessModes"] == [expected]
    for deployment_name, deployment in _of(docs, "Deployment").items():
        claims = {
            v["persistentVolumeClaim"]["claimName"]
            for v in deployment["spec"]["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        }
        if deployment_name == "minio":
            assert claims == {"minio-data"}
        else:
            assert claims == ({pvc["metadata"]["name"]} if deployment_name in STORE_READERS else set())


def test_gpu_nodes_only_for_retrieve_and_ingest_in_production(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    name, docs = overlay
    for deployment_name, deployment in _of(docs, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        container = _container(deployment)
        gpu = name == "production" and deployment_name in GPU_SERVICES
        tolerations = pod.get("tolerations", [])
        assert (
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
        ) == gpu, deployment_name
        assert bool(pod.get("nodeSelector")) == gpu, deployment_name
        assert ("nvidia.com/gpu" in container["resources"]["limits"]) == gpu, deployment_name
        assert container["image"].endswith("-gpu") == gpu, deployment_name
        if name == "production":
            assert container["imagePullPolicy"] == "Always"
            assert container["image"].startswith("registry.example.com/")


def test_namespace_network_policies_and_service_account(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    _, docs = overlay
    (namespace,) = _of(docs, "Namespace").values()
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert all(d["metadata"].get("namespace") == "ragstack" for d in docs if d["kind"] != "Namespace")
    policies = _of(docs, "NetworkPolicy")
    deny = policies["ragstack-default-deny-ingress"]["spec"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and "ingress" not in deny
    (account,) = _of(docs, "ServiceAccount").values()
    assert account["automountServiceAccountToken"] is False
    for deployment in _of(docs, "Deployment").values():
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


# --- the local overlay: the stores in MinIO ----------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(_render("local")) if doc]


def _config(docs: list[dict[str, Any]], tmp_path: Path) -> Config:
    """What every pod reads: ragstack.yaml of ragstack-config under the overrides of ragstack-env."""
    configmaps = {name.rsplit("-", 1)[0]: cm["data"] for name, cm in _of(docs, "ConfigMap").items()}
    config_file = tmp_path / "ragstack.yaml"
    config_file.write_text(configmaps["ragstack-config"]["ragstack.yaml"])
    return load_config(config_file, dict(configmaps["ragstack-env"]))


def _object_store_secret(docs: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    (name,) = [n for n in _of(docs, "Secret") if n.rsplit("-", 1)[0] == "object-store-credentials"]
    data = _of(docs, "Secret")[name]["data"]
    return name, {key: base64.b64decode(value).decode() for key, value in data.items()}


def _pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    return deployment["spec"]["template"]["metadata"]["labels"]


def _assert_locked_down(container: dict[str, Any]) -> None:
    name, sc = container["name"], container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True, name
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"], name
    for bound in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][bound]), (name, bound)


def test_local_overlay_runs_minio_with_its_own_volume_behind_a_service(local: list[dict[str, Any]]) -> None:
    deployment = _of(local, "Deployment")["minio"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"  # a ReadWriteOnce volume
    pod = deployment["spec"]["template"]["spec"]
    container = _container(deployment)
    _assert_locked_down(container)
    assert re.fullmatch(r"quay\.io/minio/minio:RELEASE\.[\dT-]+Z", container["image"]), container["image"]
    assert container["imagePullPolicy"] == "Always"  # from a registry, not loaded into the node
    assert "checkov.io/skip1" not in deployment["metadata"].get("annotations", {})
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["s3"] == 9000
    for kind, path in (
        ("startupProbe", "/minio/health/live"),
        ("livenessProbe", "/minio/health/live"),
        ("readinessProbe", "/minio/health/ready"),
    ):
        assert container[kind]["httpGet"] == {"path": path, "port": "s3"}, kind
    args = container["args"]
    assert args[0] == "server" and args[-1] == "/data"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/data"]]["persistentVolumeClaim"]["claimName"] == "minio-data"
    # the read-only root: MinIO's only other writes (its certs folder) go to the /tmp emptyDir
    assert args[args.index("--certs-dir") + 1].startswith("/tmp/") and "emptyDir" in volumes[mounts["/tmp"]]
    pvc = _of(local, "PersistentVolumeClaim")["minio-data"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]

    service = _of(local, "Service")["minio"]
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "minio"}
    assert service["spec"]["selector"].items() <= _pod_labels(deployment).items()
    s3 = next(p for p in service["spec"]["ports"] if p["name"] == "s3")
    assert (s3["port"], s3["targetPort"]) == (9000, "s3")

    # default-deny ingress in the namespace: only the bucket's users reach MinIO, on the S3 port
    policy = _of(local, "NetworkPolicy")["minio-s3-from-ingest-retrieve"]["spec"]
    assert policy["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "minio"}}
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    (expression,) = source["podSelector"]["matchExpressions"]
    assert expression["key"] == "app.kubernetes.io/name" and set(expression["values"]) == BUCKET_USERS
    assert rule["ports"] == [{"port": "s3", "protocol": "TCP"}]


def test_local_config_puts_the_stores_in_the_bucket_on_minio(
    local: list[dict[str, Any]], tmp_path: Path
) -> None:
    storage = _config(local, tmp_path).storage
    assert storage.lancedb_uri == "s3://ragstack/lancedb"
    assert storage.lexical_snapshots == "s3://ragstack/lexical"
    endpoint = urlsplit(storage.options["aws_endpoint"])
    assert endpoint.scheme == "http" and storage.options["allow_http"] == "true"
    assert storage.options["aws_region"]
    # the endpoint is MinIO's Service and S3 port
    service = _of(local, "Service")[endpoint.hostname or ""]
    assert endpoint.port == next(p["port"] for p in service["spec"]["ports"] if p["name"] == "s3")
    # credentials come from the environment (the Secret), never from the config
    assert not {key for key in storage.options if "key" in key or "secret" in key or "token" in key}


def test_local_overlay_creates_the_bucket_before_ingest_and_retrieve_start(
    local: list[dict[str, Any]], tmp_path: Path
) -> None:
    storage = _config(local, tmp_path).storage
    buckets = {urlsplit(storage.lancedb_uri).netloc, urlsplit(storage.lexical_snapshots).netloc}
    (bucket,) = buckets
    endpoint = urlsplit(storage.options["aws_endpoint"]).netloc
    deployments = _of(local, "Deployment")
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        if name not in BUCKET_USERS:
            assert "initContainers" not in pod, name
            continue
        (init,) = pod["initContainers"]
        _assert_locked_down(init)
        assert re.fullmatch(r"quay\.io/minio/mc:RELEASE\.[\dT-]+Z", init["image"]), init["image"]
        assert init["imagePullPolicy"] == "Always"
        command = init["command"]
        assert command[0] == "mc" and command[-3:] == ["mb", "--ignore-existing", f"minio/{bucket}"], name
        assert command[command.index("--config-dir") + 1].startswith("/tmp/")  # read-only root
        assert {"name": "tmp", "mountPath": "/tmp"} in init["volumeMounts"]
        env = _env(init)
        assert env["MC_HOST_minio"] == f"http://$(AWS_ACCESS_KEY_ID):$(AWS_SECRET_ACCESS_KEY)@{endpoint}"
        names = [e["name"] for e in init["env"]]  # $(VAR) expands only variables defined before it
        assert names.index("MC_HOST_minio") > max(
            names.index("AWS_ACCESS_KEY_ID"), names.index("AWS_SECRET_ACCESS_KEY")
        )


def test_object_store_credentials_come_from_one_secret(local: list[dict[str, Any]]) -> None:
    """MinIO's root user is what ingest and retrieve sign with; no other service gets it, and no
    ConfigMap holds it."""
    secret, data = _object_store_secret(local)
    assert set(data) == {"access-key-id", "secret-access-key"}
    assert len(data["access-key-id"]) >= 3 and len(data["secret-access-key"]) >= 8  # MinIO's minimums
    assert re.fullmatch(r"[\w.-]+", data["access-key-id"] + data["secret-access-key"])  # safe in MC_HOST

    def ref(key: str) -> dict[str, Any]:
        return {"secretKeyRef": {"name": secret, "key": key}}

    aws = {"AWS_ACCESS_KEY_ID": ref("access-key-id"), "AWS_SECRET_ACCESS_KEY": ref("secret-access-key")}
    deployments = _of(local, "Deployment")
    for name in ALL:
        env = _env(_container(deployments[name]))
        if name in BUCKET_USERS:
            assert {key: env.get(key) for key in aws} == aws, name
            (init,) = deployments[name]["spec"]["template"]["spec"]["initContainers"]
            assert {key: _env(init).get(key) for key in aws} == aws, name
        else:
            assert not [key for key in env if key.startswith("AWS_")], name
    minio = _env(_container(deployments["minio"]))
    assert minio["MINIO_ROOT_USER"] == ref("access-key-id")
    assert minio["MINIO_ROOT_PASSWORD"] == ref("secret-access-key")
    for configmap in _of(local, "ConfigMap").values():
        for key, value in configmap["data"].items():
            assert not key.startswith(("AWS_", "MINIO_")), key
            assert data["secret-access-key"] not in value, key


def test_each_retrieve_replica_caches_the_lexical_snapshots_in_its_own_volume(
    local: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Replicas on one node share ragstack-data: the snapshot cache (<data_dir>/tantivy-replica,
    services/retrieve/factory.py) is an emptyDir of each pod over that folder."""
    cache = str(_config(local, tmp_path).data_dir / "tantivy-replica")
    retrieve = _of(local, "Deployment")["retrieve"]
    container = _container(retrieve)
    paths = [m["mountPath"] for m in container["volumeMounts"]]
    assert paths.index("/data") < paths.index(cache)  # mounted over the shared volume
    name = container["volumeMounts"][paths.index(cache)]["name"]
    (volume,) = [v for v in retrieve["spec"]["template"]["spec"]["volumes"] if v["name"] == name]
    assert "emptyDir" in volume
