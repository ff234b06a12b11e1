#!/usr/bin/env bash
# GPU validation (docs/gpu-validation.md): on a machine with an NVIDIA GPU, with NVML at 0.1 s,
#  1. the energy check: busy matrix multiplies, then idle; the energy counter against integrated
#     power (energy_check.parquet, energy_check.txt);
#  2. GRPO with a random-weight Qwen2.5-1.5B at 3 concurrency x 2 max-new-token levels, and at
#     the highest of both with the training chunk at its lowest and highest, a few steps each
#     (grid/c<C>-t<T> and grid/c32-t64-m<M>: one run folder each);
#  3. the threshold arm and the ppo arm under a cap half way between the idle power of step 1
#     and the mean power of the uncontrolled setting (concurrency 32, 64 new tokens) of step 2
#     (arms/threshold, arms/ppo; cap.json says how the cap was set). The ppo arm's controller
#     is trained in the simulator for the H100 7b deployment first (step 0, about 30 s of CPU),
#     unless GPU_VALIDATE_CONTROLLER names one trained already.
#  4. the PowerCallback on the stock trl.GRPOTrainer: examples/grpo_with_power.py, 3 steps
#     (callback/).
# On a GPU an nvidia-smi log at 0.1 s runs beside all of it (smi.csv, for `telemetry import` and
# the planner). Then it packs every small file (traces, step logs, manifests; no checkpoints)
# into gpu_validate.tar.gz for tests/data/gpu/.
#
#   scripts/gpu_validate.sh [OUT_DIR]          # default OUT_DIR: results/gpu_validate
#
# Without an NVIDIA GPU every step runs against the simulated H100 with the tiny model, labelled
# SIMULATED (that is how the tests check the script). Settings (environment):
#   GRPO_POWER_PYTHON       the Python with grpo-power installed (default .venv/bin/python)
#   GPU_VALIDATE_CONTROLLER a trained controller folder for the ppo arm (default: train one)
#   GPU_VALIDATE_BUSY_S / _IDLE_S / _STEPS / _ARM_S   seconds and steps of each part
set -euo pipefail
out_dir=$(realpath -m "${1:-$(dirname "$0")/../results/gpu_validate}")
cd "$(dirname "$0")/.."
py=${GRPO_POWER_PYTHON:-.venv/bin/python}
controller=${GPU_VALIDATE_CONTROLLER:-}
busy_s=${GPU_VALIDATE_BUSY_S:-30}
idle_s=${GPU_VALIDATE_IDLE_S:-15}
steps=${GPU_VALIDATE_STEPS:-3}
arm_s=${GPU_VALIDATE_ARM_S:-120}
grpo=("$py" -m grpo_power.cli)
mkdir -p "$out_dir"

# Whatever ends the script (a failed step too), the nvidia-smi log is stopped and the small
# files it wrote are packed.
smi_pid=
pack() {
  if [ -n "$smi_pid" ]; then kill "$smi_pid" 2>/dev/null || true; fi
  (cd "$out_dir" && find . -type f -size -5M ! -name gpu_validate.tar.gz ! -path "./study/*" \
    ! -path "*/checkpoint*" ! -path "*/.completed/*" -print0 | tar czf gpu_validate.tar.gz --null -T -)
  echo "packed the small files into $out_dir/gpu_validate.tar.gz ($(du -h "$out_dir/gpu_validate.tar.gz" | cut -f1))"
}
trap pack EXIT

if nvidia-smi -L >/dev/null 2>&1; then
  source=nvml
  size=qwen2.5-1.5b
  nvidia-smi --query-gpu=name,driver_version,power.default_limit,power.min_limit,power.max_limit \
    --format=csv | tee "$out_dir/gpu.csv"
  # the README's nvidia-smi log ("Importing your own traces"), every 100 ms
  nvidia-smi --query-gpu=timestamp,index,uuid,power.draw,power.draw.average,utilization.gpu,utilization.memory,clocks.sm,temperature.gpu,power.limit,power.default_limit \
    --format=csv -lms 100 > "$out_dir/smi.csv" &
  smi_pid=$!
else
  source=simulated
  size=tiny
  echo "no NVIDIA GPU here: every step runs against the SIMULATED H100 (not a measurement)"
fi

# The validation's config: the H100 study (config/h100.yaml) with NVML at 0.1 s, the 1.5B model,
# and no periodic checkpoints (a 1.5B run's optimizer state is gigabytes).
config="$out_dir/config.yaml"
"$py" - "$config" "$source" "$size" "$out_dir" <<'PY'
import sys
from pathlib import Path

import yaml

from grpo_power.config import deep_merge, validate_config

path, source, size, out = sys.argv[1:]
data = deep_merge(yaml.safe_load(open("config/config.yaml")), yaml.safe_load(open("config/h100.yaml")))
data = deep_merge(data, {
    "results_dir": str(Path(out) / "study"),
    "telemetry": {"source": source, "period_s": 0.1},
    "workload": {"size": size, "checkpoint_every_steps": 0},
})
validate_config(data, path)
Path(path).write_text(yaml.safe_dump(data))
PY

# The ppo arm's controller, where the config's layout has it (results_dir/controller/7b).
study_controller="$out_dir/study/controller/7b"
if [ -n "$controller" ]; then
  rm -rf "$study_controller" && mkdir -p "$(dirname "$study_controller")"
  cp -r "$controller" "$study_controller"
