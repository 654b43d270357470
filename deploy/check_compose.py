"""Checks deploy/compose without a container engine: run by deploy/check.sh in .venv-deploy.

1. compose.yaml, alone and merged with compose.gpu.yaml, is valid against the Compose Specification's
   JSON schema (deploy/compose/compose-spec.schema.json, vendored: see deploy/README.md), after
   `${VAR:-default}` interpolation as `docker compose` does with an empty environment.
2. Structure: the services are those of the stack; every RAGStack service builds its own target of
   deploy/docker/Dockerfile, runs as non-root on a read-only root filesystem with all capabilities
   dropped, and has a healthcheck through healthcheck.py; every `depends_on` names a service (with
   service_healthy where that service has a healthcheck); named volumes are declared; published ports
   are on loopback; the collector's config exists and sends traces to Jaeger.

Exit 0 when all hold; otherwise each problem on stderr and exit 1.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent
COMPOSE = ROOT / "compose"
SCHEMA = COMPOSE / "compose-spec.schema.json"
RAGSTACK = ("ingest", "retrieve", "agent", "verify", "gateway")
EXPECTED = {*RAGSTACK, "ollama", "ollama-pull", "otel-collector", "jaeger"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?]([^}]*))?\}")


def interpolate(node: Any) -> Any:
    """`${NAME:-default}` becomes default, `${NAME}` empty (an empty environment)."""
    if isinstance(node, str):
        return _VAR.sub(lambda m: m.group(2) or "", node).replace("$$", "$")
    if isinstance(node, list):
        return [interpolate(v) for v in node]
    if isinstance(node, dict):
        return {k: interpolate(v) for k, v in node.items()}
    return node


def merge(base: Any, override: Any) -> Any:
    """Compose's merge of override files, as far as these files need it (mappings merge)."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = merge(base[key], value) if key in base else value
        return out
    return override


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((COMPOSE / name).read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise SystemExit(f"{name}: not a mapping")
    return interpolate(doc)


def schema_errors(doc: dict[str, Any], label: str) -> list[str]:
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    return [
        f"{label}: schema: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


def structure_errors(doc: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    services: dict[str, Any] = doc.get("services") or {}
    if set(services) != EXPECTED:
        errors.append(f"services: {sorted(services)}, expected {sorted(EXPECTED)}")
    declared = set(doc.get("volumes") or {})
    if not (ROOT / "docker" / "Dockerfile").exists():
        errors.append("deploy/docker/Dockerfile is missing")
    for name, svc in services.items():
        errors += wiring_errors(name, svc, services, declared)
        if name in RAGSTACK:
            errors += ragstack_errors(name, svc)
    return errors + stack_errors(services)


def wiring_errors(name: str, svc: dict[str, Any], services: dict[str, Any], declared: set[str]) -> list[str]:
    """Any service's dependencies, named volumes and published ports."""
    errors = []
    where = f"services.{name}"
    for dep, spec in (svc.get("depends_on") or {}).items():
        if dep not in services:
            errors.append(f"{where}.depends_on: no service {dep}")
        elif services[dep].get("healthcheck") and spec.get("condition") != "service_healthy":
            errors.append(f"{where}.depends_on.{dep}: condition should be service_healthy")
    for volume in svc.get("volumes") or []:
        source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source", "")
        if source and not source.startswith((".", "/")) and source not in declared:
            errors.append(f"{where}.volumes: {source} is not declared under volumes")
    for port in svc.get("ports") or []:
        if not str(port).startswith("127.0.0.1:"):
            errors.append(f"{where}.ports: {port} is not published on loopback only")
    return errors


def ragstack_errors(name: str, svc: dict[str, Any]) -> list[str]:
    """A RAGStack service's image, healthcheck and hardening."""
    errors = []
    where = f"services.{name}"
    build = svc.get("build") or {}
    if build.get("dockerfile") != "deploy/docker/Dockerfile" or build.get("target") != name:
        errors.append(f"{where}.build: target {name} of deploy/docker/Dockerfile expected")
    test = (svc.get("healthcheck") or {}).get("test") or []
    if test[:4] != ["CMD", "python", "/opt/ragstack/healthcheck.py", name]:
        errors.append(f"{where}.healthcheck: expected healthcheck.py {name}, found {test}")
    if svc.get("user") != "10001:10001" or svc.get("read_only") is not True:
        errors.append(f"{where}: user 10001:10001 and read_only: true expected")
    if svc.get("cap_drop") != ["ALL"] or "no-new-privileges:true" not in (svc.get("security_opt") or []):
        errors.append(f"{where}: cap_drop [ALL] and no-new-privileges expected")
    if name != "gateway" and svc.get("ports"):
        errors.append(f"{where}: only the gateway is published")
    return errors


def stack_errors(services: dict[str, Any]) -> list[str]:
    """What the services need of each other: the gateway in front of the rest, one shared data volume."""
    errors = []
    gateway_deps = services.get("gateway", {}).get("depends_on") or {}
    if set(gateway_deps) != set(RAGSTACK) - {"gateway"}:
        errors.append(f"services.gateway.depends_on: {sorted(gateway_deps)}, expected the four services")
    for name in ("ingest", "retrieve", "agent"):
        mounts = services.get(name, {}).get("volumes") or []
        if not any(str(m).startswith("ragstack-data:/data") for m in mounts):
            errors.append(f"services.{name}: the ragstack-data volume at /data expected")
    return errors


def collector_errors() -> list[str]:
    cfg = yaml.safe_load((COMPOSE / "otel-collector.yaml").read_text(encoding="utf-8"))
    traces = cfg.get("service", {}).get("pipelines", {}).get("traces", {})
    errors = []
    for kind in ("receivers", "processors", "exporters"):
        for component in traces.get(kind, []):
            if component not in (cfg.get(kind) or {}):
                errors.append(f"otel-collector.yaml: {kind[:-1]} {component} used but not defined")
    if "otlp" not in traces.get("receivers", []):
        errors.append("otel-collector.yaml: the traces pipeline does not receive OTLP")
    if not any(
        (cfg.get("exporters") or {}).get(e, {}).get("endpoint", "").startswith("jaeger:")
        for e in traces.get("exporters", [])
    ):
        errors.append("otel-collector.yaml: no exporter sends traces to jaeger")
    return errors


def main() -> int:
    base = load("compose.yaml")
    gpu = merge(base, load("compose.gpu.yaml"))
    errors = [
        *schema_errors(base, "compose.yaml"),
        *schema_errors(gpu, "compose.yaml + compose.gpu.yaml"),
        *structure_errors(base),
        *structure_errors(gpu),
        *collector_errors(),
    ]
    for error in errors:
        print(f"compose: {error}", file=sys.stderr)
    if not errors:
        print(
            f"compose: {len(base['services'])} services valid (compose-spec schema, structure, GPU override)"
        )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
