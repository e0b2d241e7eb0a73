"""transformers in PyTorch, run in the torch child: `RobertaForMaskedLM` or
`ModernBertForMaskedLM` at the size, batch, length, masking rate and dropout of our run, bf16
autocast on a GPU, SDPA attention, `torch.compile`, fused AdamW.

This process never imports the trainer (the carried Keras wheels are on the JAX child's path
only), so ModernBERT's config is built here from transformers' own defaults, which are
ModernBERT's layout (global every third layer, a 128-token band, its rotary thetas, no
biases); tests/trainer/test_bench_accel.py checks it against trainer/families/modernbert/
convert.py `hf_config`.

transformers' ModernBERT attends across the documents packed in a row (SDPA with its
sliding-window mask; only its flash-attention path, not used here, can separate documents)
and numbers positions from the row's start: it gets the same packed ids as ours, and the
same model FLOPs are counted for both (benchmarks/accel/shapes.py).
"""

from __future__ import annotations

import itertools

import numpy as np

from benchmarks.accel import child, peak, shapes, synthetic

MASK_ID = 4


def hf_config(family: str, size: str, length: int, vocab: int, attention_dropout: float):
    """The transformers config of our `size` (RoBERTa: the trainer's dropout 0.1; ModernBERT:
    none, as its family pretrains)."""
    import transformers

    s = shapes.SIZES[family][size]
    shape = dict(
        vocab_size=vocab,
        hidden_size=s["hidden_dim"],
        num_hidden_layers=s["num_layers"],
        num_attention_heads=s["num_heads"],
        intermediate_size=s["intermediate_dim"],
    )
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


def _ids(family: str, rows: int, length: int, vocab: int, device: str, count: int = 4):
    """A function that gives each step's ids [rows, length]: for ModernBERT `count` batches
    of packed documents (synthetic.packed_rows, as our side reads them) in turn, held on the
    device; for RoBERTa random words drawn on the device."""
    import torch

    if family != "modernbert":
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

    family, batch = args.family, child.batch(args, length)
    rate = shapes.MASK_RATE[family]
    config = hf_config(family, size, length, args.vocab, 0.0 if fused else 0.1)
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
    next_ids = _ids(family, batch, length, args.vocab, device)

    def step():
        ids = next_ids()
        # as our masking: special tokens are never chosen; 80 % of the chosen become [MASK]
        chosen = torch.rand(ids.shape, device=device) < rate
        if family == "modernbert":  # its packed rows hold [CLS] and [SEP] anywhere
            chosen &= ids >= synthetic.FIRST_WORD
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
