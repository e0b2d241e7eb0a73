"""What a prepare run records of how it was started, in each split's manifest: every
prepare flag (with its default when not set), every Beam flag the user set, the package
version and the git commit of the source tree; never a secret.
"""

from __future__ import annotations

import os

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipelines import options as opts_lib

# Options whose values are secrets, never written to a manifest (names, not patterns: a
# pattern like "token" also dropped --tokenizer).
SECRET_OPTIONS = (
    "hf_token",
    "token",
    "access_token",
    "auth_token",
    "password",
    "service_account_key",
    "credentials",
)


def recorded_args(options: PipelineOptions) -> dict:
    """The run's settings for the manifest: every prepare flag (with its default when not
    set), every Beam flag the user set, the package version and git commit; no secret."""
    everything = options.get_all_options()
    args = {
        **options.get_all_options(drop_default=True),
        **{k: everything.get(k) for k in opts_lib.PrepareOptions.flag_names()},
    }
    return {k: v for k, v in sorted(args.items()) if k not in SECRET_OPTIONS} | {
        "_version": package_version(),
        "_git_commit": git_commit(),
    }


def package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("mlm-pretrain")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_commit() -> str | None:
    """The commit of this source tree, when it is a git checkout (not on Dataflow workers)."""
    import subprocess

    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=os.path.dirname(os.path.abspath(__file__)),
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
