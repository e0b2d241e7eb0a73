"""After training: `export` (Keras, keras-hub, transformers), `model_card` with `card_text` and
`card_facts`, `push` (Hugging Face Hub, Kaggle), `predict`, `fill_mask_demo`, `baseline`,
`plot`. Nothing that runs before or during training imports this room."""
