"""The Markdown body of a model card: one function per section, every figure from the facts.

A fact the run did not record is written as "not recorded" (with the reason from
`CardFacts.notes`), never filled in with a default. The run's facts are its `RunRecord`'s
fields (trainer/run_folder/run_record.py), its recipe and each attempt's an
`attempts.AttemptRecipe`.
"""

from __future__ import annotations

from common.prepared_dir import MANIFEST
from trainer.release import card_prepare_steps as prepare_steps

MASKING = {
    "token": "single tokens (BERT/RoBERTa)",
    "whole_word": "whole words (every piece of a word together)",
    "span": "spans of 1-10 tokens, geometric lengths (SpanBERT)",
}
UNKNOWN = "not recorded"


def _n(value) -> str:
    return UNKNOWN if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _table(rows) -> str:
    lines = ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def model_section(facts) -> str:
    record, backbone = facts.record, facts.record.backbone_config
    rows = [
        ("family", record.family.name),
        ("size", _size(record)),
        ("parameters", _n(facts.parameters)),
        ("layers", backbone.get("num_layers")),
        ("hidden size", backbone.get("hidden_dim")),
        ("attention heads", backbone.get("num_heads")),
        ("feed-forward size", backbone.get("intermediate_dim")),
        ("max sequence length", record.max_sequence_length),
        ("dropout", backbone.get("dropout")),
    ]
    if backbone.get("activation"):  # not keras-hub's own (trainer/families/activation.py)
        rows.append(
            ("feed-forward activation", f"{backbone['activation']} (not keras-hub's default)")
        )
    return "## Model\n\n" + _table(rows)


def tokenizer_section(facts) -> str:
    tokenizer, kind = facts.record.tokenizer, facts.tokenizer_kind
    specials = ", ".join(
        f"{role.removesuffix('_token')} `{token}`" for role, token in kind["special_tokens"].items()
    )
    rows = [
        ("kind", f"{kind['model']} (`tokenizers`; pre-tokenizer {kind['pre_tokenizer']})"),
        ("vocabulary", _n(tokenizer["vocab_size"])),
        ("special tokens", specials),
        ("sha256 of tokenizer.json", f"`{tokenizer['fingerprint']}`"),
    ]
    return "## Tokenizer\n\n" + _table(rows)


def _removed(counts: dict | None) -> str:
    if counts is None:
        return UNKNOWN
    total = sum(counts.values())
    detail = ", ".join(f"{kind} {n:,}" for kind, n in counts.items() if n)
    return f"{total:,}" + (f" ({detail})" if detail else "")


def data_section(facts) -> str:
    train, evaluation = facts.train_data, facts.eval_data
    if train is None:
        return "## Training data\n\nThe prepare manifest was " + UNKNOWN + "."
    rows = [
        ("documents read by the prepare run", _n(train["documents_read"])),
        ("rejected (unreadable records)", _n(train["documents_rejected"])),
        ("duplicates removed", _removed(train["duplicates_by_kind"])),
        ("removed by the quality filter", _removed(train["filtered_by_rule"])),
        (
            "evaluation sets checked for overlap",
            prepare_steps.decontamination(train.get("decontamination")),
        ),
        ("quality classifier", prepare_steps.quality_model(train.get("quality_model"))),
        ("empty documents", _n(train["documents_empty"])),
        ("documents in the training split", _n(train["split_documents"])),
        ("training sequences", f"{train['sequences']:,} of {train['max_length']} tokens"),
        ("training tokens (not padding)", _n(train["tokens"])),
        ("evaluation sequences", _n(evaluation and evaluation["sequences"])),
        ("evaluation tokens", _n(evaluation and evaluation["tokens"])),
        ("sha256 of the training manifest", f"`{train['digest']}`"),
    ]
    return (
        "## Training data\n\nAs recorded by the prepare pipeline's manifest of the "
        f"training split (`{MANIFEST}`).\n\n" + _table(rows)
    )


