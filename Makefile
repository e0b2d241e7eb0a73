# Two commands for a newcomer: `make demo` and `make test` (both create .venv if missing).
SHELL := /bin/bash

# Values a user gives (`make prepare INPUT='gs://b/my corpus/*.jsonl'`, or the environment) are
# text, never code: make takes them literally (`$(value ...)`: a `$(shell ...)` in one is not
# run) and recipes hand each to the shell single-quoted by `q` (a quote in it becomes '\''),
# so a space, quote, `;`, `$(...)` or backtick is just a character of the value. ARGS is split
# at spaces into words, each quoted the same way.
USER_VARS := PYTHON DEMO DEMO_FAMILY DEMO_CORPUS_MB DEMO_STEPS DEMO_VOCAB DEMO_LENGTH DEMO_MASKING PUSH_TO \
  PROJECT REGION BUCKET INPUT TOKENIZER DATA OUTPUT MAX_LENGTH MAX_WORKERS TPU MODEL BATCH STEPS \
  BACKEND ARGS TEST_WORKERS DEMO_FT_SEEDS DEMO_FT_EPOCHS DEMO_FT_BUDGET DEMO_ML DEMO_ML_CHARS DEMO_ML_STEPS DEMO_ML_VOCAB DEMO_ML_MODEL \
  MASKING_STEPS MASKING_VARIANTS
$(foreach v,$(USER_VARS),$(if $(filter command environment,$(firstword $(origin $(v)))),\
  $(eval override $(v) := $$(value $(v)))))
