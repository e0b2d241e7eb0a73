"""`--init_from` a transformers ModernBERT folder in the layouts of the released models, made
offline with `save_pretrained` (tiny and random, so nothing is downloaded): their rotary
thetas, windows and vocabularies differ, and the older hub configs name those fields in
another way. Each loads through the trainer's `init_from` with logit parity."""

import json

import numpy as np
import pytest

from tests.trainer.families.modernbert_data import logits_beside_transformers
from trainer.models import init_from, model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # builds and saves three transformers models (~30 s)

LENGTH = 160  # longer than the 64-token windows below: the local layers cut the rows
SHAPE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=2)
IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
# (vocabulary, global theta, local theta, window): ModernBERT-base's are transformers' own
# defaults; the Ettin and mmBERT encoders keep ModernBERT's layout with other thetas and (mmBERT)
# a 256,000-piece vocabulary.
LAYOUTS = {
    "modernbert-base": (50_368, 160_000.0, 10_000.0, 64),
    "ettin-like": (50_368, 160_000.0, 160_000.0, 64),
    "mmbert-like": (256_000, 160_000.0, 160_000.0, 64),
}


def _save(folder, vocab, global_theta, local_theta, window, old_names=False):
    torch.manual_seed(0)
    config = transformers.ModernBertConfig(
        vocab_size=vocab,
        local_attention=window,
        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": global_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": local_theta},
        },
        **SHAPE,
        **IDS,
    )
    hf = transformers.ModernBertForMaskedLM(config).eval()
    hf.save_pretrained(str(folder))
    if old_names:  # the field names of the configs first published on the Hub
        path = folder / "config.json"
        written = json.loads(path.read_text())
        for key in ("layer_types", "rope_parameters"):
            written.pop(key)
        written.update(
            global_attn_every_n_layers=3, global_rope_theta=global_theta,
            local_rope_theta=local_theta,
        )  # fmt: skip
        path.write_text(json.dumps(written))
        hf = transformers.ModernBertForMaskedLM.from_pretrained(str(folder)).eval()
    return hf


def _parity(folder, hf) -> float:
    initial = init_from.resolve(str(folder))
    assert initial.family.name == "modernbert"
    masked_lm = model.build_masked_lm(initial.family, initial.backbone_config)
    init_from.load_into(masked_lm, initial)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 1000, (2, LENGTH)).astype("int32")
    ids[:, 0] = IDS["cls_token_id"]
    mask = np.ones_like(ids)
    mask[1, 100:] = 0
    ids[mask == 0] = IDS["pad_token_id"]
    ours, theirs = logits_beside_transformers(masked_lm, hf, ids, mask)
    return float(np.abs(ours - theirs).max())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_released_layouts_load_with_transformers_logits(tmp_path, layout):
    hf = _save(tmp_path, *LAYOUTS[layout])
    assert _parity(tmp_path, hf) <= 1e-4


def test_the_older_hub_field_names_load_alike(tmp_path):
    hf = _save(tmp_path, *LAYOUTS["modernbert-base"], old_names=True)
    assert hf.config.rope_parameters["sliding_attention"]["rope_theta"] == 10_000.0
    assert _parity(tmp_path, hf) <= 1e-4


def test_what_the_family_cannot_compute_is_refused_by_name(tmp_path):
    _save(tmp_path, *LAYOUTS["modernbert-base"])
    path = tmp_path / "config.json"
    written = json.loads(path.read_text())
    path.write_text(json.dumps({**written, "norm_bias": True}))
    with pytest.raises(Exception, match="norm_bias"):
        init_from.resolve(str(tmp_path))
