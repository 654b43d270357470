#!/usr/bin/env bash
# Exports a Hugging Face cross-encoder (a sequence-classification model folder) to ONNX for
# RAGStack's reranker: scripts/export_cross_encoder.sh MODEL_DIR OUT_DIR
# Runs optimum in the tool environment (.venv-export, made by `make models`), offline.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { echo "usage: $0 MODEL_DIR OUT_DIR" >&2; exit 2; }
[[ -x .venv-export/bin/optimum-cli ]] || scripts/export_models.sh >/dev/null
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
.venv-export/bin/optimum-cli export onnx --model "$1" --task text-classification "$tmp/out" >"$tmp/log" 2>&1 \
  || { cat "$tmp/log" >&2; exit 1; }
mkdir -p "$2"
cp "$tmp/out/model.onnx" "$tmp/out/tokenizer.json" "$tmp/out/config.json" "$2/"
echo "cross-encoder: exported $1 to $2"
