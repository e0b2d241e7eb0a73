"""A run folder's files: `run_dir` (every file's name and how it is written), `run_record`
(run_config.json as typed fields: its one reader and writer), `folder_lock` (one run per
folder; `lock_flags` its flags) and `attempts` (one record per start or restart)."""
