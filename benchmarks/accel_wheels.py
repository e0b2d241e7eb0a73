"""The wheels the GPU machine lacks for our trainer's JAX path, and the one command it runs.

    python -m benchmarks.accel_wheels download   # cp312 wheels into .accel-wheels/, total size
    python -m benchmarks.accel_wheels check      # each wheel's requirements met there
    python -m benchmarks.accel_wheels command    # the command line for the device's `run`

The borrowed GPU machine (docs/benchmarks.md "On the GPU machine") has Python 3.12, JAX with
CUDA, PyTorch and transformers, no network, and none of keras, keras-hub, grain, TensorFlow
or Apache Beam; the repository and at most 64 MiB of carried files reach it. `CARRIED` is
exactly what `python -m benchmarks.bench_accel` imports that `IMAGE` lacks (found by running
it with only IMAGE + CARRIED importable: tests/trainer/test_bench_accel.py), each at its pin in
constraints.txt, downloaded without dependencies for CPython 3.12 on x86-64 Linux.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import zipfile

from benchmarks.accel import shapes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = ".accel-wheels"  # ignored by git (.gitignore); carried by the device's `run`
SITE = "/tmp/accel-site"  # where the machine installs them (outside the repository copy)
LIMIT_MIB = 50  # the carried total must leave room for the repository within 64 MiB
# (15.3 MiB on 2026-11-26: 15 wheels)

# The distributions of the GPU machine's image ('cuda'), as read there on 2026-11-17
# (the device tool's KINDS.md): what need not be carried. Versions there may differ from
# constraints.txt (jax 0.11.2, torch 2.11.0, transformers 5.17.0, huggingface-hub 1.33.0).
IMAGE = frozenset(
    """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator
lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx
ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver
nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless
optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy
peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow
pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark
pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml
regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy
seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq
torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray
xxhash yarl zipp
""".split()
)

# What our trainer (JAX backend) and the benchmark import beyond IMAGE, and why.
CARRIED = (
    "keras",
    "namex",
    "optree",  # Keras 3
    "keras-hub",
    "kagglehub",
    "kagglesdk",  # the models (kaggle*: imported by keras-hub)
    "grain",
    "array-record",
    "portpicker",  # the JAX backend's input pipeline
    # TFRecord checksums (common/tfrecord.py) and the decompressing reader common/fs.py
    # imports (common/decompress.py); Apache Beam is not needed: fs.py falls back to
    # common/local_files.py for local paths where Beam is not installed.
    "google-crc32c",
    "zstandard",
    # huggingface_hub 2.x (common/publish.py, hf_push.py; the image has 1.33) and its client;
    # put on the path of our trainer only (bench_accel --site), not of transformers.
    "huggingface-hub",
    "httpx2",
    "httpcore2",
    "truststore",
)
# Declared requirements that are never imported on our path, so they are not carried.
NOT_NEEDED = {
    ("keras-hub", "tensorflow-text"): "keras-hub 0.32 imports it only inside try "
    "blocks, for its tokenizer layers, which our trainer does not use"
}
PLATFORMS = (
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
)
MACHINE = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(constraints: str = os.path.join(ROOT, "constraints.txt")) -> dict[str, str]:
    """`{name: version}` of CARRIED, from constraints.txt (every one must be pinned there)."""
    with open(constraints) as f:
        found = dict(normal_pin(line) for line in f if "==" in line and not line.startswith("#"))
    missing = [n for n in CARRIED if normal(n) not in found]
    if missing:
        raise SystemExit(f"error: constraints.txt pins no version of {', '.join(missing)}")
    return {normal(n): found[normal(n)] for n in CARRIED}


def normal_pin(line: str) -> tuple[str, str]:
    name, version = line.split("#")[0].strip().split("==")
    return normal(name.split("[")[0]), version.strip()


def download(folder: str) -> int:
    """Downloads the pinned cp312 wheels (no dependencies) into `folder`; returns bytes."""
    os.makedirs(folder, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--dest",
        folder,
        *[f"--platform={p}" for p in PLATFORMS],
        *[f"{name}=={version}" for name, version in pins().items()],
    ]
    subprocess.run(command, check=True)
    return sum(os.path.getsize(p) for p in wheels(folder))


def dry_run(folder: str) -> str:
    """pip's own check that the folder installs on CPython 3.12 x86-64 Linux with no index
    and no other package (tags, one version per name); returns pip's "Would install" line."""
    import tempfile

    with tempfile.TemporaryDirectory() as target:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--no-index",
                "--no-deps",
                "--target",
                target,
                "--python-version",
                "3.12",
                "--implementation",
                "cp",
                "--only-binary=:all:",
                *[f"--platform={p}" for p in PLATFORMS],
                *wheels(folder),
            ],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise SystemExit(
            f"error: pip cannot install {folder} there: {done.stderr.strip().splitlines()[-1:]}"
        )
    return next((line for line in done.stdout.splitlines() if line.startswith("Would")), "")


