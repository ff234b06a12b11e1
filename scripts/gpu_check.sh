#!/usr/bin/env bash
# GPU telemetry check (issue 2): on a machine with an NVIDIA GPU, record 60 s of a busy
# matrix-multiply loop and then 30 s idle with NVML at 0.1 s, and print the energy from the
# hardware counter against the energy from integrated power.
#
#   scripts/gpu_check.sh [OUT_DIR]          # default OUT_DIR: results/gpu_check
#
# Without an NVIDIA GPU it runs the same steps against the simulated A100 (labelled so), which is
# how the script itself is tested on CPU machines. GPU_CHECK_BUSY_S / GPU_CHECK_IDLE_S shorten it.
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir=${1:-results/gpu_check}
busy_s=${GPU_CHECK_BUSY_S:-60}
idle_s=${GPU_CHECK_IDLE_S:-30}
bin=${GRPO_POWER_BIN:-.venv/bin}
mkdir -p "$out_dir"

if nvidia-smi -L >/dev/null 2>&1; then
  source=nvml
  nvidia-smi --query-gpu=name,driver_version,power.default_limit --format=csv | tee "$out_dir/gpu.csv"
else
  source=simulated
  echo "no NVIDIA GPU here: running the check against the SIMULATED A100 (not a measurement)"
fi

echo "== energy check: ${busy_s} s matmul then ${idle_s} s idle, ${source} telemetry at 0.1 s"
"$bin/grpo-power" telemetry record --source "$source" --period 0.1 \
  --out "$out_dir/energy_check.parquet" -- \
  "$bin/python" -m grpo_power.workload.demo --mode matmul --seconds "$busy_s" --idle-after "$idle_s"
"$bin/grpo-power" telemetry summary --compare-energy "$out_dir/energy_check.parquet" \
  | tee "$out_dir/energy_check.txt"
