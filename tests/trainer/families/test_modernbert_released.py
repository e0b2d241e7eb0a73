"""A released ModernBERT as a user starts from it: a transformers folder (tiny and random, made
offline with `save_pretrained`) that carries its own tokenizer in ModernBERT's style (byte-level
BPE, `[CLS]`/`[SEP]`/`[PAD]`/`[MASK]`, fewer pieces than the padded embedding). That tokenizer
prepares the corpus (Beam), the run continues the checkpoint (`--init_from`) from its loss, and
`trainer.finetune` fine-tunes the result."""

import json
import math
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = [
    pytest.mark.slow,  # prepare, a short continued run and a fine-tune (~40 s)
    pytest.mark.skipif(
        os.environ.get("KERAS_BACKEND") != "jax",
        reason="the JAX pass (the family's export and init_from tests run on both)",
    ),
]

VOCAB, EMBEDDING = 600, 640  # ModernBERT pads its embedding to a multiple of 64
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def _released(folder, texts):
    """A ModernBERT folder as the Hub holds one: model, config and its own tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIALS, initial_alphabet=alphabet
    )
    tok.train_from_iterator(texts, trainer)
    ids = {name: tok.token_to_id(name) for name in SPECIALS}
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        **{f"{n}_token": f"[{n.upper()}]" for n in ("unk", "cls", "sep", "pad", "mask")},
        model_max_length=8192,
    ).save_pretrained(str(folder))
    torch.manual_seed(0)
    config = transformers.ModernBertConfig(
        vocab_size=EMBEDDING,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=2,
        local_attention=16,
        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        pad_token_id=ids["[PAD]"],
        cls_token_id=ids["[CLS]"],
        sep_token_id=ids["[SEP]"],
        bos_token_id=ids["[CLS]"],
        eos_token_id=ids["[SEP]"],
    )
    transformers.ModernBertForMaskedLM(config).save_pretrained(str(folder))


def test_a_released_model_with_its_own_tokenizer_prepares_continues_and_fine_tunes(
    corpus_jsonl, corpus_texts, tmp_path
):
    from beam_pipelines import prepare
    from tests.trainer import finetune_data as fd
    from trainer.finetuning import finetune
    from trainer.pretraining import task

    released, data, run = tmp_path / "released", tmp_path / "prepared", tmp_path / "run"
    _released(released, corpus_texts[:400])
    prepare_args = ["--runner=FnApiRunner", "--input", str(corpus_jsonl), "--tokenizer"]
    prepare_args += [str(released), "--output_dir", str(data), "--max_length", "64"]
    assert prepare.run([*prepare_args, "--validation_fraction", "0.1"]) == 0
    args = ["--train_data", str(data / "train"), "--eval_data", str(data / "validation")]
    args += ["--output_dir", str(run), "--init_from", str(released), "--strategy", "cpu"]
    args += ["--per_replica_batch_size", "8", "--train_steps", "6", "--eval_every", "3"]
    args += ["--save_every", "3", "--max_eval_batches", "2", "--learning_rate", "1e-3"]
    assert task.main(args) == 0
    recorded = json.loads((run / "run_config.json").read_text())
    assert recorded["family"] == "modernbert" and recorded["init_from"]["kind"] == "hf"
    history = json.loads((run / "history.json").read_text())
    # A random checkpoint: its loss is finite and about chance over its embedding rows.
    assert abs(history[0]["eval_loss"] - math.log(EMBEDDING)) < 1.0
    train = fd.write(tmp_path / "train.jsonl", fd.examples(32, 0, True, False))
    dev = fd.write(tmp_path / "dev.jsonl", fd.examples(16, 1, True, False))
    args = ["--model", str(run), "--train", train, "--dev", dev, "--seeds", "1"]
    args += ["--text_column", "sentence", "--text_pair_column", "second", "--epochs", "1"]
    assert finetune.main([*args, "--output_dir", str(tmp_path / "ft")]) == 0
    found = json.loads((tmp_path / "ft" / "results.json").read_text())
    assert found["model"]["family"] == "modernbert"
