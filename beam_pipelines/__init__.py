"""Apache Beam pipelines: tokenizer training and corpus preparation (tokenize, chunk, shard)."""
