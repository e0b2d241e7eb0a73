"""Keras 3 / keras-hub masked-language-model trainer (TPU, GPU, CPU; TensorFlow or JAX).

Rooms, in the order a run goes through them (a room imports only rooms above it; release/,
which runs after training, is imported by no room before it: tests/test_layers.py):

    startup/      what a command does before Keras is imported: the backend, quiet TensorFlow,
                  the device flags
    run_folder/   the files of a run folder, its lock, its attempts
    backends/     all that differs between TensorFlow and JAX (devices, distribution)
    families/     one module (or folder) per model family: roberta, bert, modernbert
    data/         pretraining input: shard lists, the data order, tf.data and grain, masking
    models/       building a model, finding a run's weights, checkpoints of others (--init_from)
    pretraining/  the pretraining run: flags, plan, train step, optimizer, schedule, callbacks
    finetuning/   fine-tuning and scoring downstream (tasks, GLUE, Hub datasets)
    release/      after training: export, model card, push, predict, fill-mask, baseline, plot

The commands are thin launchers at this level (`python -m trainer.task`, `.finetune`,
`.export`, `.predict`, `.fill_mask_demo`, `.baseline`, `.plot`, `.keras_hub_presets`): each
chooses the backend (trainer/startup/launch.py) and runs its room's `main`. Importing a module
has no side effect beyond importing.
"""
