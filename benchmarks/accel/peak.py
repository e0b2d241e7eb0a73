"""The chip's peak, measured: a large square matrix product, bf16 on an accelerator (float32
on a CPU), in JAX and in PyTorch (MFU is over the higher of the two)."""

from __future__ import annotations

import time


def timed(run, sync, repeats: int) -> float:
    """Seconds per call of `run` after one call that compiles / warms up."""
    sync(run())
    start = time.perf_counter()
    for _ in range(repeats - 1):
        run()
    sync(run())
    return (time.perf_counter() - start) / repeats


def jax_peak(accelerator: bool) -> float:
    """FLOP/s of a large square matrix product: bf16 on an accelerator, float32 on a CPU."""
    import jax
    import jax.numpy as jnp

    n, dtype = (8192, jnp.bfloat16) if accelerator else (2048, jnp.float32)
    a = jax.random.normal(jax.random.key(0), (n, n), dtype)
    b = jax.random.normal(jax.random.key(1), (n, n), dtype)
    product = jax.jit(jnp.matmul)
    seconds = timed(
        lambda: product(a, b), lambda x: x.block_until_ready(), 20 if accelerator else 5
    )
    return 2 * n**3 / seconds


def torch_peak(device: str) -> float:
    import torch

    n, dtype = (8192, torch.bfloat16) if device == "cuda" else (2048, torch.float32)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))

    def sync(_):
        if device == "cuda":
            torch.cuda.synchronize()

    return 2 * n**3 / timed(lambda: a @ b, sync, 20 if device == "cuda" else 5)
