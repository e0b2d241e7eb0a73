"""The family's keras-hub TextClassifier on a pretrained backbone, or on fresh weights.

The pretrained backbone is read once (any layout `trainer.models.model_source.resolve` accepts);
each seed then builds a new backbone from the same config and copies those weights in, so
seeds do not share state. `--from_scratch` builds the same architecture and skips the copy:
the reference that shows what pretraining bought. The head (keras-hub's: pooled first token,
dropout, dense; `pooling="mean"`: the same head on the mean of the tokens) starts at random
either way; `preprocessor=None`, since `packing` feeds ids.

Example:
    >>> backbone = PretrainedBackbone(model_source.resolve("runs/tiny"))
    >>> model = backbone.classifier(num_outputs=3, seed=1)
"""

from __future__ import annotations

import copy

import keras

from common.errors import UserError
from trainer.models import model, model_source, pooling
from trainer.tasks import task_kinds
from trainer.training.optimizer import AdamWSettings, build_optimizer

# Classifier dropout, as BERT and RoBERTa fine-tune (keras-hub's RoBERTa head defaults to 0).
HEAD_DROPOUT = 0.1


class PretrainedBackbone:
    """The pretrained weights of one model, ready to start each seed's classifier."""

    def __init__(
        self, source: model_source.ModelSource, from_scratch: bool = False, pooling: str = "cls"
    ):
        self.source = source
        self.pooling = pooling  # what the head reads: trainer/models/pooling.py
        self.family = source.family
        if not self.family.classifier_class:
            raise UserError(
                f"{source.path} is a {self.family.name} model, which has no classifier to "
                "fine-tune yet (keras-hub has none); export it (python -m trainer.export "
                "--format hf) and fine-tune it with transformers."
            )
        # One text per row (a literal `<s>` in it opens no second document), as transformers
        # computes the export.
        self.config = self.family.one_document_per_row(source.record.backbone_config)
        self.from_scratch = from_scratch
        # Read even from scratch: a model path that does not load is an error either way.
        masked_lm = model_source.load_source(source)
        self.weights = masked_lm.backbone.get_weights()
        self.parameters = masked_lm.backbone.count_params()
        self.vocabulary_size = int(self.config["vocabulary_size"])

    def check_tokenizer(self, info) -> None:
        """The tokenizer's ids must fit the model's embedding table."""
        trained = self.source.record.tokenizer.get("fingerprint")
        if trained and trained != info.fingerprint:
            raise UserError(
                f"{self.source.tokenizer_dir} is not the tokenizer the model was "
                f"trained with (fingerprint {info.fingerprint[:12]} != "
                f"{trained[:12]})"
            )
        if info.vocab_size > self.vocabulary_size:
            raise UserError(
                f"the tokenizer has {info.vocab_size} tokens but the model only "
                f"{self.vocabulary_size} embeddings"
            )

    def started_from(self, weights: list) -> PretrainedBackbone:
        """The same model starting from other backbone weights (MNLI's fine-tuned ones)."""
        other = copy.copy(self)
        other.weights, other.from_scratch = weights, False
        return other

    def classifier(
        self, num_outputs: int, seed: int, precision: str = "fp32", fused_attention: bool = False
    ):
        """A new classifier (`num_outputs` logits; 1 for regression) seeded with `seed`, with
        the devices' settings (`trainer.backends.devices.DeviceSettings`, as pretraining builds its
        model): the backbone in `precision`, the head in float32, attention without its dropout when
        `fused_attention`."""
        keras.utils.set_random_seed(seed)
        # The policy passed, not set process-wide: nothing else built later inherits it.
        backbone = model.build_backbone(self.family, self.config, model.dtype_policy(precision))
        if not self.from_scratch:
            backbone.set_weights(self.weights)
        classifier = self.family.classifier_cls()(
            backbone=backbone, num_classes=num_outputs, preprocessor=None, dropout=HEAD_DROPOUT
        )
        if self.pooling == "mean":
            classifier = pooling.mean_pooled(classifier)
        float32_head(classifier)
        if fused_attention:
            model.fuse_attention(classifier)
        return classifier


def float32_head(classifier) -> None:
    """Makes every layer of the classifier outside the backbone compute in float32 (a no-op
    in float32). keras-hub's TextClassifier builds its head (pooled dense, dropout, logits)
    in the backbone's dtype policy, so under mixed_bfloat16 the logits, and the loss from
    them, would carry bf16's 8 bits of mantissa; Keras' advice for mixed precision is a
    float32 last layer. The head is small (hidden x hidden, hidden x classes per example):
    float32 costs nothing measurable, as the LM head's fix does not for pretraining's far
    larger projection (trainer/models/model.py bf16_lm_head). Each layer's compute dtype is read at
    call time, so the built model follows; its inputs are cast to float32 there."""
    for layer in classifier.layers:
        if layer is not classifier.backbone and not isinstance(layer, keras.layers.InputLayer):
            layer.dtype_policy = "float32"


def compile_for(
    model,
    task_type: str,
    learning_rate: float,
    total_steps: int,
    warmup_steps: int,
    weight_decay: float,
    jit_compile: bool,
) -> None:
    """AdamW with linear warmup and linear decay to 0 (`trainer.training.optimizer`);
    cross-entropy on logits for classification, mean squared error for regression."""
    optimizer = build_optimizer(
        learning_rate, total_steps, warmup_steps, AdamWSettings(weight_decay=weight_decay)
    )
    # Divided by the sum of the sample weights, not the rows: the rows that pad a batch for
    # the replicas (protocol.padded) weigh 0 and must not shrink the loss of the real ones.
    reduction = "mean_with_sample_weight"
    loss = task_kinds.get(task_type).loss(reduction)
    model.compile(optimizer=optimizer, loss=loss, jit_compile=jit_compile)


def jit_default(choice: str, xla_here: bool = True) -> bool:
    """`auto`: XLA where an accelerator is visible, and always on JAX (whose un-jitted step
    is slower still); not for TensorFlow on a CPU, where compiling a short fine-tune's step
    cost 27 s against 2.3 s for the whole first epoch without it (tiny model, this CPU).
    `xla_here`: whether the devices can run a compiled step at all (the trainer's
    `runtime.device.jit` at `auto`): not under MirroredStrategy over CPU devices (keras#19005)."""
    if not xla_here:
        if choice == "true":
            raise UserError(
                "--jit_compile true cannot run on these devices (MirroredStrategy over CPU "
                "devices fails in Keras, keras#19005; or no XLA for this CPU): drop it"
            )
        return False
    if choice != "auto":
        return choice == "true"
    if keras.backend.backend() == "jax":
        return True
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"))
