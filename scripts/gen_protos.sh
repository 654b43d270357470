#!/usr/bin/env bash
# Generates the Python stubs in ragstack/v1 from proto/ragstack/v1/*.proto.
# The one way stubs are made: pinned grpcio-tools (see pyproject's dev extra). Never edit the output.
# CI re-runs this and fails when the committed stubs differ (make check-protos).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
want="1.85.1"
have="$("$PY" -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))')"
if [[ "$have" != "$want" ]]; then
  echo "gen_protos: grpcio-tools $want required, found $have" >&2
  exit 1
fi
out=ragstack/v1
rm -f "$out"/*_pb2*.py "$out"/*_pb2*.pyi
mkdir -p "$out"
"$PY" -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. proto/ragstack/v1/*.proto
cat > "$out/__init__.py" <<'PYEOF'
"""Generated protobuf and gRPC stubs for ragstack.v1 (scripts/gen_protos.sh). Do not edit."""
PYEOF
