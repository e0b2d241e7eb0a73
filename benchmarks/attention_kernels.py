"""Which attention kernels a GPU gives a masked encoder, and at what speed: JAX alone.

    python -m benchmarks.attention_kernels [--shapes 32x512,16x1024] [--site DIR] [--json F]

Times forward + backward of `jax.nn.dot_product_attention` in bf16 at base shape (12 heads of
64) for the masks an encoder needs: none, padding (a boolean mask, or cuDNN's sequence
lengths), and packed documents with a 128-token band (ModernBERT's local layers), each with
`implementation="xla"` and `"cudnn"`. A variant whose kernel refuses the input says why, in
one line. Each masked cuDNN output is compared with XLA's on the same inputs. With `--site`
(the carried wheels' folder) it also asks Keras why its own `ops.dot_product_attention`
takes or skips cuDNN on this device (Keras falls back to XLA without a word).
On a CPU the cuDNN variants report their refusal: the script runs anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

HEADS, HEAD_DIM, WINDOW, DOCS = 12, 64, 128, 4


def masks(batch: int, length: int):
    """(padding mask, document-and-band mask, valid lengths): each row's last eighth is
    padding; the rest holds `DOCS` documents of equal length; padding is its own segment."""
    import jax.numpy as jnp

    valid = length - length // 8
    pos = jnp.arange(length)
    lengths = jnp.full((batch,), valid, jnp.int32)
    seg = jnp.where(pos < valid, pos * DOCS // valid, DOCS)  # padding: segment DOCS
    padding = jnp.broadcast_to((pos < valid)[None, None, None, :], (batch, 1, 1, length))
    same_doc = seg[:, None] == seg[None, :]
    band = jnp.abs(pos[:, None] - pos[None, :]) <= WINDOW // 2
    local = jnp.broadcast_to((same_doc & band)[None, None], (batch, 1, length, length))
    return padding, local, lengths


def variants(batch: int, length: int):
    padding, local, lengths = masks(batch, length)
    return {
        "no mask": {},
        "padding (bool mask)": {"mask": padding},
        "padding (seq lengths)": {"query_seq_lengths": lengths, "key_value_seq_lengths": lengths},
        "documents + band (bool mask)": {"mask": local},
        "band only (local_window_size)": {"local_window_size": (WINDOW // 2, WINDOW // 2)},
    }


def step(impl: str, kwargs: dict):
    import jax
    import jax.numpy as jnp

    def loss(q, k, v):
        out = jax.nn.dot_product_attention(q, k, v, implementation=impl, **kwargs)
        return jnp.sum(out.astype(jnp.float32) ** 2), out

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))


def measure(fn, args, iters: int) -> float:
    import jax

    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    for _ in range(iters):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / iters * 1e3


def one_shape(batch: int, length: int, iters: int) -> list[dict]:
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.key(0), 3)
    qkv = [jax.random.normal(k, (batch, length, HEADS, HEAD_DIM), jnp.bfloat16) for k in keys]
    rows = []
    for name, kwargs in variants(batch, length).items():
        outs = {}
        for impl in ("xla", "cudnn"):
            row = {"batch": batch, "length": length, "mask": name, "impl": impl}
            try:
                fn = step(impl, kwargs)
                hlo = fn.lower(*qkv).compile().as_text()
                row["fused_call"] = "cudnn$fmha" in hlo.lower()
                row["ms"] = round(measure(fn, qkv, iters), 3)
                outs[impl] = fn(*qkv)[0][1].astype(jnp.float32)
            except Exception as error:  # noqa: BLE001 (the refusal is the finding)
                row["refused"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            rows.append(row)
        if len(outs) == 2:
            rows[-1]["max_diff_vs_xla"] = float(jnp.max(jnp.abs(outs["cudnn"] - outs["xla"])))
    return rows


def keras_reason(site: str) -> str:
    """Why Keras' JAX `dot_product_attention` does or does not take cuDNN here."""
    sys.path.insert(0, site)
    os.environ["KERAS_BACKEND"] = "jax"  # Keras' default backend would import TensorFlow
    try:
        import jax.numpy as jnp
        from keras.src.backend.jax import nn as keras_nn

        q = jnp.zeros((2, 128, HEADS, HEAD_DIM), jnp.bfloat16)
        keras_nn._can_use_flash_attention(q, q, q, None, raise_error=True)
        return "Keras would use cuDNN (its check passes)"
    except Exception as error:  # noqa: BLE001
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        return f"Keras skips cuDNN: {last[:300]}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes", default="32x512,16x1024", help="batch x length, comma-separated"
    )
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--site", help="folder of the carried wheels (keras) to ask Keras")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    import jax

    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}")
    rows = []
    for shape in args.shapes.split(","):
        batch, length = (int(x) for x in shape.split("x"))
        rows += one_shape(batch, length, args.iters)
    print(f"{'shape':>9} {'mask':<30} {'impl':<6} {'ms fwd+bwd':>10} {'fused':>6}  note")
    for r in rows:
        note = r.get("refused") or (
            f"max |cudnn - xla| {r['max_diff_vs_xla']:.3g}" if "max_diff_vs_xla" in r else ""
        )
        ms = f"{r['ms']:.3f}" if "ms" in r else "-"
        fused = str(r.get("fused_call", "-"))
        shape = f"{r['batch']:>3}x{r['length']:<5}"
        print(f"{shape} {r['mask']:<30} {r['impl']:<6} {ms:>10} {fused:>6}  {note}")
    reason = keras_reason(args.site) if args.site else None
    if reason:
        print(reason)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": jax.devices()[0].device_kind, "rows": rows, "keras": reason}, f)


if __name__ == "__main__":
    main()
