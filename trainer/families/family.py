"""The record that describes one model family (trainer/families/ registers one per module)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping

import trainer.families.flops as flops
from trainer.families.recipe_flags import DEFAULTS as RECIPE_DEFAULTS
from trainer.families.recipe_flags import check as check_recipe

# The backbone arguments the trainer sets for every family, and from what (a record's
# `set_by_trainer` starts from these).
SET_BY_TRAINER = {
    "vocabulary_size": "the tokenizer",
    "max_sequence_length": "the data",
    "dtype": "--precision",
}


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    backbone_class: str  # keras_hub.models.<name>
    task_class: str  # the MaskedLM task in keras_hub.models
    registered_name: str  # a preset's config.json "registered_name"
    takes_segment_ids: bool
    hf_config: Callable  # (backbone_config: dict, special_token_ids: dict) -> transformers config
    weight_rows: tuple  # (keras-hub path, transformers name, transform): embeddings and head
    hf_prefix: str  # the transformers base-model attribute ("roberta", "bert")
    backbone_config_of: Callable  # the inverse of hf_config: (config.json dict) -> backbone args
    # The TextClassifier task (fine-tuning); "" where there is none yet: refused in one line.
    classifier_class: str
    # The weight rows of one encoder layer ({i}: the layer, {m}: hf_prefix), or a function
    # of the layer index where layers differ (ModernBERT's first has no attention norm).
    layer_rows: tuple | Callable[[int], tuple]
    hf_masked_lm_class: str  # transformers' masked-LM class
    # transformers checkpoints that duplicate the tied LM decoder: {copy: the tensor it equals}.
    tied: Mapping[str, str]
    # Tensor-name prefixes of heads that are not part of a masked LM (a pooler, BERT's
    # next-sentence head): transformers' own *ForMaskedLM drops them on loading, as we do.
    not_mlm: tuple[str, ...]
    # The transformers checkpoint that keras-hub converted its presets of this family from
    # (named when a keras-hub preset holds no masked-LM head).
    hub_checkpoint: str
    # Its vocabulary (config.json vocab_size): what a benchmark builds the family's published
    # shape with (benchmarks/accel/).
    hub_vocabulary: int
    # The keras-hub tokenizer class (a preset's tokenizer.json "registered_name") and the
    # `tokenizers` model kind it converts to (trainer/models/keras_hub_presets.py); () for none.
    preset_tokenizer: tuple[str, str] | tuple[()]
    # Separator tokens between the two texts of a pair: `<s> A </s></s> B </s>` (RoBERTa)
    # or `[CLS] A [SEP] B [SEP]` (BERT).
    pair_separators: int
    # How positions enter the model: "absolute" (a learned table of `max_sequence_length`
    # rows, the most a model can read) or "rotary" (no table).
    positions: str
    # Rows that the transformers position table holds before position 0 (`pad_id + 1` for
    # RoBERTa, which numbers positions after the pad id); False where there are none.
    hf_positions_after_pad: bool
    # Names of transformers configs (the legacy `--pretrained_model_config`) -> our size.
    legacy_configs: Mapping[str, str]
    # Backbone arguments the trainer fills in itself -> from what ("the tokenizer"): --config
    # may not give them (trainer/models/model.py refuses each in one line).
    set_by_trainer: Mapping[str, str]
    # Fields of the transformers config that change what the model computes: a config that
    # --init_from reads must say of each what `hf_config` writes for the backbone it converts
    # to (trainer/models/init_from.py), else the logits would differ.
    hf_computed: tuple[str, ...]
    # The feed-forward activation keras-hub hard-codes in the backbone's encoder layers
    # (trainer/families/activation.py sets another when a checkpoint needs it).
    activation: str = "gelu"
    models_module: str = "keras_hub.models"  # where the backbone and task classes live
    sizes: Mapping[str, Mapping] | None = None  # named shapes; None: trainer/families/sizes.py
    dropout: float = 0.1  # the backbone's dropout when pretraining from scratch
    # Backbone arguments taken from the tokenizer's special-token ids (role -> id).
    token_args: Callable[[dict], dict] = lambda ids: {}  # noqa: E731
    # Backbone arguments that only pretraining's packed rows use (ModernBERT's document
    # separator): a model that reads one text per row (fine-tuning, predict, the exports) has
    # them None, as transformers computes it, so a literal `<s>` in a text splits nothing.
    packed_rows_only: tuple[str, ...] = ()
    # Where the backbone can read several fine-tuning examples in one row (ModernBERT's
    # document masks): (backbone, token_ids, example_ids, positions, training) -> its final
    # hidden states (trainer/finetuning/packed_rows.py lays the rows out); None elsewhere.
    packed_states: Callable | None = None
    # True where the backbone picks its own attention kernel (no Keras MultiHeadAttention
    # whose dropout `trainer.models.model.fuse_attention` drops to reach the fused kernel).
    own_attention: bool = False
    # True where the embedding may hold more rows than the tokenizer has tokens (ModernBERT
    # pads its vocabulary to a multiple of 64; the spare rows are never an input).
    spare_embeddings: bool = False
    # Backbone arguments a --extend_context restart may change besides the sequence length
    # (trainer/pretraining/context_extension.py); () where the family cannot be extended.
    context_extension_args: tuple[str, ...] = ()
    # The bounds of the backbone arguments the family adds to the shared `Shape`
    # (trainer/families/sizes.py): a dataclass of `common.flags.flag` fields, one for each
    # argument that changes what the model computes. trainer/models/model.py checks them with
    # `Shape`'s on --config and on the config of a transformers folder --init_from reads.
    argument_bounds: type | None = None
    # What bounds cannot say, checked with them: (backbone arguments given) -> one sentence
    # about arguments that do not fit together, or None.
    config_rule: Callable[[dict], str | None] = lambda config: None  # noqa: E731
    # Before a run builds its model: (backbone config, the data's sequence length) -> one
    # sentence on why it cannot train on this machine (a kernel that needs a TPU), or None.
    device_rule: Callable[[dict, int], str | None] = lambda config, length: None  # noqa: E731
    # Model FLOPs (`flops_per_token`): True where the feed-forward is gated (GeGLU: its input
    # projection is hidden x 2 intermediate, the input and its gate), False for one
    # hidden x intermediate projection.
    gated_feed_forward: bool = False
    # (backbone config) -> per layer, the band of keys a local layer attends (|i - j| <=
    # band // 2), None for a layer that attends the whole row.
    attention_windows: Callable[[dict], tuple] = lambda c: (None,) * c["num_layers"]  # noqa: E731
    # Backbone arguments that keep a backbone which picks its own attention kernel
    # (`own_attention`) on the portable path, where --fused_attention false cannot.
    portable_attention: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def fits_tokenizer(self, backbone_config: dict, tokens: int) -> bool:
        """Whether a tokenizer of `tokens` ids can drive the model's embedding."""
        rows = backbone_config["vocabulary_size"]
        return tokens <= rows if self.spare_embeddings else tokens == rows

    # Defaults of pretraining flags this family trains best with (its published recipe), e.g.
    # {"mlm_probability": 0.3, "schedule": "wsd"}: only flags of trainer/families/recipe_flags.py;
    # trainer/pretraining/pretrain_recipe.py applies them where the command line and the resumed
    # run leave a flag open.
    pretraining_recipe: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        check_recipe(self.name, self.pretraining_recipe)

    def recipe_value(self, flag: str):
        """The pretraining default of `flag` for this family: its recipe's, else the
        trainer's (trainer/families/recipe_flags.py); a run's flags may still change it."""
        return self.pretraining_recipe.get(flag, RECIPE_DEFAULTS[flag])

    def flops_per_token(self, backbone_config: dict, length: int, mask_rate=None) -> float:
        """Model FLOPs of one token in one training step at sequence `length`
        (trainer/families/flops.py); `mask_rate`: the share of tokens the LM head scores,
        by default the family's recipe's."""
        rate = self.recipe_value("mlm_probability") if mask_rate is None else mask_rate
        return flops.per_token(self, backbone_config, length, rate)

    def weight_table(self, num_layers: int) -> list[tuple]:
        """The mapping rows of one model, with layer indices and prefixes filled in."""
        layers = [
            (k.format(i=i), h.format(i=i, m=self.hf_prefix), t)
            for i in range(num_layers)
            for k, h, t in (self.layer_rows(i) if callable(self.layer_rows) else self.layer_rows)
        ]
        return list(self.weight_rows) + layers

    def one_document_per_row(self, backbone_config: dict) -> dict:
        """`backbone_config` for a model that reads one text per row (`packed_rows_only`)."""
        return {**backbone_config, **dict.fromkeys(self.packed_rows_only)}

    def max_positions(self, backbone_config: dict) -> int | None:
        """The longest sequence the model can read; None where positions are unbounded."""
        length = backbone_config.get("max_sequence_length")
        return int(length) if self.positions == "absolute" and length is not None else None

    def build_length(self, backbone_config: dict) -> int:
        """Tokens of the one-row batch that builds a model's weights: any length builds them;
        where positions are unbounded, 128 (a block of every fused attention kernel, which
        one token is not, and one token would be a softmax over a single key: Keras warns)."""
        return self.max_positions(backbone_config) or 128

    def _class(self, name: str):
        return getattr(importlib.import_module(self.models_module), name)

    def backbone_cls(self):
        return self._class(self.backbone_class)

    def backbone_args(self) -> tuple[str, ...]:
        """The named arguments of the backbone's constructor (its `**kwargs` are Keras layer
        options such as `name`, not model configuration)."""
        parameters = inspect.signature(self.backbone_cls().__init__).parameters.values()
        return tuple(
            p.name
            for p in parameters
            if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        )

    def classifier_cls(self):
        return self._class(self.classifier_class)

    def task_cls(self):
        return self._class(self.task_class)

    def task_registered_name(self) -> str:
        """The name Keras registers the masked-LM task under: what a preset's task.json names
        (`keras_hub>RobertaMaskedLM`; ours, `mlm_pretrain>ModernBertMaskedLM`)."""
        import keras

        return keras.saving.get_registered_name(self.task_cls())

    def inputs(self, token_ids, padding_mask, mask_positions, zeros_like) -> dict:
        """The keras-hub MaskedLM input dict (one segment for MLM-only pretraining)."""
        features = {
            "token_ids": token_ids,
            "padding_mask": padding_mask,
            "mask_positions": mask_positions,
        }
        if self.takes_segment_ids:
            features["segment_ids"] = zeros_like(token_ids)
        return features