def _hardware(recipe) -> str:
    where = {"auto": "auto-selected device"}.get(recipe.strategy, str(recipe.strategy).upper())
    return f"{where}, {_n(recipe.replicas)} replica(s)"


def _accumulation(recipe) -> str:
    micro = recipe.grad_accum_steps or 1
    return f" x {micro} accumulated micro-batches" if micro > 1 else ""


def _batch(recipe) -> str:
    return (
        f"{_n(recipe.global_batch_size)} sequences "
        f"({recipe.per_replica_batch_size} per replica x {recipe.replicas}"
        + _accumulation(recipe)
        + ")"
    )


def _optimizer(recipe) -> str:
    return (
        f"AdamW (weight decay {recipe.weight_decay}, betas "
        f"{recipe.adam_beta1}/{recipe.adam_beta2}, epsilon "
        f"{recipe.adam_epsilon}), gradient clipping {recipe.clip_norm}"
        + (", StableAdamW update clipping" if recipe.update_clipping == "on" else "")
    )


def _schedule(recipe) -> str:
    if recipe.schedule == "wsd":
        start, length = recipe.decay_start_step, recipe.decay_num_steps
        held = f"linear warmup over {_n(recipe.warmup_steps)} steps, held at the peak"
        if not length:
            return f"{held} to step {_n(recipe.total_steps)} (not decayed)"
        return f"{held}, then 1 - sqrt decay to 0 from step {_n(start)} over {_n(length)} steps"
    return (
        f"linear warmup over {_n(recipe.warmup_steps)} steps, then linear decay to 0"
        f" at step {_n(recipe.total_steps)}"
    )


# What a restart may change, as the recipe states it (label, text of one attempt's AttemptRecipe).
BY_ATTEMPT = (
    ("peak learning rate", lambda r: str(r.learning_rate)),
    ("global batch", _batch),
    ("schedule", _schedule),
    ("optimizer", _optimizer),
    ("precision", lambda r: str(r.precision)),
    ("hardware", _hardware),
    ("Keras backend", lambda r: _n(r.backend)),
    ("XLA-compiled step", lambda r: str(r.jit_compile)),
)


def _varying(facts) -> list:
    """The BY_ATTEMPT rows whose text differs between the attempts that trained the weights."""
    return [
        (label, text) for label, text in BY_ATTEMPT if len({text(a) for a in facts.attempts}) > 1
    ]


