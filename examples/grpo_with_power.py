"""A user's own GRPO script with grpo-power's two callbacks: power in the logs, a power cap.

The stock ``trl.GRPOTrainer`` trains a tiny random-weight Qwen2 on the CPU for a few steps;
``PowerCallback`` adds the GPUs' power to every log (so TensorBoard gets it like TRL's own
metrics) and writes the power trace; ``PowerCapCallback`` runs a controller before each step. On
a machine without an NVIDIA GPU the power is the simulated A100's (``power/simulated`` is 1),
driven by the run's real forward passes.

    .venv/bin/python examples/grpo_with_power.py --out results/examples/grpo

Swap ``GRPOTrainer`` for ``grpo_power.workload.trainer.PowerAwareGRPOTrainer`` (one line, plus
its ``signal=power.monitor.signal, concurrency=N`` arguments) and the controller drives
generation concurrency too. ``--controller DIR`` loads a controller trained by
``grpo-power controller train`` instead of the rule below.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from grpo_power.callbacks import PowerCallback, PowerCapCallback
from grpo_power.control.contract import Action, Observation
from grpo_power.workload.models import tiny_model_dir
from grpo_power.workload.task import arithmetic_dataset, exact_answer_reward, format_reward

CAP_W = 280.0  # per-GPU cap, W (the simulated A100 of this tiny run draws about 260-300 W)


class ShorterWhenHot:
    """A controller of one's own: any object with ``decide(observation) -> Action``. Starts at
    half the completion length (no power seen yet), halves it when the last seconds' p95 power
    was above the cap, else lengthens it; never past the run's ``max_completion_length``, the
    ceiling ``PowerCapCallback`` keeps."""

    def decide(self, observation: Observation) -> Action:
        if not observation.samples or observation.p95_power_w > observation.cap_w:
            return Action(max_new_tokens=observation.max_new_tokens // 2)
        return Action(max_new_tokens=observation.max_new_tokens + 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/examples/grpo"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--controller", type=Path, help="a `grpo-power controller train` folder")
    options = parser.parse_args()

    model_dir = tiny_model_dir(Path(".cache/grpo-power"))  # built locally, nothing downloaded
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    args = GRPOConfig(
        output_dir=str(options.out),
        max_steps=options.steps,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        beta=0.0,
        logging_steps=1,
        report_to=["tensorboard"],  # or wandb, trackio, codecarbon: power is logged like loss
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    power = PowerCallback(trace=options.out / "power.parquet", cap_w=CAP_W)
    cap = PowerCapCallback(
        controller=options.controller or ShorterWhenHot(),
        cap_w=CAP_W,
        monitor=power.monitor,
        pause_s=0.5,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[exact_answer_reward, format_reward],
        args=args,
        train_dataset=arithmetic_dataset(options.steps * 4, seed=0),
        processing_class=tokenizer,
        callbacks=[power, cap],
    )
    trainer.train()
    label = " (SIMULATED power)" if power.monitor.simulated else ""
    shown = ("power/mean_w", "power/max_w", "power/energy_j", "power/tokens_per_mj")
    print(f"power in the trainer's logs{label}, and the controller's max new tokens:")
    for entry in trainer.state.log_history:
        if "loss" in entry:  # a training step's log (the last one is the run's summary)
            values = ", ".join(f"{name} {entry.get(name, float('nan')):.4g}" for name in shown)
            print(
                f"  step {entry['step']}: {values}, max_new_tokens "
                f"{entry['power_cap/max_new_tokens']:.0f}"
            )
    written = power.monitor.trace.path  # power.parquet, or power-2.parquet beside an earlier one
    print(f"wrote {options.out}/runs (TensorBoard events) and {written}")


if __name__ == "__main__":
    main()
