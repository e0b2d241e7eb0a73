"""The accelerator benchmark's parts (`python -m benchmarks.bench_accel` is its command).

shapes.py (the families and size names the flags take), peak.py (the chip's measured
matrix-product peak), synthetic.py (prepared shards of random ids, packed documents for
ModernBERT), ours.py (our trainer on JAX, and the family's facts read from its record: sizes,
masking rate, model FLOPs per token), theirs.py (transformers in PyTorch), child.py (what both
child processes share), table.py (the printed table).
"""
