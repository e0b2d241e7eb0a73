"""transformers in PyTorch, run in the torch child: `RobertaForMaskedLM` or
`ModernBertForMaskedLM` at the size, batch, length, masking rate and dropout of our run, bf16
autocast on a GPU, SDPA attention, `torch.compile`, fused AdamW.

This process never imports the trainer (the carried Keras wheels are on the JAX child's path
only): the family's facts (each configuration's shape, the vocabulary, the masking rate, packed
rows) come from its record through the JAX child (`--facts`, `ours.family_facts`), and
transformers' config of each family is built here, ModernBERT's from transformers' own
defaults, which are ModernBERT's layout (global every third layer, a 128-token band, its
rotary thetas, no biases); tests/trainer/test_bench_accel.py checks it against
trainer/families/modernbert/convert.py `hf_config`.

transformers' ModernBERT attends across the documents packed in a row (SDPA with its
sliding-window mask; only its flash-attention path, not used here, can separate documents)
and numbers positions from the row's start: it gets the same packed ids as ours, and the
same model FLOPs are counted for both (trainer/families/flops.py).
"""

from __future__ import annotations

import itertools
import json

import numpy as np

from benchmarks.accel import child, peak, synthetic

MASK_ID = 4


def hf_config(family: str, s: dict, length: int, vocab: int, attention_dropout: float):
    """The transformers config of our shape `s` (the backbone's num_layers, num_heads,
    hidden_dim, intermediate_dim; RoBERTa: the trainer's dropout 0.1; ModernBERT: none, as
    its family pretrains)."""
    import transformers

    shape = dict(
        vocab_size=vocab,
        hidden_size=s["hidden_dim"],
        num_hidden_layers=s["num_layers"],
        num_attention_heads=s["num_heads"],
        intermediate_size=s["intermediate_dim"],
    )
    # The record's `hf_config` cannot be imported here (no Keras): transformers' config of
    # each family is written out instead, and tested equal to it (tests/test_family_names.py
    # allows this one branch).
    if family == "modernbert":
        return transformers.ModernBertConfig(
            **shape,
            max_position_embeddings=max(length, 512),
            pad_token_id=0,
            cls_token_id=synthetic.CLS,
            bos_token_id=synthetic.CLS,
            sep_token_id=synthetic.SEP,
            eos_token_id=synthetic.SEP,
        )
    return transformers.RobertaConfig(
        **shape,
        max_position_embeddings=length + 2,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=attention_dropout,
    )


def _ids(packed: bool, rows: int, length: int, vocab: int, device: str, count: int = 4):
    """A function that gives each step's ids [rows, length]: for a family that trains on
    packed rows (ModernBERT) `count` batches of packed documents (synthetic.packed_rows, as
    our side reads them) in turn, held on the device; else random words drawn on the device."""
    import torch

    if not packed:
        return lambda: torch.randint(synthetic.FIRST_WORD, vocab, (rows, length), device=device)
    rng = np.random.default_rng(0)
    ids = synthetic.packed_rows(rng, count * rows, length, vocab, max(8, length // 4))
    pool = torch.as_tensor(ids.reshape(count, rows, length), device=device)
    order = itertools.cycle(range(count))
    return lambda: pool[next(order)]


def train_torch(args, size: str, length: int, device: str, fused: bool) -> dict:
    """examples/s of the family's transformers MLM after one step that compiles."""
    import torch
    import transformers

    facts, batch = json.loads(args.facts), child.batch(args, length)
    rate, vocab = facts["mask_rate"], facts["vocab"]
    shape = facts["configs"][f"{size}/{length}"]
    config = hf_config(args.family, shape, length, vocab, 0.0 if fused else 0.1)
    masked_lm = getattr(transformers, f"{type(config).__name__[: -len('Config')]}ForMaskedLM")
    model = masked_lm._from_config(config, attn_implementation="sdpa").to(device).train()
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=1e-4,
        betas=(0.9, 0.98),
        eps=1e-6,
        weight_decay=1e-3,
        fused=device == "cuda",
    )
    forward = torch.compile(model) if args.torch_compile else model
    ones = torch.ones(batch, length, dtype=torch.long, device=device)
    next_ids = _ids(facts["packed"], batch, length, vocab, device)

    def step():
        ids = next_ids()
        # as our masking: special tokens are never chosen (packed rows hold [CLS] and [SEP]
        # anywhere; random words none); 80 % of the chosen become [MASK]
        chosen = (torch.rand(ids.shape, device=device) < rate) & (ids >= synthetic.FIRST_WORD)
        replaced = chosen & (torch.rand(ids.shape, device=device) < 0.8)
        inputs = torch.where(replaced, MASK_ID, ids)
        with torch.autocast(device, torch.bfloat16, enabled=device == "cuda"):
            loss = forward(
                input_ids=inputs, attention_mask=ones, labels=torch.where(chosen, ids, -100)
            ).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    def sync(loss):
        return float(loss.detach())  # waits for the device

    steps = args.interval * (args.intervals - 1)
    sync(step())  # compiles
    seconds = peak.timed(step, sync, steps)
    return {
        "examples_per_second": batch / seconds,
        "batch": batch,
        "precision": "bf16" if device == "cuda" else "fp32",
        "fused_attention": fused,
        "mask_rate": rate,
    }


def torch_child(args) -> None:
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    fused = device == "cuda"  # as our trainer's default there (plan.device_settings)
    child.emit(
        {
            "device": torch.cuda.get_device_name() if device == "cuda" else "CPU",
            "accelerator": device == "cuda",
            "peak": peak.torch_peak(device),
        }
    )
    for size, length in child.configs(args, device == "cuda"):
        child.emit(
            {
                "run": f"{size}/{length}",
                **child.guarded(lambda s=size, n=length: train_torch(args, s, n, device, fused)),
            }
        )
