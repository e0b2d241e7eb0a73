"""Before Keras is imported: `launch` (what every command does first), `keras_backend` (which
backend, chosen once), `quiet` (TensorFlow's start-up lines hidden) and `device_flags` (the
device flags that pretraining and fine-tuning share). Nothing here imports Keras."""
