"""The pretraining run (`python -m trainer.task`): `task` (the run), `config` (flags), `plan`
(what a start or restart may change), `run_setup`, `pretrain_recipe`, `context_extension`,
`train_step`, `callbacks` (the optimizer, schedules and summaries are trainer/training/'s)."""
