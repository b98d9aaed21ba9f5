#!/usr/bin/env bash
# Build qbackends' job images, and run Braket Hybrid Jobs in the CPU image as Braket runs them: the job's code
# uploaded to S3 (a moto server on loopback), the container started by SageMaker's training toolkit (`train`) or
# as Braket's local mode starts it (`python $SAGEMAKER_PROGRAM`), with Braket's environment and /opt/ml mounts.
# Not part of CI: it needs root, docker with BuildKit, debootstrap where no base image is given, pip's index
# (the host's pip settings are passed to the builds) and about 15 GB of disk.
#
#   BRAKET_QAOA_EXAMPLE=~/amazon-braket-examples/examples/hybrid_jobs/4_Embedded_simulators_in_Braket_Hybrid_Jobs/qaoa \
#     docker/test.sh
#
# Settings (environment):
#   BRAKET_QAOA_EXAMPLE  the qaoa folder of Braket's example, unchanged (git clone
#                        https://github.com/amazon-braket/amazon-braket-examples); this repository does not carry it
#   BASE_IMAGE           the CPU image's base (default: docker/debian-base.sh makes or reuses qbackends-base:bookworm)
#   CUDA_BASE_IMAGE      the CUDA image's base (default nvidia/cuda:12.6.3-base-ubuntu24.04 where it is here, else BASE_IMAGE)
#   SKIP_CUDA=1          build the CPU image only
#   PYTHON               a Python with moto[server] and boto3 (default: a venv made once in ~/.cache/qbackends)
#   DOCKER               a docker client that builds with BuildKit (default: the first such `docker` on PATH)
#   WORK                 where builds' logs, job folders and the summary go (default: a new folder under /tmp)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
work=${WORK:-$(mktemp -d /tmp/qbackends-docker-test.XXXXXX)}
mkdir -p "$work"
cpu_image=qbackends:cpu
cuda_image=qbackends:cuda
bucket=amazon-braket-us-east-1-123456789012
summary="$work/summary.txt"
: >"$summary"

