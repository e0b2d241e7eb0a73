# Two commands for a newcomer: `make demo` and `make test` (both create .venv if missing).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export KERAS_BACKEND := tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 2

# --- Demo (local, CPU, no network) --------------------------------------------------------
DEMO ?= runs/demo
DEMO_CORPUS_MB ?= 12
DEMO_STEPS ?= 4000
DEMO_VOCAB ?= 3000
DEMO_LENGTH ?= 64
DEMO_MASKING ?= token
DEMO_TOKENIZER = $(DEMO)/tokenizer-$(DEMO_VOCAB)
PUSH_TO ?=  # e.g. hf://ORG/NAME: `make demo` then publishes the export (docs/publishing.md)
LOCAL_BEAM := --runner=FnApiRunner

# --- Dataflow (make prepare) and TPU VM (make train) --------------------------------------
PROJECT ?=
REGION ?= us-central1
BUCKET ?=
ifneq ($(BUCKET),)
INPUT ?= gs://$(BUCKET)/corpus/*.jsonl.gz
TOKENIZER ?= gs://$(BUCKET)/tokenizer
DATA ?= gs://$(BUCKET)/prepared
OUTPUT ?= gs://$(BUCKET)/runs/base
endif
MAX_LENGTH ?= 128
MAX_WORKERS ?= 32
TPU ?= local
MODEL ?= base
BATCH ?= 128
STEPS ?= 500000
# Which Keras backend `make train` runs on: jax (the default: the stack Keras tests on TPUs and the
# only one for TPU7x) or tensorflow (TPUStrategy). docs/tpu.md gives the evidence.
BACKEND ?= jax

# The TensorFlow TPU stack: tensorflow-tpu 2.20 + libtpu in its own venv (docs/tpu.md, docs/training.md "On a TPU VM").
TPU_VENV := .venv-tpu
TPU_PY := $(TPU_VENV)/bin/python
TPU_STAMP := $(TPU_VENV)/.installed
# Trainer tests that CI also runs on the TPU stack (on the CPU, libtpu loaded, no network).
TPU_SMOKE := tests/trainer/test_strategy.py tests/trainer/test_plan.py \
  tests/trainer/test_task.py::test_eval_loss_falls_clearly \
  tests/trainer/test_task.py::test_interrupted_run_resumes_where_it_stopped \
  tests/trainer/test_preemption.py::test_torn_backups_fall_back_to_older_state_then_checkpoint \
  tests/trainer/test_export.py tests/trainer/test_tpu_stack.py

# The JAX TPU stack: jax[tpu] with the libtpu it pins, keras, keras-hub, TensorFlow's CPU build
# for tf.data (docs/tpu.md). Its smoke tests run with KERAS_BACKEND=jax.
TPU_JAX_VENV := .venv-tpu-jax
TPU_JAX_PY := $(TPU_JAX_VENV)/bin/python
TPU_JAX_STAMP := $(TPU_JAX_VENV)/.installed
TPU_JAX_SMOKE := tests/trainer/test_tpu_jax_stack.py tests/test_no_tensorflow_text.py \
  tests/trainer/test_task.py::test_eval_loss_falls_clearly \
  tests/trainer/test_task.py::test_interrupted_run_resumes_where_it_stopped \
  tests/trainer/test_export.py

# `make train` installs and runs the stack of its backend.
ifeq ($(BACKEND),jax)
TRAIN_PY := $(TPU_JAX_PY)
TRAIN_STAMP := $(TPU_JAX_STAMP)
TRAIN_WHERE := --strategy tpu
else ifeq ($(BACKEND),tensorflow)
TRAIN_PY := $(TPU_PY)
TRAIN_STAMP := $(TPU_STAMP)
TRAIN_WHERE := --strategy tpu --tpu $(TPU)
endif

.PHONY: venv venv-tpu venv-tpu-jax test test-tpu test-tpu-tf test-tpu-jax demo prepare train bench bench-prepare bench-near-dedup bench-train clean

