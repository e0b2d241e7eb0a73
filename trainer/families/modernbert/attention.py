"""ModernBERT's attention over packed documents: one mask, three ways to apply it.

The mask: query i may attend key j when both are in the same segment (a document, or the
row's padding: trainer/families/modernbert/documents.py) and, in a local layer, when
|i - j| <= window // 2 (transformers' bidirectional sliding window: `local_attention` 128 is
the whole window, 64 tokens each side, both ends included). A token always sees itself, so
no row is ever all masked.

Paths (`attention_path`, chosen per layer when the step is traced; the layer records the one
it took in `path_used`):

* `portable`: every backend. The boolean mask materialised as [batch, 1, length, length],
  logits in the compute dtype, softmax in float32 (as transformers' eager path).
* `cudnn` (JAX): `jax.nn.dot_product_attention(..., mask=..., implementation="cudnn")`,
  cuDNN's fused kernel with the same boolean mask (it folds it into a bias). Its
  `local_window_size` is left-only without a causal mask, so the symmetric band stays in the
  mask. Off a GPU it runs the same call with `implementation="xla"` (how it is tested).
* `splash` (JAX): the Pallas TPU Splash kernel with `SegmentIds` (the document mask, native)
  and a static `LocalMask((w, w))` / `FullMask`: nothing of length x length is built. Lengths
  must be multiples of its 128-token blocks. Off a TPU it runs in Pallas' interpret mode
  (slow; how it is tested on CPU).

`auto` takes cuDNN on a JAX GPU under a 16-bit compute dtype, Splash on a JAX TPU when the
length is a multiple of 128, and the portable path otherwise or whenever attention dropout
is active (neither fused kernel drops attention probabilities).

Example:
    >>> mask = attention_mask(segment_ids, window=128)        # [batch, 1, length, length]
    >>> out = portable_attention(q, k, v, mask)   # q, k, v: [batch, length, heads, dim]
"""

from __future__ import annotations

import functools

import keras
from keras import ops

PATHS = ("auto", "portable", "cudnn", "splash")
SPLASH_BLOCK = 128  # the Splash kernel's default block along both sequence axes
_MASKED = -1e30  # a masked logit: exp() of it minus any real maximum is exactly 0


def attention_mask(segment_ids, window: int | None):
    """Boolean [batch, 1, length, length]: same segment, and inside the band when `window`
    (the whole window, transformers' `local_attention`) is set."""
    mask = ops.equal(segment_ids[:, :, None], segment_ids[:, None, :])
    if window is not None:
        index = ops.arange(ops.shape(segment_ids)[1], dtype="int32")
        band = ops.abs(index[:, None] - index[None, :]) <= window // 2
        mask = ops.logical_and(mask, band[None])
    return mask[:, None]


def portable_attention(q, k, v, mask, dropout=None, training=None):
    """q, k, v [batch, length, heads, head_dim]; mask [batch, 1, length, length] -> like q.
    `dropout` is a keras Dropout applied to the probabilities."""
    scale = 1.0 / float(q.shape[-1]) ** 0.5
    logits = ops.einsum("bqhd,bkhd->bhqk", q, k)
    logits = ops.cast(logits, "float32") * scale
    logits = ops.where(mask, logits, _MASKED)
    probs = ops.softmax(logits, axis=-1)
    if dropout is not None:
        probs = dropout(probs, training=training)
    return ops.einsum("bhqk,bkhd->bqhd", ops.cast(probs, v.dtype), v)


def jax_attention(q, k, v, mask, implementation: str):
    """`jax.nn.dot_product_attention` with the boolean mask (softmax in float32 inside)."""
    import jax

    return jax.nn.dot_product_attention(q, k, v, mask=mask, implementation=implementation)