elif [ ! -f "$study_controller/controller.json" ]; then
  echo "== 0. the ppo arm's controller: trained in the simulator (H100, 7b deployment)"
  "${grpo[@]}" identify --out "$out_dir/study/identify" --real-sweep-steps 0 --config "$config"
  "${grpo[@]}" controller train --deployment 7b --out "$study_controller" \
    --calibration "$out_dir/study/identify/calibration.json" \
    --authority "$out_dir/study/identify/authority.json" --config "$config"
fi

echo "== 1. energy check: ${busy_s} s matmul then ${idle_s} s idle, ${source} telemetry at 0.1 s"
"${grpo[@]}" telemetry record --source "$source" --period 0.1 --config "$config" \
  --out "$out_dir/energy_check.parquet" -- \
  "$py" -m grpo_power.workload.demo --mode matmul --seconds "$busy_s" --idle-after "$idle_s"
"${grpo[@]}" telemetry summary --compare-energy --config "$config" \
  "$out_dir/energy_check.parquet" | tee "$out_dir/energy_check.txt"

echo "== 2. GRPO grid: $size, $steps steps at each concurrency x max new tokens"
for concurrency in 4 16 32; do
  for tokens in 16 64; do
    "${grpo[@]}" run --config "$config" --arm fixed --concurrency "$concurrency" \
      --max-new-tokens "$tokens" --steps "$steps" --out "$out_dir/grid/c$concurrency-t$tokens"
  done
done
# the training chunk (sequences per forward/backward) at its bounds, the rest at their highest
read -r chunk_min chunk_max < <("$py" -c "import sys; from grpo_power.config import load_config
b = load_config(sys.argv[1]).workload.train_micro_batch_bounds; print(b.min, b.max)" "$config")
for chunk in "$chunk_min" "$chunk_max"; do
  "${grpo[@]}" run --config "$config" --arm fixed --concurrency 32 --max-new-tokens 64 \
    --train-micro-batch "$chunk" --steps "$steps" --out "$out_dir/grid/c32-t64-m$chunk"
done

# the sweep index `grpo-power identify --sweep` reads: each actuator's lowest and highest level
# at the others' highest (concurrency 32 with 64 new tokens is both actuators' highest level;
# the training chunk there is the config's)
"$py" - "$out_dir/grid" "$config" "$steps" "$chunk_min" "$chunk_max" <<'PY'
import sys
from pathlib import Path

from grpo_power.config import load_config
from grpo_power.workload.sweep import write_sweep_index

grid, config, steps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
chunk_min, chunk_max = int(sys.argv[4]), int(sys.argv[5])
runs = [("concurrency", 4, "c4-t64"), ("concurrency", 32, "c32-t64"),
        ("max_new_tokens", 16, "c32-t16"), ("max_new_tokens", 64, "c32-t64"),
        ("train_micro_batch", chunk_min, f"c32-t64-m{chunk_min}"),
        ("train_micro_batch", chunk_max, f"c32-t64-m{chunk_max}")]
write_sweep_index(grid, steps, load_config(config).seed, runs)
PY

echo "== 3. the threshold and ppo arms under a cap between idle and uncontrolled power"
"$py" - "$out_dir" "$config" "$idle_s" "$arm_s" <<'PY'
import json
import math
import sys
from pathlib import Path

import yaml

from grpo_power.config import load_config
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace
from grpo_power.workload.sweep import measured_sweep_row

out, config, idle_s, arm_s = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
energy = read_trace(out / "energy_check.parquet").frame
# idle: the last seconds of the check, after a 3 s settle (NVML averages over about 1 s)
idle_w = float(energy.loc[energy["t"] >= energy["t"].max() - max(idle_s - 3.0, 1.0), "power_w"].mean())
# the uncontrolled setting's mean power over its steps after the first (as identify's sweep rows)
row = measured_sweep_row(out / "grid" / "c32-t64", "concurrency", 32, "7b", load_config(config))
mean_w = row["mean_power_w"]
cap_w = round((idle_w + mean_w) / 2.0, 1)
# steps for about arm_s at the slowest 64-token setting (a controller may go down to it)
step_s = max(
    float((log["end_s"] - log["start_s"]).mean())
    for log in (read_step_log(out / "grid" / f"c{c}-t64" / "steps.parquet") for c in (4, 16, 32))
)
arm_steps = max(5, math.ceil(arm_s / step_s))
data = yaml.safe_load(config.read_text())
data["cap_w"] = cap_w
(out / "arms.yaml").write_text(yaml.safe_dump(data))
how = {"cap_w": cap_w, "idle_w": round(idle_w, 1), "uncontrolled_mean_w": round(mean_w, 1),
       "uncontrolled_run": "grid/c32-t64", "rule": "cap half way between idle and uncontrolled mean",
       "steps": arm_steps, "slowest_step_s": round(step_s, 2)}
(out / "cap.json").write_text(json.dumps(how, indent=1) + "\n")
print(json.dumps(how))
PY
arm_steps=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$out_dir/cap.json")
"${grpo[@]}" run --config "$out_dir/arms.yaml" --arm threshold --steps "$arm_steps" \
  --out "$out_dir/arms/threshold"
"${grpo[@]}" run --config "$out_dir/arms.yaml" --arm ppo --steps "$arm_steps" \
  --out "$out_dir/arms/ppo"

echo "== 4. the PowerCallback on the stock trl.GRPOTrainer (examples/grpo_with_power.py)"
"$py" examples/grpo_with_power.py --out "$out_dir/callback" --steps 3
