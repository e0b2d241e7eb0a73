"""Model families and named sizes: keras-hub backbones built from config, from scratch.

Each function takes the family's record (`trainer.families.Family`), looked up once where a
name enters: the flags, a saved run (`trainer.run_folder.run_record`), a checkpoint's config.

Example:
    >>> roberta = families.get("roberta")
    >>> config = backbone_config(roberta, "tiny", vocabulary_size=1000, max_sequence_length=128)
    >>> masked_lm = build_masked_lm(roberta, config)   # keras_hub.models.RobertaMaskedLM
"""

from __future__ import annotations

import difflib
import json
import types

from common import flags
from common.errors import UserError
from trainer import families
from trainer.families import activation
from trainer.families.family import Family
from trainer.families.sizes import SIZES, Shape

# JSON types of the flag types a backbone argument may have, as an error names them.
_JSON_TYPES = {
    "int": ((int,), "a JSON number without a fraction"),
    "float": ((int, float), "a JSON number"),
    "str": ((str,), "a JSON string"),
}


def check_overrides(family: Family, size: str, overrides) -> None:
    """Raises ValueError (one sentence) unless `overrides` (--config) is a JSON object of
    arguments that the family's backbone takes, each of its type and within its bounds
    (`Shape`'s and the family's `argument_bounds`), that fit together by the family's rule
    and into whole attention heads (the transformers export needs them)."""
    if overrides is None:
        return
    if not isinstance(overrides, dict):
        raise ValueError(
            f"--config must be a JSON object such as '{{\"num_layers\": 2}}', "
            f"not {json.dumps(overrides)}"
        )
    takes = family.backbone_args()
    for key in overrides:
        if key in family.set_by_trainer:  # the record says which, and from what
            source = family.set_by_trainer[key]
            raise ValueError(f"--config {key!r}: the trainer sets it from {source}")
        if key not in takes:
            close = difflib.get_close_matches(key, takes, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"--config {key!r} is not an argument of keras_hub.models."
                f"{family.backbone_class} ({hint}it takes "
                f"{', '.join(k for k in takes if k not in family.set_by_trainer)})"
            )
    shape = {**(family.sizes or SIZES).get(size, {}), **overrides}
    if problem := backbone_problem(family, overrides, shape, "--config {!r}", "--config: "):
        raise ValueError(problem)


def backbone_problem(family: Family, given: dict, whole: dict, label: str, prefix: str):
    """One sentence about the first argument in `given` that is not of its type or lies
    outside its bounds (`label` names it: "--config {!r}"), else about `whole` (the backbone
    config `given` goes into) against whole heads and the family's `config_rule` (`prefix`
    comes first); None when all fit."""
    for bounds in (Shape, family.argument_bounds):
        if bounds is not None and (problem := _field_problem(bounds, given, label)):
            return problem
    hidden_dim, num_heads = whole.get("hidden_dim", 0), whole.get("num_heads", 1)
    if hidden_dim % num_heads:
        return f"{prefix}hidden_dim {hidden_dim} is not a multiple of num_heads {num_heads}"
    problem = family.config_rule(whole)
    return problem and prefix + problem


def converted_backbone(family: Family, config: dict, where: str) -> dict:
    """The backbone arguments of a transformers config (`where`: its file), checked as
    --config is; raises ValueError (one sentence naming `where` and the argument)."""
    try:
        backbone = family.backbone_config_of(config)
    except (TypeError, ValueError, ArithmeticError, UserError) as err:  # transformers' own too
        raise ValueError(f"{where}: {' '.join(str(err).split())}") from None
    label = f"{where} gives the {family.backbone_class} argument {{!r}}, which"
    if problem := backbone_problem(family, backbone, backbone, label, f"{where}: "):
        raise ValueError(problem)
    return backbone


def _field_problem(bounds, given: dict, label: str) -> str | None:
    """Type, choices, then bounds of the arguments `bounds` (a flag dataclass) declares."""
    fields = flags.flag_fields(bounds)
    for field in fields:
        value = given.get(field.name)
        if value is None:
            continue
        kinds, wanted = _JSON_TYPES[field.type]
        if isinstance(value, bool) or not isinstance(value, kinds):
            return f"{label.format(field.name)} must be {wanted}, not {json.dumps(value)}"
        choices = field.metadata["choices"]
        if choices and value not in choices:
            return f"{label.format(field.name)} must be one of {', '.join(choices)} (got {value!r})"
    values = types.SimpleNamespace(**{f.name: given.get(f.name) for f in fields})
    return flags.out_of_bounds(bounds, values, label=label)


def backbone_config(
    family: Family,
    size: str,
    vocabulary_size: int,
    max_sequence_length: int,
    overrides: dict | None = None,
    special_token_ids: dict | None = None,
) -> dict:
    """The keyword arguments of the family's backbone (`special_token_ids`, role -> id:
    the tokenizer's, for a family whose backbone takes some, e.g. a document separator)."""
    sizes = family.sizes or SIZES
    if size not in sizes:
        raise ValueError(f"model size {size!r} is not one of {tuple(sizes)}")
    config = dict(
        sizes[size],
        vocabulary_size=vocabulary_size,
        dropout=family.dropout,
        max_sequence_length=max_sequence_length,
        **(family.token_args(special_token_ids) if special_token_ids else {}),
    )
    config.update(overrides or {})
    return config


