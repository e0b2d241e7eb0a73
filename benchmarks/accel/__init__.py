"""The accelerator benchmark's parts (`python -m benchmarks.bench_accel` is its command).

shapes.py (the sizes, masking rates and model FLOPs per token of each family), peak.py (the
chip's measured matrix-product peak), synthetic.py (prepared shards of random ids, packed
documents for ModernBERT), ours.py (our trainer on JAX), theirs.py (transformers in
PyTorch), child.py (what both child processes share), table.py (the printed table).
"""