def wheels(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "*.whl")))


def wheel_name(path: str) -> str:
    return normal(os.path.basename(path).split("-")[0])


def unmet(folder: str) -> list[str]:
    """'wheel needs requirement' for each requirement (markers evaluated for the machine,
    extras left out) that neither the image nor a carried wheel provides; also a name
    carried twice (two versions stop the whole install)."""
    from packaging.requirements import Requirement

    found = [wheel_name(p) for p in wheels(folder)]
    problems = [f"{name} is carried twice" for name in sorted(set(found)) if found.count(name) > 1]
    have = IMAGE | set(found)
    for path in wheels(folder):
        for line in _requires(path):
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate(MACHINE):
                continue
            if (
                normal(requirement.name) not in have
                and (wheel_name(path), normal(requirement.name)) not in NOT_NEEDED
            ):
                problems.append(f"{wheel_name(path)} needs {requirement}")
    return problems


def _requires(path: str) -> list[str]:
    with zipfile.ZipFile(path) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        text = whl.read(meta).decode("utf-8", "replace")
    return [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def command(family: str = shapes.DEFAULT) -> str:
    """The one command line for the device's `run` (carry: [FOLDER]): install the wheels
    into SITE, then the quick benchmark of `family`, its table in the output and its JSON
    in $OUT. The default family's is the short one, within --quick's 480 s; another family
    names itself and gets 520 s of the call's 600 (ModernBERT's base at 512 and 1024)."""
    install = (
        f"python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "
        f"--target {SITE} {FOLDER}/*.whl && PYTHONUNBUFFERED=1 "
    )
    if family == shapes.DEFAULT:
        return install + (
            f"timeout 560 python3 -m benchmarks.bench_accel --quick --torch yes --site {SITE} "
            f"--json $OUT/bench_accel.json"
        )
    return install + (
        f"timeout 570 python3 -m benchmarks.bench_accel --family {family} --quick --budget 520 "
        f"--torch yes --site {SITE} --json $OUT/bench_accel_{family}.json"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("download", "check", "command"))
    parser.add_argument("--folder", default=os.path.join(ROOT, FOLDER))
    parser.add_argument(
        "--family", choices=shapes.FAMILIES, default=shapes.DEFAULT, help="for command"
    )
    args = parser.parse_args(argv)
    if args.action == "command":
        print(command(args.family))
        return 0
    if args.action == "download":
        total = download(args.folder)
        print(
            f"{len(wheels(args.folder))} wheels in {args.folder}: {total / 2**20:.1f} MiB "
            f"(limit {LIMIT_MIB} MiB)"
        )
        if total > LIMIT_MIB * 2**20:
            print(f"error: more than {LIMIT_MIB} MiB to carry", file=sys.stderr)
            return 2
    print(f"pip --dry-run: {dry_run(args.folder)[:90]}...")
    problems = unmet(args.folder)
    for problem in problems:
        print(f"unmet: {problem}")
    print(
        "every requirement is met by the image or a carried wheel"
        if not problems
        else f"error: {len(problems)} unmet requirement(s)",
        file=sys.stderr if problems else sys.stdout,
    )
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
