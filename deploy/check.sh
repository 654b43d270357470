#!/usr/bin/env bash
# The CI check of deploy/, without a container engine or a cluster: renders both Kustomize overlays,
# validates every object against the Kubernetes schemas (strict, two versions), lints the manifests,
# the Dockerfile and deploy/ with checkov (plus hadolint for the Dockerfile), and checks the Compose
# files against the compose-spec schema and the stack's structure.
#
# Idempotent: the pinned tools (deploy/requirements.txt) go into .venv-deploy once (again when the
# pins change); after that nothing is downloaded. Exits non-zero when any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${DEPLOY_VENV:-.venv-deploy}"
REQUIREMENTS=deploy/requirements.txt
K8S_VERSIONS=(1.30.0 1.37.0)   # oldest and newest Kubernetes the manifests must validate against
OVERLAYS=(local production)
started=$SECONDS

want="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.installed" 2>/dev/null)" != "$want" ]]; then
  echo "deploy: installing the pinned tools into $VENV"
  python3 -m venv "$VENV"
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQUIREMENTS" >"$VENV/install.log" 2>&1; then
    cat "$VENV/install.log" >&2
    exit 1
  fi
  echo "$want" >"$VENV/.installed"
fi
bin="$VENV/bin"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=()
passed=0

step() {  # step NAME COMMAND...: runs it quietly, shows its output only when it fails
  local name="$1"
  shift
  if "$@" >"$work/step.log" 2>&1; then
    printf '  ok    %s\n' "$name"
    passed=$((passed + 1))
  else
    printf '  FAIL  %s\n' "$name"
    sed 's/^/        /' "$work/step.log" | tail -n 60
    failed+=("$name")
  fi
}

render() { "$bin/kubectl" kustomize "deploy/k8s/$1" >"$work/$2.yaml"; }

echo "deploy: checking deploy/ (kubectl $("$bin/kubectl" version --client 2>/dev/null | sed -n 's/Client Version: //p'), checkov $("$bin/checkov" --version))"
step "kustomize renders base" render base base
for overlay in "${OVERLAYS[@]}"; do
  step "kustomize renders overlays/$overlay" render "overlays/$overlay" "$overlay"
done
rendered=()
files=()  # checkov's arguments: -f FILE for each rendered overlay
for overlay in "${OVERLAYS[@]}"; do
  if [[ -s "$work/$overlay.yaml" ]]; then
    rendered+=("$work/$overlay.yaml")
    files+=(-f "$work/$overlay.yaml")
  fi
done
if ((${#rendered[@]} == ${#OVERLAYS[@]})); then
  for version in "${K8S_VERSIONS[@]}"; do
    step "schemas of Kubernetes $version (strict)" \
      "$bin/kubernetes-validate" --strict --quiet -k "$version" "${rendered[@]}"
  done
  step "checkov: rendered overlays and Dockerfile" \
    "$bin/checkov" --config-file deploy/.checkov.yaml "${files[@]}" -f deploy/docker/Dockerfile
fi
step "checkov: no secrets in deploy/" \
  "$bin/checkov" -d deploy --framework secrets --compact --quiet --skip-download
step "hadolint: Dockerfile" "$bin/hadolint" --failure-threshold info deploy/docker/Dockerfile
step "compose: schema and structure" "$bin/python" deploy/check_compose.py

total=$((passed + ${#failed[@]}))
if ((${#failed[@]})); then
  echo "deploy: ${#failed[@]} of $total checks failed in $((SECONDS - started))s: ${failed[*]}"
  exit 1
fi
echo "deploy: $passed of $total checks passed in $((SECONDS - started))s"
