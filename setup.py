"""Installs `common`, `beam_pipelines` and `trainer`.

This file is also the `--setup_file` that Dataflow workers install: `install_requires` is
exactly what the prepare pipeline needs on a worker (no TensorFlow: records are encoded by
common/schema.py). The trainer, tests and export check come as extras. Versions verified
together are pinned in constraints.txt (`pip install -c constraints.txt ...`).
"""

import setuptools

# The trainer on any stack, but keras-hub (below).
_TRAINER_BASE = [
    "keras==3.15.1",
    "transformers==5.23.0",
    "safetensors==0.8.0",
    "matplotlib==3.11.2",
    # The JAX backend's input pipeline (Keras' JAX `fit` takes grain datasets; TensorFlow-free).
    "grain==0.2.18",
]
_KERAS_HUB = [
    "keras-hub==0.32.0",
    "keras-nlp==0.32.0",  # the name on the design card: a one-file alias of keras-hub 0.32
]
_TRAINER = _TRAINER_BASE + _KERAS_HUB
# keras-hub 0.32.0's own requirements but tensorflow-text, which it declares for Linux yet imports
# only inside try blocks: the JAX TPU stack installs keras-hub with --no-deps (Makefile
# venv-tpu-jax) and these instead (versions: constraints.txt).
_KERAS_HUB_NEEDS = [
    "absl-py",
    "numpy",
    "packaging",
    "regex",
    "rich",
    "kagglehub",
    "kagglesdk==0.1.28",
    "sentencepiece",
    "tokenizers",
]

setuptools.setup(
    name="mlm-pretrain",
    version="0.1.0",
    description="Masked-language-model pretraining: Beam data pipelines and a Keras/TPU trainer",
    python_requires=">=3.11",  # numpy 2.4 (constraints.txt) needs it
    packages=setuptools.find_packages(
        include=["common", "common.*", "beam_pipelines", "beam_pipelines.*", "trainer", "trainer.*"]
    ),
    install_requires=[
        "apache-beam[gcp]==2.77.0",
        "tokenizers==0.23.3",
        "datasets==5.2.0",
        "numpy>=1.26",
        "orjson>=3.10",  # fast JSONL parsing (already a dependency of apache-beam[gcp])
        # Model/tokenizer cards and --push_to (already a dependency of datasets).
        "huggingface_hub==2.4.0",
        # Beam's launcher stages --setup_file with `python -m build` (else it prints "No
        # module named build" and falls back to the deprecated `setup.py sdist`).
        "build==1.6.1",
        # The model-based quality filter's fastText kind (beam_pipelines/quality_models.py): a
        # maintained build of fastText 0.9 for numpy 2 (fasttext 0.9.3 itself is source only
        # and its predict fails under numpy 2); numpy is its only dependency.
        "fasttext-numpy2==0.10.4",
    ],
    extras_require={
        "trainer": [
            *_TRAINER,
            "tensorflow==2.21.0",
            "tensorflow-text==2.21.1",
            "tensorboard==2.21.0",
            # The JAX backend (--backend jax), on the CPU here; jax needs scipy.
            "jax[cpu]==0.10.2",
            "scipy==1.17.1",
            # Retrieval evaluation's BM25 floor (trainer/tasks/retrieval/bm25.py); numpy only.
            "bm25s==0.3.16",
            # Entity-level F1 of token classification (trainer/tasks/entity_f1.py): conlleval's
            # and strict BIOES counting, as Hugging Face's NER examples score; brings scikit-learn.
            "seqeval==1.2.2",
        ],
        # The JAX TPU stack (make venv-tpu-jax): JAX drives the TPU through the libtpu that
        # jax[tpu] pins; grain feeds batches; no TensorFlow. keras-hub and keras-nlp come
        # after this extra, with --no-deps (_KERAS_HUB_NEEDS). docs/tpu.md.
        "tpu-jax": [
            *_TRAINER_BASE,
            *_KERAS_HUB_NEEDS,
            "tensorboard==2.21.0",  # the viewer, and the protos of trainer/training/summaries.py
            "jax[tpu]==0.10.2",
            "scipy==1.17.1",
        ],
        # Install tpu/tensorflow-from-tpu first (see `make venv-tpu`): tensorflow-text
        # requires a `tensorflow` distribution, which tensorflow-tpu is not.
        "tpu": [
            *_TRAINER,
            "tensorflow-tpu==2.20.0",
            "libtpu==0.0.14",  # what tensorflow-tpu 2.20.0 is built against (~=0.0.14)
            "tensorflow-text==2.20.1",
            "tensorboard==2.20.0",
        ],
        "test": [
            "pytest==9.2.0",
            "pytest-xdist==3.8.0",  # make test: TEST_WORKERS processes (CI: 2 cores)
            "ruff==0.17.6",  # make lint (run by make test): style by a tool (pyproject.toml)
            "gcp-storage-emulator==2026.7.19",
            "transformers==5.23.0",
            "torch==2.13.0",  # CPU build from the machine's disk: the HF export round-trip test
            # Loads the sentence-transformers export as users do (scikit-learn comes with it).
            "sentence-transformers==6.3.0",
        ],
    },
)