@functools.lru_cache(maxsize=32)
def splash_kernel(length: int, heads: int, window: int | None, interpret: bool):
    """The Splash kernel for one example ([heads, length, head_dim]); the static part of
    the mask only: the documents come in as `SegmentIds` at each call."""
    from jax.experimental.pallas.ops.tpu import splash_attention as splash

    shape = (length, length)
    if window is None:
        head_mask = splash.FullMask(shape)
    else:
        head_mask = splash.LocalMask(shape, (window // 2, window // 2), offset=0)
    return splash.make_splash_mha(
        splash.MultiHeadMask([head_mask] * heads),
        head_shards=1,
        q_seq_shards=1,
        interpret=interpret,
    )


def splash_attention(q, k, v, segment_ids, window: int | None, interpret: bool):
    """q, k, v [batch, length, heads, head_dim] -> like q, through the Splash kernel vmapped
    over the batch (the kernel does not scale the logits: q is scaled first)."""
    import jax
    from jax.experimental.pallas.ops.tpu.splash_attention import SegmentIds

    batch, length, heads, head_dim = q.shape
    kernel = splash_kernel(length, heads, window, interpret)
    q = q * ops.cast(1.0 / float(head_dim) ** 0.5, q.dtype)
    q, k, v = (ops.transpose(t, (0, 2, 1, 3)) for t in (q, k, v))
    segments = SegmentIds(q=segment_ids, kv=segment_ids)
    out = jax.vmap(kernel, in_axes=(0, 0, 0, SegmentIds(0, 0)))(q, k, v, segments)
    return ops.transpose(out, (0, 2, 1, 3))


def choose_path(requested: str, length: int, compute_dtype: str, dropout_active: bool) -> str:
    """The path a layer takes: `portable`, `cudnn`, `jax-xla` (the cuDNN call off a GPU),
    `splash` or `splash-interpret` (off a TPU). Raises ValueError (one line) for a fused path
    that cannot run here."""
    if requested not in PATHS:
        raise ValueError(f"attention_path {requested!r} is not one of {PATHS}")
    if requested == "portable":
        return "portable"
    if keras.config.backend() != "jax":
        if requested != "auto":
            raise ValueError(
                f"attention_path {requested!r} needs the JAX backend, not {keras.config.backend()}"
            )
        return "portable"
    import jax

    platform = jax.devices()[0].platform
    if requested == "auto":
        return _auto_path(platform, length, compute_dtype, dropout_active)
    return _requested_path(requested, platform, length, dropout_active)


def _auto_path(platform: str, length: int, compute_dtype: str, dropout_active: bool) -> str:
    """`auto` under JAX: the fused path this platform runs fast, else the portable one (with
    attention dropout too: the fused paths have none)."""
    if dropout_active:
        return "portable"
    if platform == "gpu" and compute_dtype in ("bfloat16", "float16"):
        return "cudnn"
    if platform == "tpu" and length % SPLASH_BLOCK == 0:
        return "splash"
    return "portable"


def _requested_path(requested: str, platform: str, length: int, dropout_active: bool) -> str:
    """A fused path asked for by name under JAX: it, or its stand-in off its platform."""
    if dropout_active:
        raise ValueError(f"attention_path {requested!r} has no attention dropout: set it to 0")
    if requested == "cudnn":
        return "cudnn" if platform == "gpu" else "jax-xla"
    if length % SPLASH_BLOCK != 0:
        raise ValueError(
            f"attention_path 'splash' needs a length that is a multiple of {SPLASH_BLOCK}, "
            f"not {length}"
        )
    return "splash" if platform == "tpu" else "splash-interpret"


def training_problem(config: dict, length: int) -> str | None:
    """Why a run cannot train a backbone of `config` on this machine with rows of `length`
    tokens, in one sentence naming `attention_path`, or None (`Family.device_rule`). Checked
    before the model is built: the first call of a layer (`choose_path`) would otherwise
    report the length of the batch that builds the weights, not the data's. Off a TPU the
    Splash kernel runs only in Pallas' interpret mode, a way to test it too slow to train."""
    requested = config.get("attention_path", "auto")
    backend = keras.config.backend()
    if requested in ("auto", "portable"):
        return None
    if backend != "jax":
        return f"attention_path {requested!r} needs the JAX backend (--backend jax), not {backend}"
    if requested != "splash":
        return None
    import jax

    platform = jax.devices()[0].platform
    if platform != "tpu":
        return (
            f"attention_path 'splash' needs a TPU (the Splash kernel is TPU-only), and this "
            f"run's JAX runs on {platform.upper()}: use attention_path 'auto'"
        )
    if length % SPLASH_BLOCK:
        return (
            f"attention_path 'splash' needs rows whose length is a multiple of {SPLASH_BLOCK}, "
            f"and the data's rows have {length} tokens"
        )
    return None


def attend(path: str, q, k, v, segment_ids, window, dropout=None, training=None):
    """Runs the chosen path (see `choose_path`)."""
    if path.startswith("splash"):
        return splash_attention(q, k, v, segment_ids, window, interpret=path != "splash")
    mask = attention_mask(segment_ids, window)
    if path == "cudnn":
        return jax_attention(q, k, v, mask, "cudnn")
    if path == "jax-xla":
        return jax_attention(q, k, v, mask, "xla")
    return portable_attention(q, k, v, mask, dropout, training)
