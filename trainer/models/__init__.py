"""Models: `model` (a family's masked LM built from a size and config), `model_source` (a run's
or an export's model and weights), `init_from` (starting from transformers or keras-hub
checkpoints), `safetensors_files` (reading them safely), `keras_hub_presets` and `pooling` (one
vector from the final hidden states: CLS or mean; fine-tuning's head and the release's
embeddings read it)."""
