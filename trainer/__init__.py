"""Keras 3 / keras-hub masked-language-model trainer (TPU, GPU, CPU; TensorFlow or JAX).

Rooms, bottom up: a room imports only rooms above it in this list (tests/test_layers.py ROOMS,
with no exemption). The two commands that train sit at the top, side by side: neither imports
the other; what they share is below them (training/, release/).

    startup/      what a command does before Keras is imported: the backend, quiet TensorFlow,
                  the device flags
    families/     one module (or folder) per model family: roberta, bert, modernbert
    run_folder/   the files of a run folder, its run_config.json as a record (which holds a
                  family), its lock, its attempts
    data/         pretraining input: shard lists, the data order, tf.data and grain, masking
    backends/     all that differs between TensorFlow and JAX (devices, distribution)
    models/       building a model, finding a run's weights, checkpoints of others (--init_from)
    training/     what both training loops share: the optimizer, schedules, summaries, how a
                  pod's hosts agree
    release/      what a model becomes: export, model card, push, predict, fill-mask, baseline,
                  plot (pretraining exports and pushes at its end; fine-tuning writes cards)
    tasks/        labelled tasks and their scores: kinds, metrics, files, Hub datasets, GLUE
    pretraining/  the pretraining run: flags, plan, train step, callbacks, the run itself
    finetuning/   the fine-tuning run: packing, the classifier, recipes, protocol, results

The commands are thin launchers at this level (`python -m trainer.task`, `.finetune`,
`.export`, `.predict`, `.fill_mask_demo`, `.baseline`, `.plot`, `.keras_hub_presets`): each
chooses the backend (trainer/startup/launch.py) and runs its room's `main`. Importing a module
has no side effect beyond importing.
"""
