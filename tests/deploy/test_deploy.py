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
from pathlib import Path
from types import ModuleType
from typing import Any

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
    assert set(re.findall(r"ARG TORCH_VERSION=(\S+)", text)) == {_pin("torch", "ingest")}
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
    assert copied <= allowed, copied - allowed
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


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    if not KUBECTL.exists():
        pytest.skip(".venv-deploy is absent: run deploy/check.sh (make test does) to install kubectl")
    out = subprocess.run(
        [str(KUBECTL), "kustomize", str(DEPLOY / "k8s" / "overlays" / request.param)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return request.param, [doc for doc in yaml.safe_load_all(out) if doc]


def _of(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_every_deployment_is_locked_down(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    _, docs = overlay
    deployments = _of(docs, "Deployment")
    assert set(deployments) == set(ALL)
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


def test_ingest_is_a_single_writer(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    _, docs = overlay
    ingest = _of(docs, "Deployment")["ingest"]
    assert ingest["spec"]["replicas"] == 1
    assert ingest["spec"]["strategy"]["type"] == "Recreate"
    assert "ingest" not in _of(docs, "HorizontalPodAutoscaler")


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
    for deployment_name, deployment in deployments.items():
        env = _env(_container(deployment))
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
    if name == "local":  # generated, development values
        assert set(secrets) == {ref}
        data = {k: base64.b64decode(v).decode() for k, v in secrets[ref]["data"].items()}
        assert set(data) == {"api-keys", "services-token"}
    else:  # created out of band (deploy/README.md)
        assert secrets == {} and ref == "ragstack-secrets"


def test_the_data_volume(overlay: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = overlay
    (pvc,) = _of(docs, "PersistentVolumeClaim").values()
    expected = "ReadWriteOnce" if name == "local" else "ReadWriteMany"
    assert pvc["spec"]["accessModes"] == [expected]
    for deployment_name, deployment in _of(docs, "Deployment").items():
        claims = {
            v["persistentVolumeClaim"]["claimName"]
            for v in deployment["spec"]["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        }
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