venv: $(STAMP)
$(STAMP): setup.py constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[trainer,test]"
	touch $(STAMP)

venv-tpu: $(TPU_STAMP)
$(TPU_STAMP): setup.py constraints-tpu.txt tpu/tensorflow-from-tpu/pyproject.toml
	test -x $(TPU_PY) || $(PYTHON) -m venv $(TPU_VENV)
	$(TPU_PY) -m pip install --quiet --upgrade pip
	$(TPU_PY) -m pip install --quiet -c constraints-tpu.txt ./tpu/tensorflow-from-tpu
	$(TPU_PY) -m pip install --quiet -c constraints-tpu.txt -e ".[tpu,test]"
	$(TPU_PY) -m pip check
	touch $(TPU_STAMP)

venv-tpu-jax: $(TPU_JAX_STAMP)
$(TPU_JAX_STAMP): setup.py constraints.txt constraints-tpu-jax.txt
	test -x $(TPU_JAX_PY) || $(PYTHON) -m venv $(TPU_JAX_VENV)
	$(TPU_JAX_PY) -m pip install --quiet --upgrade pip
	$(TPU_JAX_PY) -m pip install --quiet -c constraints-tpu-jax.txt -e ".[tpu-jax,test]"
	$(TPU_JAX_PY) -m pip check
	touch $(TPU_JAX_STAMP)

# The trainer's tests run twice: on TensorFlow (with everything else), then on JAX.
test: $(STAMP)
	$(PY) -m pytest tests -q -p no:cacheprovider
	KERAS_BACKEND=jax $(PY) -m pytest tests/trainer -q -p no:cacheprovider

# Off a TPU VM libtpu would query the cloud metadata server at import: TPU_SKIP_MDS_QUERY
# stops that, and the tests run without a network (unshare -n, loopback only) to prove it.
test-tpu: test-tpu-tf test-tpu-jax

test-tpu-tf: $(TPU_STAMP)
	TPU_SKIP_MDS_QUERY=1 bash tpu/offline.sh $(TPU_PY) -m pytest $(TPU_SMOKE) -q -p no:cacheprovider \
	  --capture=sys

test-tpu-jax: $(TPU_JAX_STAMP)
	KERAS_BACKEND=jax TPU_SKIP_MDS_QUERY=1 bash tpu/offline.sh $(TPU_JAX_PY) -m pytest $(TPU_JAX_SMOKE) \
	  -q -p no:cacheprovider --capture=sys

demo: $(STAMP)
	@mkdir -p $(DEMO)
	test -s $(DEMO)/corpus.jsonl || $(PY) -m beam_pipelines.demo_corpus --output $(DEMO)/corpus.jsonl --max_mb $(DEMO_CORPUS_MB)
	test -s $(DEMO_TOKENIZER)/tokenizer.json || $(PY) -m beam_pipelines.train_tokenizer --input $(DEMO)/corpus.jsonl --output_dir $(DEMO_TOKENIZER) --model unigram --vocab_size $(DEMO_VOCAB)
	$(PY) -m beam_pipelines.prepare $(LOCAL_BEAM) --input $(DEMO)/corpus.jsonl --tokenizer $(DEMO_TOKENIZER) --output_dir $(DEMO)/prepared --max_length $(DEMO_LENGTH) --validation_fraction 0.02
	rm -rf $(DEMO)/train $(DEMO)/export
	$(PY) -m trainer.task --train_data $(DEMO)/prepared/train --eval_data $(DEMO)/prepared/validation --tokenizer $(DEMO_TOKENIZER) --output_dir $(DEMO)/train --model tiny --config '{"dropout": 0.0}' --strategy cpu --per_replica_batch_size 32 --train_steps $(DEMO_STEPS) --learning_rate 3e-3 --warmup_ratio 0.1 --masking $(DEMO_MASKING) --eval_every 500 --save_every 500 --max_eval_batches 20 --verbose 2
	$(PY) -m trainer.export --checkpoint $(DEMO)/train --output_dir $(DEMO)/export --format all --language en $(if $(PUSH_TO),--push_to $(PUSH_TO))
	$(PY) -m trainer.plot --run_dir $(DEMO)/train --output $(DEMO)/train/curves.png
	$(PY) -m trainer.fill_mask_demo --model $(DEMO)/export/keras-hub --corpus $(DEMO)/corpus.jsonl --validation_fraction 0.02 --num 10
	$(PY) -m trainer.baseline --run_dir $(DEMO)/train
	@echo; echo "Demo outputs (a second run reuses corpus and tokenizer, replaces the rest):"
	@echo "  corpus            $(DEMO)/corpus.jsonl"
	@echo "  tokenizer         $(DEMO_TOKENIZER)/"
	@echo "  prepared shards   $(DEMO)/prepared/{train,validation}/ (manifest.json, dead_letter/)"
	@echo "  training run      $(DEMO)/train/ (metrics.json, history.json, logs/ for TensorBoard, checkpoints/)"
	@echo "  curves            $(DEMO)/train/curves.png"
	@echo "  exports           $(DEMO)/export/keras-hub/ and $(DEMO)/export/hf/"
	@echo "  model cards       $(DEMO)/export/keras-hub/README.md and $(DEMO)/export/hf/README.md"
	@echo "  final metrics     $$(cat $(DEMO)/train/metrics.json | tr -d '\n ')"