def attempts_section(facts) -> str:
    """One row per attempt (start or restart) whose steps the weights kept, with what it
    changed; empty when every attempt trained with one recipe."""
    varying = _varying(facts)
    if not varying:
        return ""
    header = ["steps", *(label for label, _ in varying)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for attempt in facts.attempts:
        steps = f"{attempt.start_step}-{_n(attempt.end_step)}"
        lines.append("| " + " | ".join([steps, *(text(attempt) for _, text in varying)]) + " |")
    return (
        "### Attempts\n\nThe run was restarted with changed settings; each attempt trained "
        "the steps shown (after its start, up to its end):\n\n" + "\n".join(lines)
    )


def _phases_trained(facts) -> list:
    """The --phases records whose steps trained these weights; [] for a run of one phase."""
    step = facts.step
    trained = [p for p in facts.record.data_phases if step is None or p["start_step"] < step]
    return trained if len(trained) > 1 else []


def phases_section(facts) -> str:
    """One row per phase: its steps, training data and masking rate (empty without phases)."""
    trained = _phases_trained(facts)
    if not trained:
        return ""
    lines = ["| phase | steps | training data | masking rate |", "|---|---|---|---|"]
    for i, phase in enumerate(trained):
        end = trained[i + 1]["start_step"] if i + 1 < len(trained) else facts.step
        data = f"`{phase['train_data']}`"
        if phase["phase"] and phase["data_start_step"] != phase["start_step"]:
            data += f" (read on from step {phase['data_start_step']})"
        steps = f"{phase['start_step']}-{_n(end)}"
        lines.append(f"| {phase['phase']} | {steps} | {data} | {phase['mlm_probability']} |")
    return (
        "### Phases\n\nThe run switched its training data and masking rate at these steps "
        "(each phase trained the steps after its start, up to its end; a folder's data read "
        "from its beginning unless said):\n\n" + "\n".join(lines)
    )


def recipe_section(facts) -> str:
    record, recipe = facts.record, facts.record.recipe
    batch, step = recipe.global_batch_size, facts.step
    varying = {label for label, _ in _varying(facts)}
    rows = [
        ("optimizer steps", f"{_n(step)} (of {_n(recipe.total_steps)} planned)"),
        ("global batch", _batch(recipe)),
        ("sequences seen", _n(step * batch if step is not None and batch else None)),
        ("peak learning rate", recipe.learning_rate),
        ("schedule", _schedule(recipe)),
        ("optimizer", _optimizer(recipe)),
        (
            "masking",
            f"{MASKING.get(record.masking, record.masking)}, {record.mlm_probability} of tokens"
            + (" (phase 0 and evaluation; by phase below)" if _phases_trained(facts) else ""),
        ),
        ("precision", recipe.precision),
        ("hardware", _hardware(recipe)),
        ("Keras backend", _n(recipe.backend)),
        ("XLA-compiled step", recipe.jit_compile),
        ("seed", record.seed),
    ]
    rows = [
        (label, "by attempt, see below" if label in varying else value) for label, value in rows
    ]
    more = [part for part in (phases_section(facts), attempts_section(facts)) if part]
    return "## Training recipe\n\n" + _table(rows) + "".join(f"\n\n{part}" for part in more)


def results_section(facts) -> str:
    lines = ["## Results", ""]
    if facts.results:
        r = facts.results
        lines += [
            f"Evaluation at step {facts.step} on the held-out split, fixed masks "
            f"(seed {facts.record.eval_seed}):",
            "",
            _table(
                [
                    ("eval loss", f"{r['eval_loss']:.4f}"),
                    ("masked accuracy", f"{100 * r['eval_accuracy']:.2f} %"),
                    ("perplexity", f"{r['eval_perplexity']:.2f}"),
                ]
            ),
        ]
    else:
        lines.append(f"Evaluation: {UNKNOWN}.")
    if facts.baseline and facts.results:
        lines += [
            "",
            f"Unigram baseline (always answering the most frequent training token "
            f"`{facts.baseline['token']}`): {100 * facts.baseline['share']:.2f} % masked "
            f"accuracy; this model is {facts.baseline_ratio:.1f}x that.",
        ]
    if facts.notes:
        lines += ["", "Not recorded: " + "; ".join(facts.notes) + "."]
    return "\n".join(lines)


POOLING_TEXT = {
    "mean": "the mean of the final hidden states of the text's tokens (padding left out)",
    "cls": "the final hidden state of the first token",
}


def sentence_transformers_usage(facts, options) -> str:
    """How to load the sentence-transformers export, and what its vectors are."""
    path = options.published.get("sentence-transformers", "PATH/TO/sentence-transformers")
    where = (
        "" if options.published else "Not published: PATH/TO is where the export was written.\n\n"
    )
    code = (
        "```python\nfrom sentence_transformers import SentenceTransformer\n\n"
        f'model = SentenceTransformer("{path.removeprefix("hf://")}")\n'
        'vectors = model.encode(["The cat sat on the mat.", "A dog ran in the park."])\n'
        "model.similarity(vectors, vectors)  # cosine\n```"
    )
    return (
        f"## How to use\n\n{where}### sentence-transformers\n\n{code}\n\n"
        f"A text's vector is {POOLING_TEXT[options.pooling]} ({options.pooling} pooling), "
        "L2-normalised: the similarity is the cosine. The text is cut to "
        f"{_n(facts.record.max_sequence_length)} tokens. The model learnt masked-word "
        "prediction only, with no training on sentence pairs. The folder is also a "
        "transformers model, but its tokenizer reads special tokens' strings as text, so "
        "fill-mask needs the Hugging Face export. mlm_pretrain's "
        "`trainer.release.embeddings.Embedder` gives the same vectors from the keras-hub "
        "model."
    )


def usage_section(facts, fmt: str, options) -> str:
    if fmt == "sentence-transformers":
        return sentence_transformers_usage(facts, options)
    mask = facts.tokenizer_kind["special_tokens"].get("mask_token", "[MASK]")
    hf = options.published.get("hf", "PATH/TO/hf").removeprefix("hf://")
    preset = options.published.get("keras-hub", "PATH/TO/keras-hub")
    where = (
        ""
        if options.published
        else "Not published: PATH/TO is where the export was "
        "written (or give the repository after a push).\n\n"
    )
    transformers_code = (
        "```python\nfrom transformers import pipeline\n\n"
        f'fill_mask = pipeline("fill-mask", model="{hf}")\n'
        f'fill_mask("The cat {mask} on the mat.")\n```'
    )
    keras_code = (
        "```python\nimport keras_hub\n\n"
        f'masked_lm = keras_hub.models.MaskedLM.from_preset("{preset}")\n```\n\n'
        "The preset has no keras-hub preprocessor: its `tokenizer/` folder holds the "
        "`tokenizers` files (`tokenizers.Tokenizer.from_file`), and mlm_pretrain's "
        "`python -m trainer.predict --model PRESET` fills masks with both."
    )
    first, second = (
        (transformers_code, keras_code) if fmt == "hf" else (keras_code, transformers_code)
    )
    titles = (
        ("transformers (PyTorch)", "keras-hub")
        if fmt == "hf"
        else ("keras-hub", "transformers (PyTorch), from the Hugging Face export")
    )
    return f"## How to use\n\n{where}### {titles[0]}\n\n{first}\n\n### {titles[1]}\n\n{second}"


def _size(record) -> str:
    """The size's name, or for a run continued from a model (--init_from), that model's."""
    initial = record.init_from
    if isinstance(initial, dict) and initial.get("path"):
        return f"the size of `{initial['path']}`"
    return _n(record.size)


def _origin(record) -> str:
    """From scratch, or what the run continued from (--init_from, with its sha256)."""
    initial = record.init_from
    if not isinstance(initial, dict):
        return "pretrained from scratch"
    at = f" @ `{initial['revision']}`" if initial.get("revision") else ""  # a Hub commit
    return (
        f"continued from `{initial['path']}`{at} (sha256 `{initial['digest'][:16]}`) by "
        f"masked-LM pretraining on `{record.train_data}`"
    )


# Every card's first paragraph says this, and only our export writes it: how a later export
# recognises a folder it may replace (trainer/release/export_folder.py).
EXPORT_NAME = {
    "hf": "Hugging Face transformers",
    "keras-hub": "keras-hub preset",
    "sentence-transformers": "sentence-transformers",
}
SIGNATURE = (
    "with mlm_pretrain (Beam prepare pipeline, Keras 3 / keras-hub trainer). This folder is the "
)


def body(facts, fmt: str, options, name: str) -> str:
    record = facts.record
    intro = (
        f"# {name}\n\nA {record.family.name} masked language model ({_size(record)}, "
        f"{_n(facts.parameters)} parameters) {_origin(record)} {SIGNATURE}"
        f"{EXPORT_NAME[fmt]} export."
    )
    sections = [
        intro,
        model_section(facts),
        tokenizer_section(facts),
        data_section(facts),
        recipe_section(facts),
        results_section(facts),
        usage_section(facts, fmt, options),
    ]
    return "\n\n".join(sections) + "\n"