say() { printf '== %s\n' "$*"; }
note() { printf '%s\n' "$*" | tee -a "$summary"; }
die() { printf 'docker/test.sh: FAILED: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# ---- inputs ------------------------------------------------------------------------------------------------
example=${BRAKET_QAOA_EXAMPLE:-}
if [ -z "$example" ] || [ ! -f "$example/qaoa_algorithm.py" ] || [ ! -f "$example/utils.py" ]; then
  die "BRAKET_QAOA_EXAMPLE=${example:-<unset>} is not the qaoa folder of Braket's example: set it to
  amazon-braket-examples/examples/hybrid_jobs/4_Embedded_simulators_in_Braket_Hybrid_Jobs/qaoa
  (git clone https://github.com/amazon-braket/amazon-braket-examples)"
fi
[ "$(basename "$example")" = qaoa ] || die "BRAKET_QAOA_EXAMPLE must be the folder named qaoa (its entry point is qaoa.qaoa_algorithm)"
[ "$(id -u)" = 0 ] || die "run it as root (docker, debootstrap)"

pick_docker() {
  local candidates
  if [ -n "${DOCKER:-}" ]; then candidates=("$DOCKER"); else mapfile -t candidates < <(type -ap docker); fi
  for client in "${candidates[@]}"; do
    if "$client" buildx version >/dev/null 2>&1; then echo "$client buildx"; return; fi
    if DOCKER_BUILDKIT=1 "$client" build --help 2>/dev/null | grep -q -- '--secret'; then echo "$client builtin"; return; fi
  done
  die "no docker client here builds with BuildKit (RUN --mount): install docker-buildx, or set DOCKER to a client with it built in (Docker 20.10-22)"
}
read -r docker builder < <(pick_docker)
build() {
  if [ "$builder" = buildx ]; then "$docker" buildx build --load "$@"; else DOCKER_BUILDKIT=1 "$docker" build "$@"; fi
}
"$docker" info >/dev/null 2>&1 || die "the docker daemon does not answer ($docker info)"

if [ -z "${PYTHON:-}" ]; then
  PYTHON=${XDG_CACHE_HOME:-$HOME/.cache}/qbackends/docker-test-venv/bin/python
  if ! "$PYTHON" -c 'import moto.server, boto3' 2>/dev/null; then
    say "a Python with moto[server] and boto3 for the host's side: $(dirname "$(dirname "$PYTHON")")"
    python3 -m venv "$(dirname "$(dirname "$PYTHON")")"
    "$PYTHON" -m pip install "moto[server]" boto3 >"$work/host-venv.log" 2>&1 || { tail -20 "$work/host-venv.log" >&2; die "pip install moto[server] boto3"; }
  fi
fi
"$PYTHON" -c 'import moto.server, boto3' || die "PYTHON=$PYTHON lacks moto[server] or boto3: pip install 'moto[server]' boto3"

note "work folder: $work"
note "Braket's example: $example"
(cd "$example" && sha256sum qaoa_algorithm.py utils.py) | sed 's/^/  sha256 /' | tee -a "$summary"

# ---- images ------------------------------------------------------------------------------------------------
if [ -n "${BASE_IMAGE:-}" ]; then
  base=$BASE_IMAGE
else
  say "base image (docker/debian-base.sh: made once with debootstrap, then reused)"
  t0=$(now)
  base=$(DOCKER="$docker" "$here/debian-base.sh" 2>"$work/base.log") || { tail -20 "$work/base.log" >&2; die "no base image (log: $work/base.log)"; }
  note "base image $base ready in $(since "$t0") s"
fi

say "pip settings for the builds (the host's; local folders served on loopback)"
mkdir -p "$work/pip"
"$PYTHON" "$here/testkit.py" pip-settings "$work/pip" >"$work/pip/serve.txt"
while read -r port folder; do
  "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$folder" "$port" >"$work/pip/http-$port.log" 2>&1 &
  pids+=($!)
done <"$work/pip/serve.txt"
sed 's/^/  /' "$work/pip/pip.conf"
secrets=(--secret "id=pip.conf,src=$work/pip/pip.conf")
[ -f "$work/pip/pip-cert.pem" ] && secrets+=(--secret "id=pip-cert,src=$work/pip/pip-cert.pem")

build_image() {  # build_image NAME DOCKERFILE BASE
  local log="$work/build-$1.log" t0
  say "building $1 image ($2, BASE_IMAGE=$3; log: $log)"
  t0=$(now)
  if ! build --network host --progress plain -f "$repo/$2" --build-arg "BASE_IMAGE=$3" "${secrets[@]}" -t "qbackends:$1" "$repo" >"$log" 2>&1; then
    tail -40 "$log" >&2
    die "the $1 image did not build (log: $log)"
  fi
  grep -E ' check(: | failed)' "$log" | sed -E 's/^#[0-9]+ [0-9.]+ /  /'
  note "image qbackends:$1: built in $(since "$t0") s, $(("$("$docker" image inspect -f '{{.Size}}' "qbackends:$1")" / 1000000)) MB"
}
build_image cpu docker/Dockerfile.cpu "$base"
"$docker" run --rm --network host "$cpu_image" qbackends list | sed 's/^/  /'

if [ "${SKIP_CUDA:-}" != 1 ]; then
  cuda_base=${CUDA_BASE_IMAGE:-}
  if [ -z "$cuda_base" ]; then
    if "$docker" image inspect nvidia/cuda:12.6.3-base-ubuntu24.04 >/dev/null 2>&1; then
      cuda_base=nvidia/cuda:12.6.3-base-ubuntu24.04
    else
      cuda_base=$base
      note "no nvidia/cuda image here: the CUDA image builds on $base (its CUDA libraries come with lightning.gpu's wheels)"
    fi
  fi
  build_image cuda docker/Dockerfile.cuda "$cuda_base"
  "$docker" run --rm --network host "$cuda_image" qbackends list --json >"$work/cuda-list.json"
  "$PYTHON" - "$work/cuda-list.json" <<'EOF' | tee -a "$summary"
import json, sys
gpu = next(r for r in json.load(open(sys.argv[1])) if r["device"] == "local:pennylane/lightning.gpu")
assert gpu["version"], gpu["reason"]
print(f"qbackends list in qbackends:cuda: lightning.gpu {gpu['version']} installed; runs here: {gpu['ok']} ({gpu['reason'] or 'a GPU'})")
EOF
fi

# ---- S3 on loopback, and the jobs' code --------------------------------------------------------------------
s3_port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
endpoint=http://127.0.0.1:$s3_port
say "moto S3 server at $endpoint"
"$PYTHON" -m moto.server -H 127.0.0.1 -p "$s3_port" >"$work/moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  "$PYTHON" -c "import urllib.request; urllib.request.urlopen('$endpoint')" 2>/dev/null && break
  sleep 0.2
done
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
"$PYTHON" "$here/testkit.py" upload "$endpoint" "$bucket" jobs/qaoa/script/source.tar.gz "$example" gzip
"$PYTHON" "$here/testkit.py" upload "$endpoint" "$bucket" jobs/ckptjob/script/source.zip "$here/testjob/ckptjob" zip

# ---- jobs --------------------------------------------------------------------------------------------------
# run_job RUN JOB_NAME ENTRY_POINT S3_KEY COMPRESSION DEVICE HYPERPARAMETERS START (train | local) [IMAGE]
run_job() {
  local run=$1 name=$2 entry=$3 key=$4 compression=$5 device=$6 hps=$7 how=$8 image=${9:-$cpu_image} t0 extra=()
  local dir="$work/jobs/$run"
  mkdir -p "$dir/input/config" "$dir/input/data/input" "$dir/model" "$dir/output" "$work/checkpoints/$name"
  printf '%s\n' "$hps" >"$dir/input/config/hyperparameters.json"
  printf '{"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}\n' >"$dir/input/config/resourceconfig.json"
  printf '{"input": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}}\n' \
    >"$dir/input/config/inputdataconfig.json"
  printf '0.1 0.7 1.3 2.1\n' >"$dir/input/data/input/angles.txt"
  # SageMaker's way (the toolkit waits until every host of resourceconfig.json resolves: algo-1 is this one);
  # Braket's local mode: docker exec -w /opt/ml/code ... python $SAGEMAKER_PROGRAM
  local start=(train)
  [ "$how" = local ] && start=(sh -c 'exec python "$SAGEMAKER_PROGRAM"')
  [ "$image" = "$cuda_image" ] && extra=(--gpus all)
  say "job $run: $entry on $device ($how; log: $dir/log.txt)"
  t0=$(now)
  set +e
  "$docker" run --rm --name "qbackends-test-$run" --network host --add-host algo-1:127.0.0.1 "${extra[@]}" \
    -v "$dir/input:/opt/ml/input" -v "$dir/model:/opt/ml/model" -v "$dir/output:/opt/ml/output" \
    -v "$work/checkpoints/$name:/opt/jobs/checkpoints" \
    -e AWS_ACCESS_KEY_ID -e AWS_SECRET_ACCESS_KEY -e AWS_DEFAULT_REGION -e "AWS_ENDPOINT_URL_S3=$endpoint" \
    -e "AMZN_BRAKET_SCRIPT_S3_URI=s3://$bucket/$key" -e "AMZN_BRAKET_SCRIPT_ENTRY_POINT=$entry" \
    -e "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE=$compression" -e "AMZN_BRAKET_DEVICE_ARN=$device" -e "AMZN_BRAKET_JOB_NAME=$name" \
    -e AMZN_BRAKET_HP_FILE=/opt/braket/input/config/hyperparameters.json -e AMZN_BRAKET_INPUT_DIR=/opt/braket/input/data \
    -e AMZN_BRAKET_CHECKPOINT_DIR=/opt/jobs/checkpoints -e AMZN_BRAKET_JOB_RESULTS_DIR=/opt/braket/model \
    -e "AMZN_BRAKET_OUT_S3_BUCKET=$bucket" -e "AMZN_BRAKET_TASK_RESULTS_S3_URI=s3://$bucket/jobs/$name/tasks" \
    -e "AMZN_BRAKET_JOB_RESULTS_S3_PATH=jobs/$name/output" \
    "$image" "${start[@]}" >"$dir/log.txt" 2>&1
  echo $? >"$dir/exit-code"
  set -e
  since "$t0" >"$dir/wall-seconds"
  echo "  exit $(cat "$dir/exit-code"), $(cat "$dir/wall-seconds") s wall"
}
check() { "$PYTHON" "$here/testkit.py" check "$work/jobs/$1" "${@:2}" || { tail -30 "$work/jobs/$1/log.txt" >&2; die "job $1"; }; }
cost() { "$PYTHON" -c "import json, sys; print(json.load(open(sys.argv[1]))['dataDictionary']['cost'])" "$work/jobs/$1/model/results.json"; }

# Braket's example, unchanged, with the notebook's hyperparameters (strings, as Braket passes them)
qaoa_hps='{"n_nodes": "6", "n_edges": "8", "n_layers": "3", "iterations": "10", "stepsize": "0.1", "seed": "42", "diff_method": "adjoint"}'
run_job qaoa-auto qaoa-auto qaoa.qaoa_algorithm jobs/qaoa/script/source.tar.gz GZIP local:qbackends/qbackends.auto "$qaoa_hps" train
check qaoa-auto qaoa 10 3
note "first job (Braket's QAOA example, auto, 6 nodes, p=3, 10 iterations): $(cat "$work/jobs/qaoa-auto/wall-seconds") s wall"
run_job qaoa-lightning qaoa-lightning qaoa.qaoa_algorithm jobs/qaoa/script/source.tar.gz GZIP local:pennylane/lightning.qubit "$qaoa_hps" local
check qaoa-lightning qaoa 10 3 "$(cost qaoa-auto)"
note "Braket's QAOA example: auto and lightning.qubit jobs ended at cost $(cost qaoa-lightning)"

# checkpoints, an input channel, hyperparameters bound to train(steps: int), a requirements.txt, a zip
run_job ckpt-1 ckpt-job ckptjob.job:train jobs/ckptjob/script/source.zip ZIP local:qbackends/fused.qubit '{"steps": "2"}' train
check ckpt-1 ckpt 2 0 "$work/checkpoints/ckpt-job/ckpt-job.json"
run_job ckpt-2 ckpt-job ckptjob.job:train jobs/ckptjob/script/source.zip ZIP local:qbackends/fused.qubit '{"steps": "4"}' train
check ckpt-2 ckpt 4 2 "$work/checkpoints/ckpt-job/ckpt-job.json" "$work/jobs/ckpt-1"

# failures: the entry point raises; a device string with a typo stops the job before its code is fetched
run_job fail fail-job ckptjob.job:fail jobs/ckptjob/script/source.zip ZIP local:qbackends/qbackends.auto '{}' train
check fail failure "ValueError: no angle for step 7 in the input channel"
run_job typo typo-job ckptjob.job:train jobs/ckptjob/script/source.zip ZIP local:pennylane/lighting.qubit '{"steps": "1"}' local
check typo failure "UnknownBackendError: Unknown simulator 'lighting.qubit' in 'local:pennylane/lighting.qubit'"

# a stopped job: docker stop sends SIGTERM to the container's first process, here the entry itself
run_job stop stop-job ckptjob.job:hold jobs/ckptjob/script/source.zip ZIP local:pennylane/lightning.qubit '{}' local &
for _ in $(seq 600); do [ -e "$work/jobs/stop/model/holding" ] && break; sleep 0.2; done
[ -e "$work/jobs/stop/model/holding" ] || die "job stop did not start (log: $work/jobs/stop/log.txt)"
"$docker" stop -t 30 qbackends-test-stop >/dev/null
wait $!
check stop failure "JobFailedError: job 'stop-job' was stopped: the job's container received SIGTERM and passed it on"
[ "$(cat "$work/jobs/stop/exit-code")" = 143 ] || die "job stop ended with $(cat "$work/jobs/stop/exit-code"), not 143 (128 + SIGTERM)"

if [ "${SKIP_CUDA:-}" != 1 ]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    run_job qaoa-gpu qaoa-gpu qaoa.qaoa_algorithm jobs/qaoa/script/source.tar.gz GZIP local:pennylane/lightning.gpu "$qaoa_hps" train "$cuda_image"
    check qaoa-gpu qaoa 10 3 "$(cost qaoa-auto)"
  else
    note "no NVIDIA GPU here: the CUDA image's QAOA job (local:pennylane/lightning.gpu) waits for a GPU machine"
  fi
fi

say "passed"
cat "$summary"