q = '$(subst ','\'',$(1))'
qwords = $(foreach word,$(1),$(call q,$(word)))

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make test` runs the suite on this many processes (pytest-xdist), a test file per process at a
# time (its module fixtures built once); 1 = in this process. 2 fits CI's 2 cores: 8.7 min for
# the first pass there where one process took 13-14.5 (docs/development.md).
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 1,$(TEST_WORKERS)),-n $(call q,$(TEST_WORKERS)) --dist loadfile)
export KERAS_BACKEND := tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 2

# --- Demo (local, CPU, no network) --------------------------------------------------------
DEMO ?= runs/demo
# The model family the demo pretrains (trainer/families: roberta, bert, modernbert).
DEMO_FAMILY ?= roberta
DEMO_CORPUS_MB ?= 12
DEMO_STEPS ?= 4000
DEMO_VOCAB ?= 3000
DEMO_LENGTH ?= 64
DEMO_MASKING ?= token
DEMO_TOKENIZER = $(DEMO)/tokenizer-$(DEMO_VOCAB)
D = $(call q,$(DEMO))
DT = $(call q,$(DEMO_TOKENIZER))
# The demo's downstream task (benchmarks/demo_task.py): the model and random weights fine-tuned
# with DEMO_FT_BUDGET labelled documents per label (the tiny size's default recipe: 20 epochs at
# 3e-3, mean pooling) and with every label (DEMO_FT_EPOCHS epochs at that rate: 20 would take
# ~15 minutes here), DEMO_FT_SEEDS each (docs/finetuning.md "The demo's downstream line").
DEMO_FT_SEEDS ?= 1,2
DEMO_FT_EPOCHS ?= 3
DEMO_FT_BUDGET ?= 16
DEMO_FT = --dev $(D)/task/dev.jsonl --metric macro_f1 --seeds $(call q,$(DEMO_FT_SEEDS)) --batch_size 32
# The demo's retrieval line (benchmarks/demo_retrieval.py): the model and random weights trained
# as embedders on a docstring's summary -> the rest of it (benchmarks/retrieval_task.py), DEMO_EMB_EPOCHS
# epochs, one seed, beside BM25 (docs/embeddings.md).
DEMO_EMB_EPOCHS ?= 2
DEMO_EMB = --task_type embedding --train $(D)/retrieval/train.jsonl --dev $(D)/retrieval/beir --test $(D)/retrieval/beir --seeds 1 --epochs $(call q,$(DEMO_EMB_EPOCHS))
PUSH_TO ?=  # e.g. hf://ORG/NAME: `make demo` then publishes the export (docs/publishing.md)
LOCAL_BEAM := --runner=FnApiRunner
# `make demo-multilingual`: Chinese, Japanese, Thai and English, whole-word masking (docs/languages.md)
DEMO_ML ?= runs/demo-multilingual
DEMO_ML_CHARS ?= 250000
DEMO_ML_STEPS ?= 60
DEMO_ML_VOCAB ?= 6000
DEMO_ML_MODEL ?= unigram
MASKING_STEPS ?= 4000
MASKING_VARIANTS ?= token:0.15,token:0.3,whole_word:0.15
M = $(call q,$(DEMO_ML))

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
TPU_SMOKE := tests/trainer/backends/test_tensorflow_strategy.py tests/trainer/pretraining/test_plan.py \
  tests/trainer/pretraining/test_task.py::test_eval_loss_falls_clearly \
  tests/trainer/pretraining/test_task.py::test_interrupted_run_resumes_where_it_stopped \
  tests/trainer/pretraining/test_preemption.py::test_torn_backups_fall_back_to_older_state_then_checkpoint \
  tests/trainer/release/test_export.py tests/trainer/startup/test_tpu_stack.py

# The JAX TPU stack: jax[tpu] with the libtpu it pins, keras, keras-hub, grain; no TensorFlow
# (docs/tpu.md). Its smoke tests run with KERAS_BACKEND=jax.
TPU_JAX_VENV := .venv-tpu-jax
TPU_JAX_PY := $(TPU_JAX_VENV)/bin/python
TPU_JAX_STAMP := $(TPU_JAX_VENV)/.installed
TPU_JAX_SMOKE := tests/trainer/startup/test_tpu_jax_stack.py tests/test_no_tensorflow_text.py \
  tests/trainer/pretraining/test_task.py::test_eval_loss_falls_clearly \
  tests/trainer/pretraining/test_task.py::test_interrupted_run_resumes_where_it_stopped \
  tests/trainer/release/test_export.py tests/trainer/startup/test_no_tensorflow.py
# keras-hub 0.32 declares tensorflow-text (hence TensorFlow) on Linux but imports it only in try
# blocks: installed without its dependencies, which the tpu-jax extra lists instead. pip check
# then names tensorflow-text as missing for keras-hub; any other line fails the build.
TPU_JAX_NO_DEPS := keras-hub keras-nlp
TPU_JAX_PIP_CHECK_OK := -e 'requires tensorflow-text, which is not installed' \
  -e '^No broken requirements found'

# `make train` installs and runs the stack of its backend.
ifeq ($(BACKEND),jax)
TRAIN_PY := $(TPU_JAX_PY)
TRAIN_STAMP := $(TPU_JAX_STAMP)
TRAIN_WHERE := --strategy tpu
else ifeq ($(BACKEND),tensorflow)
TRAIN_PY := $(TPU_PY)
TRAIN_STAMP := $(TPU_STAMP)
TRAIN_WHERE := --strategy tpu --tpu $(call q,$(TPU))
endif

.PHONY: venv venv-tpu venv-tpu-jax lint format test test-fast test-tpu test-tpu-tf test-tpu-jax demo demo-multilingual prepare train bench bench-prepare bench-near-dedup bench-train bench-quality bench-languages bench-model-filter bench-finetune bench-masking bench-accel accel-wheels clean

venv: $(STAMP)
$(STAMP): setup.py constraints.txt
	test -x $(PY) || $(call q,$(PYTHON)) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[trainer,test]"
	touch $(STAMP)

venv-tpu: $(TPU_STAMP)
$(TPU_STAMP): setup.py constraints-tpu.txt tpu/tensorflow-from-tpu/pyproject.toml
	test -x $(TPU_PY) || $(call q,$(PYTHON)) -m venv $(TPU_VENV)
	$(TPU_PY) -m pip install --quiet --upgrade pip
	$(TPU_PY) -m pip install --quiet -c constraints-tpu.txt ./tpu/tensorflow-from-tpu
	$(TPU_PY) -m pip install --quiet -c constraints-tpu.txt -e ".[tpu,test]"
	$(TPU_PY) -m pip check
	touch $(TPU_STAMP)

venv-tpu-jax: $(TPU_JAX_STAMP)
$(TPU_JAX_STAMP): setup.py constraints.txt constraints-tpu-jax.txt
	test -x $(TPU_JAX_PY) || $(call q,$(PYTHON)) -m venv $(TPU_JAX_VENV)
	$(TPU_JAX_PY) -m pip install --quiet --upgrade pip
	$(TPU_JAX_PY) -m pip install --quiet -c constraints-tpu-jax.txt -e ".[tpu-jax,test]"
	$(TPU_JAX_PY) -m pip install --quiet --no-deps -c constraints-tpu-jax.txt $(TPU_JAX_NO_DEPS)
	! $(TPU_JAX_PY) -m pip check | grep -v $(TPU_JAX_PIP_CHECK_OK)
	! $(TPU_JAX_PY) -c 'import tensorflow' 2>/dev/null
	touch $(TPU_JAX_STAMP)

# The trainer's tests run twice: on TensorFlow (with everything else), then on JAX.
# Style is the formatter's and the linter's (ruff, settings in pyproject.toml): `make format`
# rewrites, `make lint` checks (the first step of `make test` and `make test-fast`).
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# JAX compiles the same tiny programs in many tests and their child processes: `make test` gives
# them one persistent compilation cache, emptied at its start, so a program compiles once per
# run (its key is the program, the compile options, the devices and the versions; numbers
# in docs/development.md). Users' runs do not set it.
TEST_JAX_CACHE := $(CURDIR)/.test-cache/jax
JAX_CACHE_ENV = JAX_COMPILATION_CACHE_DIR=$(call q,$(TEST_JAX_CACHE)) JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
  JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0

test: $(STAMP) lint
	rm -rf $(call q,$(TEST_JAX_CACHE)) && mkdir -p $(call q,$(TEST_JAX_CACHE))
	$(JAX_CACHE_ENV) $(PY) -m pytest tests -q -p no:cacheprovider --durations=15 $(XDIST)
	KERAS_BACKEND=jax $(JAX_CACHE_ENV) $(PY) -m pytest tests/trainer -q -p no:cacheprovider \
	  --durations=15 $(XDIST)

# The fast lane while editing: every module's unit tests, without the long runs marked
# `@pytest.mark.slow` (fault loops, pods, end to end, gs://; tests/conftest.py), which `make test`
# and CI still run. Times in docs/development.md.
test-fast: $(STAMP) lint
	$(PY) -m pytest tests -q -p no:cacheprovider --strict-markers -m 'not slow' --durations=10 $(XDIST)
	KERAS_BACKEND=jax $(PY) -m pytest tests/trainer/backends/test_jax_backend.py -q -p no:cacheprovider \
	  --strict-markers -m 'not slow'

# Off a TPU VM libtpu would query the cloud metadata server at import: TPU_SKIP_MDS_QUERY
# stops that, and the tests run without a network (unshare -n, loopback only) to prove it.
# libtpu also takes a machine-wide lock (/tmp/libtpu_lockfile) at load: with the two stacks
# side by side (CI) the second would fail to load and fall back to the CPU unchecked, so the
# smokes allow concurrent loads (harmless with no TPU to share).
TPU_ENV := TPU_SKIP_MDS_QUERY=1 ALLOW_MULTIPLE_LIBTPU_LOAD=1

test-tpu: test-tpu-tf test-tpu-jax

test-tpu-tf: $(TPU_STAMP)
	$(TPU_ENV) bash tpu/offline.sh $(TPU_PY) -m pytest $(TPU_SMOKE) -q -p no:cacheprovider \
	  --capture=sys

test-tpu-jax: $(TPU_JAX_STAMP)
	KERAS_BACKEND=jax $(TPU_ENV) bash tpu/offline.sh $(TPU_JAX_PY) -m pytest $(TPU_JAX_SMOKE) \
	  -q -p no:cacheprovider --capture=sys

demo: $(STAMP)
	@mkdir -p $(D)
	test -s $(D)/corpus.jsonl || $(PY) -m beam_pipelines.demo_corpus --output $(D)/corpus.jsonl --max_mb $(call q,$(DEMO_CORPUS_MB))
	test -s $(DT)/tokenizer.json || $(PY) -m beam_pipelines.train_tokenizer --input $(D)/corpus.jsonl --output_dir $(DT) --model unigram --vocab_size $(call q,$(DEMO_VOCAB))
	$(PY) -m beam_pipelines.prepare $(LOCAL_BEAM) --input $(D)/corpus.jsonl --tokenizer $(DT) --output_dir $(D)/prepared --max_length $(call q,$(DEMO_LENGTH)) --validation_fraction 0.02
	rm -rf $(D)/train $(D)/export
	$(PY) -m trainer.task --train_data $(D)/prepared/train --eval_data $(D)/prepared/validation --tokenizer $(DT) --output_dir $(D)/train --family $(call q,$(DEMO_FAMILY)) --model tiny --config '{"dropout": 0.0}' --strategy cpu --per_replica_batch_size 32 --train_steps $(call q,$(DEMO_STEPS)) --learning_rate 3e-3 --warmup_ratio 0.1 --masking $(call q,$(DEMO_MASKING)) --eval_every 500 --save_every 500 --max_eval_batches 20 --verbose 2
	$(PY) -m trainer.export --checkpoint $(D)/train --output_dir $(D)/export --format all --language en $(if $(PUSH_TO),--push_to $(call q,$(PUSH_TO)))
	$(PY) -m trainer.plot --run_dir $(D)/train --output $(D)/train/curves.png
	$(PY) -m trainer.fill_mask_demo --model $(D)/export/keras-hub --corpus $(D)/corpus.jsonl --validation_fraction 0.02 --num 10
	$(PY) -m trainer.baseline --run_dir $(D)/train
	$(PY) -m benchmarks.demo_task build --corpus $(D)/corpus.jsonl --output_dir $(D)/task --budget $(call q,$(DEMO_FT_BUDGET))
	$(PY) -m trainer.finetune --model $(D)/train --train $(D)/task/train-$(call q,$(DEMO_FT_BUDGET)).jsonl $(DEMO_FT) --output_dir $(D)/finetune/pretrained-few
	$(PY) -m trainer.finetune --model $(D)/train --train $(D)/task/train-$(call q,$(DEMO_FT_BUDGET)).jsonl $(DEMO_FT) --output_dir $(D)/finetune/scratch-few --from_scratch
	$(PY) -m trainer.finetune --model $(D)/train --train $(D)/task/train.jsonl $(DEMO_FT) --epochs $(call q,$(DEMO_FT_EPOCHS)) --output_dir $(D)/finetune/pretrained-all
	$(PY) -m trainer.finetune --model $(D)/train --train $(D)/task/train.jsonl $(DEMO_FT) --epochs $(call q,$(DEMO_FT_EPOCHS)) --output_dir $(D)/finetune/scratch-all --from_scratch
	$(PY) -m benchmarks.demo_task report --finetune_dir $(D)/finetune --budgets few,all --output $(D)/finetune/downstream.txt
	$(PY) -m benchmarks.retrieval_task docstrings --corpus $(D)/corpus.jsonl --output_dir $(D)/retrieval --max_train 1000 --max_queries 100 --max_corpus 1500
	$(PY) -m trainer.finetune --model $(D)/train $(DEMO_EMB) --output_dir $(D)/embed/pretrained
	$(PY) -m trainer.finetune --model $(D)/train $(DEMO_EMB) --output_dir $(D)/embed/scratch --from_scratch
	$(PY) -m benchmarks.demo_retrieval --embed_dir $(D)/embed --output $(D)/embed/retrieval.txt
	@echo; echo "Demo outputs (a second run reuses corpus and tokenizer, replaces the rest):"
	@echo "  corpus            "$(D)"/corpus.jsonl"
	@echo "  tokenizer         "$(DT)"/"
	@echo "  prepared shards   "$(D)"/prepared/{train,validation}/ (manifest.json, dead_letter/)"
	@echo "  training run      "$(D)"/train/ (metrics.json, history.json, logs/ for TensorBoard, checkpoints/)"
	@echo "  curves            "$(D)"/train/curves.png"
	@echo "  exports           "$(D)"/export/keras-hub/ and "$(D)"/export/hf/"
	@echo "  model cards       "$(D)"/export/keras-hub/README.md and "$(D)"/export/hf/README.md"
	@echo "  downstream task   "$(D)"/task/{train,train-N,dev}.jsonl (which package a docstring came from)"
	@echo "  fine-tunes        "$(D)"/finetune/{pretrained,scratch}-{few,all}/results.json"
	@echo "  final metrics     $$(cat $(D)/train/metrics.json | tr -d '\n ')"
	@echo "  embedders         "$(D)"/embed/{pretrained,scratch}/ (results.json, sentence-transformers/)"
	@echo "$$(sed 's/^/  /' $(D)/finetune/downstream.txt)"
	@echo "$$(sed 's/^/  /' $(D)/embed/retrieval.txt)"

# A few minutes on 2 cores: corpus, tokenizer, prepare, a tiny model a few dozen steps with
# whole-word masking, then per language the tokenizer's figures and the run's metrics.
demo-multilingual: $(STAMP)
	@mkdir -p $(M)
	$(PY) -m benchmarks.demo_multilingual corpus --output $(M)/corpus.jsonl --chars $(call q,$(DEMO_ML_CHARS))
	$(PY) -m beam_pipelines.train_tokenizer --input $(M)/corpus.jsonl --output_dir $(M)/tokenizer --model $(call q,$(DEMO_ML_MODEL)) --vocab_size $(call q,$(DEMO_ML_VOCAB)) --progress_seconds 0
	$(PY) -m beam_pipelines.prepare $(LOCAL_BEAM) --input $(M)/corpus.jsonl --tokenizer $(M)/tokenizer --output_dir $(M)/prepared --max_length $(call q,$(DEMO_LENGTH)) --validation_fraction 0.05
	rm -rf $(M)/train
	$(PY) -m trainer.task --train_data $(M)/prepared/train --eval_data $(M)/prepared/validation --tokenizer $(M)/tokenizer --output_dir $(M)/train --model tiny --config '{"dropout": 0.0}' --strategy cpu --per_replica_batch_size 32 --train_steps $(call q,$(DEMO_ML_STEPS)) --learning_rate 3e-3 --warmup_ratio 0.1 --masking whole_word --eval_every $(call q,$(DEMO_ML_STEPS)) --save_every $(call q,$(DEMO_ML_STEPS)) --max_eval_batches 20 --verbose 2
	$(PY) -m benchmarks.demo_multilingual report --corpus $(M)/corpus.jsonl --tokenizer $(M)/tokenizer --run_dir $(M)/train

prepare: $(STAMP)
	@test -n $(call q,$(PROJECT)) -a -n $(call q,$(BUCKET)) || { echo "usage: make prepare PROJECT=... REGION=... BUCKET=... [INPUT=gs://... TOKENIZER=gs://... DATA=gs://...]"; exit 2; }
	$(PY) -m beam_pipelines.prepare --runner DataflowRunner --project $(call q,$(PROJECT)) --region $(call q,$(REGION)) \
	  --temp_location $(call q,gs://$(BUCKET)/dataflow/tmp) --staging_location $(call q,gs://$(BUCKET)/dataflow/staging) \
	  --setup_file ./setup.py --max_num_workers $(call q,$(MAX_WORKERS)) --experiments=use_runner_v2 \
	  --input $(call q,$(INPUT)) --tokenizer $(call q,$(TOKENIZER)) --output_dir $(call q,$(DATA)) --max_length $(call q,$(MAX_LENGTH)) \
	  --validation_fraction 0.005 $(call qwords,$(ARGS))

# KERAS_BACKEND in the recipe's environment wins over the exported default above.
train: $(TRAIN_STAMP)
	@case $(call q,$(BACKEND)) in jax|tensorflow) ;; *) echo "make train: BACKEND must be jax or tensorflow, not "$(call q,'$(BACKEND)'); exit 2;; esac
	@test -n $(call q,$(DATA)) -a -n $(call q,$(OUTPUT)) || { echo "usage: make train [BACKEND=jax|tensorflow] [TPU=local] DATA=gs://.../prepared OUTPUT=gs://.../runs/NAME [TOKENIZER=...] (or BUCKET=...)"; exit 2; }
	KERAS_BACKEND=$(call q,$(BACKEND)) $(TRAIN_PY) -m trainer.task --backend $(call q,$(BACKEND)) $(TRAIN_WHERE) --train_data $(call q,$(DATA)/train) --eval_data $(call q,$(DATA)/validation) \
	  $(if $(TOKENIZER),--tokenizer $(call q,$(TOKENIZER))) --output_dir $(call q,$(OUTPUT)) --model $(call q,$(MODEL)) \
	  --per_replica_batch_size $(call q,$(BATCH)) --train_steps $(call q,$(STEPS)) --precision bf16 $(call qwords,$(ARGS))

bench: bench-prepare bench-near-dedup bench-train bench-quality bench-languages bench-model-filter

bench-prepare: $(STAMP)
	$(PY) -m benchmarks.bench_prepare --corpus_mb 60

# Near dedup per language, old and new shingles side by side (figures in docs/languages.md).
bench-near-dedup: $(STAMP)
	$(PY) -m benchmarks.bench_near_dedup

# Both backends side by side (one child process each), figures in docs/jax.md.
bench-train: $(STAMP)
	$(PY) -m benchmarks.bench_train --backends tensorflow,jax

# Fine-tuning examples/s: the demo's model in trainer.finetune (TensorFlow, JAX) beside its HF
# export in PyTorch, same batch and length (figures in docs/benchmarks.md). Needs `make demo`'s run.
bench-finetune: $(STAMP)
	$(PY) -m benchmarks.bench_finetune --model $(D)/train

# The masking study (docs/finetuning.md, "Masking recipe, measured"): every MASKING_VARIANTS
# variant pretrained MASKING_STEPS steps with the demo's recipe, then fine-tuned on the demo's
# task with 2 seeds; table in $(DEMO)/masking/table.md. Needs `make demo`'s data (~6 min a variant).
bench-masking: $(STAMP)
	$(PY) -m benchmarks.masking_study --data $(D)/prepared --tokenizer $(DT) --task $(D)/task --output_dir $(D)/masking --steps $(call q,$(MASKING_STEPS)) --variants $(call q,$(MASKING_VARIANTS))

# Our trainer beside transformers' RobertaForMaskedLM in PyTorch: tokens/s, TFLOP/s and MFU on
# an accelerator (base, large at 128 and 512), GFLOP/s against the float32 matmul peak on a CPU
# (docs/benchmarks.md "On the GPU machine"). ARGS='--quick', '--cpu', '--configs base/128' ...
bench-accel: $(STAMP)
	$(PY) -m benchmarks.bench_accel $(call qwords,$(ARGS))

# The cp312 wheels the GPU machine lacks, into .accel-wheels/ (git-ignored, size printed and
# checked), then the one command line the device's `run` tool takes (carry: .accel-wheels).
accel-wheels: $(STAMP)
	$(PY) -m benchmarks.accel_wheels download
	$(PY) -m benchmarks.accel_wheels command

# The quality filter per language on the translated text this machine ships (docs/languages.md).
bench-quality: $(STAMP)
	$(PY) -m benchmarks.bench_quality

# The model-based quality filter: documents/s per core and core-hours per TB for a fastText and
# transformers classifiers, alone and through RunInference (figures in docs/prepare.md).
bench-model-filter: $(STAMP)
	$(PY) -m benchmarks.bench_model_filter

# Tokenizers and whole-word masking per script, figures in docs/languages.md.
bench-languages: $(STAMP)
	$(PY) -m benchmarks.bench_languages

clean:
	rm -rf runs bench_out
