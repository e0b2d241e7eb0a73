"""What the Beam pipelines and the trainer must agree on: schema, shards, manifest,
tokenizer files."""