prepare: $(STAMP)
	@test -n "$(PROJECT)" -a -n "$(BUCKET)" || { echo "usage: make prepare PROJECT=... REGION=... BUCKET=... [INPUT=gs://... TOKENIZER=gs://... DATA=gs://...]"; exit 2; }
	$(PY) -m beam_pipelines.prepare --runner DataflowRunner --project $(PROJECT) --region $(REGION) \
	  --temp_location gs://$(BUCKET)/dataflow/tmp --staging_location gs://$(BUCKET)/dataflow/staging \
	  --setup_file ./setup.py --max_num_workers $(MAX_WORKERS) --experiments=use_runner_v2 \
	  --input '$(INPUT)' --tokenizer $(TOKENIZER) --output_dir $(DATA) --max_length $(MAX_LENGTH) \
	  --validation_fraction 0.005 $(ARGS)

# KERAS_BACKEND in the recipe's environment wins over the exported default above.
train: $(TRAIN_STAMP)
	@case "$(BACKEND)" in jax|tensorflow) ;; *) echo "make train: BACKEND must be jax or tensorflow, not '$(BACKEND)'"; exit 2;; esac
	@test -n "$(DATA)" -a -n "$(OUTPUT)" || { echo "usage: make train [BACKEND=jax|tensorflow] [TPU=local] DATA=gs://.../prepared OUTPUT=gs://.../runs/NAME [TOKENIZER=...] (or BUCKET=...)"; exit 2; }
	KERAS_BACKEND=$(BACKEND) $(TRAIN_PY) -m trainer.task --backend $(BACKEND) $(TRAIN_WHERE) --train_data $(DATA)/train --eval_data $(DATA)/validation \
	  $(if $(TOKENIZER),--tokenizer $(TOKENIZER)) --output_dir $(OUTPUT) --model $(MODEL) \
	  --per_replica_batch_size $(BATCH) --train_steps $(STEPS) --precision bf16 $(ARGS)

bench: bench-prepare bench-near-dedup bench-train

bench-prepare: $(STAMP)
	$(PY) -m benchmarks.bench_prepare --corpus_mb 60

# Near dedup per language, old and new shingles side by side (figures in docs/languages.md).
bench-near-dedup: $(STAMP)
	$(PY) -m benchmarks.bench_near_dedup

# Both backends side by side (one child process each), figures in docs/jax.md.
bench-train: $(STAMP)
	$(PY) -m benchmarks.bench_train --backends tensorflow,jax

clean:
	rm -rf runs bench_out