def build_masked_lm(family: Family, config: dict):
    """A keras-hub MaskedLM task (LM head only at `mask_positions`) with no preprocessor."""
    return family.task_cls()(backbone=build_backbone(family, config), preprocessor=None)


def build_backbone(family: Family, config: dict, dtype: str | None = None):
    """The family's keras-hub backbone of a recorded `backbone_config`, with the encoder
    activation it records (`trainer/families/activation.py`) where that is not keras-hub's;
    `dtype`, a Keras dtype policy, is passed to it (else the process-wide one applies)."""
    kwargs = activation.without(config)
    if dtype is not None:
        kwargs["dtype"] = dtype
    backbone = family.backbone_cls()(**kwargs)
    name = activation.of(config, family.activation)
    if name != family.activation:
        activation.set_in(backbone, name)
    return backbone


def dtype_policy(precision: str) -> str:
    """Keras' dtype policy for `DeviceSettings.precision` (pretraining and fine-tuning)."""
    return "mixed_bfloat16" if precision == "bf16" else "float32"


def fuse_attention(masked_lm) -> int:
    """Drops the dropout on the attention probabilities of every encoder layer (the hidden
    states keep theirs); returns how many attention layers changed.

    Keras' MultiHeadAttention with dropout computes the scores itself (einsum, softmax,
    dropout over a (batch, heads, length, length) tensor) and never calls
    `ops.dot_product_attention`, the op that runs cuDNN's fused attention on a GPU: every
    keras-hub encoder sets its attention dropout to the backbone's `dropout`. MosaicBERT
    and ModernBERT pretrain without attention dropout for the same reason. The saved
    backbone config is unchanged (an export fine-tunes with the usual dropout). A family
    whose backbone picks its own kernel (`Family.own_attention`) is left as it is."""
    import keras

    backbone = getattr(masked_lm, "backbone", masked_lm)  # a task, or a backbone alone
    if families.of_backbone(backbone).own_attention:
        return backbone.num_layers
    changed = 0
    for layer in masked_lm._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.MultiHeadAttention):
            layer._dropout = 0.0  # read at each call (keras MultiHeadAttention._compute_attention)
            layer._compute_attention = _with_full_mask(layer._compute_attention)
            changed += 1
    if not changed:  # a keras-hub whose encoder no longer uses Keras' attention layer
        raise ValueError(
            f"{type(masked_lm).__name__} has no keras MultiHeadAttention layer: "
            "pass --fused_attention false"
        )
    return changed


def _with_full_mask(compute_attention):
    """Wraps a MultiHeadAttention's `_compute_attention` so a padding mask reaches the
    attention op as (batch, query length, key length), not (batch, 1, key length).

    keras-hub's encoders hand Keras the padding mask as (batch, 1, key length), which Keras
    expands to (batch, 1, 1, key length); cuDNN's fused kernel takes a mask only as a bias of
    the full (query, key) extent, so `jax.nn.dot_product_attention` refuses it ("Bias must
    have same seq length as QKV") and Keras runs XLA's attention without a word. Measured
    on an H100 (benchmarks/attention_kernels.py, docs/benchmarks.md): forward + backward of
    base-shaped attention at batch 32 x 512, 1.81 ms with XLA, 0.59 ms with cuDNN and a
    full mask. The broadcast is a boolean (batch, length, length) tensor: 8 MB there."""
    from keras import ops

    def call(query, key, value, attention_mask=None, *args, **kwargs):
        if attention_mask is not None and attention_mask.shape[-2] == 1:
            batch = ops.shape(attention_mask)[0]
            full = (batch, ops.shape(query)[1], ops.shape(key)[1])
            attention_mask = ops.broadcast_to(attention_mask, full)
        return compute_attention(query, key, value, attention_mask, *args, **kwargs)

    return call


def bf16_lm_head(masked_lm) -> int:
    """Under mixed precision, makes the LM head's projection onto the vocabulary (the tied
    token embedding used in reverse) multiply in the compute dtype; returns how many
    embeddings changed.

    Keras' Embedding never autocasts its float32 table (`autocast = False`), so without this
    `hidden @ embeddings.T` is promoted to a float32 product: the step's largest single
    matrix product (hidden x vocabulary per masked slot) ran in float32 under
    mixed_bfloat16 (read in the lowered JAX step: tests/trainer/backends/test_accelerator_paths.py).
    PyTorch's autocast runs the same projection in bf16."""
    import keras

    changed = 0
    for layer in masked_lm._flatten_layers(include_self=True, recursive=True):
        if (
            isinstance(layer, keras.layers.ReversibleEmbedding)
            and layer.compute_dtype != layer.variable_dtype
        ):
            layer.reverse_dtype = layer.compute_dtype
            changed += 1
    return changed
