"""A fine-tuned model as a transformers folder: the backbone under the family's transformers
names plus a task head (a cross-encoder's `*ForSequenceClassification`, a tagger's
`*ForTokenClassification`), with its config and the run's tokenizer files.

The backbone's names are the ones our masked-LM export writes (`export.hf_state_dict`, one
weight table per family, checked against the model): the fine-tuned weights are copied into
the family's masked LM and the rows of its LM head are left out, so a task export and a
pretraining export can never name one weight two ways. The head's tensors are the caller's
(`cross_encoder_export`, `token_classification_export`): each task knows its head.

Example:
    >>> tensors = backbone_tensors(source, model.backbone, info.pad_id)
    >>> tensors.update({"classifier.weight": w, "classifier.bias": b})
    >>> write_folder(source, info, tensors, "RobertaForTokenClassification",
    ...              {"id2label": {0: "O", 1: "B-PER"}}, "exports/tagger")
"""

from __future__ import annotations

import numpy as np

from common import fs, tokenizer_files
from trainer.models import model_source
from trainer.release import export


def backbone_tensors(source, backbone, pad_id: int) -> dict[str, np.ndarray]:
    """transformers name -> float32 array of the fine-tuned Keras `backbone` (built from
    `source`'s config), as the family's masked-LM export names them, its LM head left out."""
    masked_lm = model_source.load_source(source)  # the architecture and the weight table's rows
    masked_lm.backbone.set_weights(backbone.get_weights())
    own = {variable.path for variable in masked_lm.backbone.weights}
    table = source.family.weight_table(masked_lm.backbone.num_layers)
    # The backbone's transformers prefix (`roberta.`, `bert.`, `model.`): the first part of the
    # names of its own variables; the LM head's rows (`lm_head.`, `cls.`, `head.`) have others.
    prefixes = {name.split(".")[0] for path, name, _ in table if name and path in own}
    tensors = export.hf_state_dict(masked_lm, source.family, pad_id)
    return {name: value for name, value in tensors.items() if name.split(".")[0] in prefixes}


def write_folder(
    source, info, tensors: dict, architecture: str, config_updates: dict, output_dir: str
) -> str:
    """config.json (the family's, with `architectures` and `config_updates`: labels, pooling),
    model.safetensors (no pickle) and the tokenizer files into `output_dir`; returns it."""
    from safetensors.numpy import save

    config = export.hf_config(source.family, source.record.backbone_config, info)
    config.architectures = [architecture]
    for key, value in config_updates.items():
        setattr(config, key, value)
    arrays = {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}
    # transformers refuses safetensors files whose metadata does not name a framework.
    fs.write_bytes(fs.join(output_dir, export.HF_WEIGHTS), save(arrays, metadata={"format": "pt"}))
    fs.write_bytes(fs.join(output_dir, export.HF_CONFIG), config.to_json_string().encode("utf-8"))
    tokenizer_files.copy(source.tokenizer_dir, output_dir, source.max_sequence_length)
    return output_dir
