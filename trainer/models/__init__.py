"""Models: `model` (a family's masked LM built from a size and config), `model_source` (a run's
or an export's model and weights), `init_from` (starting from transformers or keras-hub
checkpoints), `safetensors_files` (reading them safely) and `keras_hub_presets`."""
