#!/usr/bin/env bash
# GPU check (issues 2 and 3): on a machine with an NVIDIA GPU, record 60 s of a busy
# matrix-multiply loop and then 30 s idle with NVML at 0.1 s, and print the energy from the
# hardware counter against the energy from integrated power; then short GRPO runs at two
# concurrency levels (GRPO section below).
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

# GRPO section (issue 3): a random-weight model of a real architecture, 20 steps at two
# concurrency levels (sequences generated together), NVML at 0.1 s; mean power and tokens/s.
if [ "$source" = nvml ]; then size=${GPU_CHECK_SIZE:-qwen2.5-0.5b}; else size=tiny; fi
steps=${GPU_CHECK_STEPS:-20}
levels=${GPU_CHECK_CONCURRENCY:-4 32}
config="$out_dir/grpo_config.yaml"
"$bin/python" - "$config" "$source" "$size" <<'PY'
import sys
import yaml
from grpo_power.config import deep_merge, validate_config
path, source, size = sys.argv[1:]
base = yaml.safe_load(open("config/config.yaml"))
data = deep_merge(base, {"telemetry": {"source": source, "period_s": 0.1},
                         "workload": {"size": size}})
validate_config(data, path)
open(path, "w").write(yaml.safe_dump(data))
PY
for concurrency in $levels; do
  echo "== GRPO: $size, $steps steps at concurrency $concurrency, $source telemetry at 0.1 s"
  "$bin/grpo-power" run --config "$config" --arm fixed --concurrency "$concurrency" \
    --steps "$steps" --out "$out_dir/grpo-c$concurrency"
done
"$bin/python" - "$out_dir" $levels <<'PY' | tee "$out_dir/grpo_check.txt"
import sys
from pathlib import Path
from grpo_power.telemetry.store import read_trace
from grpo_power.telemetry.steplog import read_step_log
out = Path(sys.argv[1])
for concurrency in sys.argv[2:]:
    run = out / f"grpo-c{concurrency}"
    steps = read_step_log(run / "steps.parquet")
    trace = read_trace(run / "trace.parquet")
    t0, t1 = steps["start_s"].min(), steps["end_s"].max()
    t_s = trace.frame["t"]
    frame = trace.frame[(t_s >= t0) & (t_s <= t1)]
    # each step generates first: [start_s, start_s + generate_s] is its generation phase
    generating = sum(((t_s >= a) & (t_s <= a + g)) for a, g in zip(steps["start_s"], steps["generate_s"]))
    label = " (SIMULATED)" if trace.metadata.simulated else ""
    in_generation = trace.frame.loc[generating > 0, "power_w"]
    generation = (f"generation {in_generation.mean():.1f} W" if len(in_generation) else
                  "generation n/a (no 0.1 s sample fell in its phases)")
    print(f"concurrency {concurrency}: mean power {frame['power_w'].mean():.1f} W per GPU{label}, "
          f"{generation}, "
          f"{steps['completion_tokens'].sum() / (t1 - t0):.0f} completion tokens/s "
          f"over {len(steps)} steps ({trace.metadata.gpu_name})")
PY
