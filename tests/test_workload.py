"""The GRPO run stage with the tiny model on the CPU, for real (TRL, no mocks)."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from grpo_power.config import Config
from grpo_power.control.contract import Action, Observation
from grpo_power.sim.defaults import literature_decode_prior
from grpo_power.sim.power_model import GpuPowerModel
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace
from grpo_power.workload import runner
from grpo_power.workload.arms import controller_for_arm
from grpo_power.workload.fixed_safe import steps_power_w
from tests.conftest import REPO


class ScriptedController:
    """Plays a list of actions, one per step, and records what it observed."""

    def __init__(self, actions: list[Action]) -> None:
        self.actions = list(actions)
        self.observations: list[Observation] = []

    def decide(self, observation: Observation) -> Action:
        self.observations.append(observation)
        return self.actions[len(self.observations) - 1]


def test_actuators_change_the_next_generation_and_are_clamped(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[int] = []
    original = runner.format_reward

    def counting_format_reward(completions: list, completion_ids: list, **kwargs: object) -> list:
        counted.append(sum(len(ids) for ids in completion_ids))  # TRL passes the token ids
        return original(completions, **kwargs)

    monkeypatch.setattr(runner, "format_reward", counting_format_reward)
    controller = ScriptedController(
        [
            Action(4, 8, train_micro_batch=2),
            Action(16, 40, train_micro_batch=8, pause_s=1),
            Action(32, 8, train_micro_batch=5, pause_s=0),
            Action(1000, 1, train_micro_batch=1000),
        ]
    )
    result = runner.run_grpo(
        config, "scripted", 0, tmp_path, controller, steps=4, show_progress=False
    )
    steps = read_step_log(result.paths.steps)
    # the trace's t and the steps' start_s count from one stated wall-clock origin, the
    # manifest's start (the trace's was taken a few ms later; the steps' was not stated)
    started_unix_s = json.loads(result.paths.manifest.read_text())["started_unix_s"]
    assert read_trace(result.paths.trace).metadata.start_unix_s == started_unix_s
    step_meta = pq.read_schema(result.paths.steps).metadata
    assert float(step_meta[b"start_unix_s"]) == started_unix_s
    # 32 sequences per step: concurrency 4 -> 8 generate calls, 16 -> 2, 32 -> 1.
    assert steps["generate_calls"].tolist() == [8, 2, 1, 1]
    assert steps["sequences"].tolist() == [32, 32, 32, 32]
    # The training pass runs in chunks of the step's train_micro_batch: 32 / 2, 32 / 8,
    # 32 / 5 (six of 5 and a remainder of 2), and the bound 8.
    assert steps["train_chunks"].tolist() == [16, 4, 7, 4]
    assert steps["train_micro_batch"].tolist() == [2, 8, 5, 8]
    # The pause: step 2 idles a second before generating, inside its wall time.
    assert steps["pause_s"].tolist() == [0, 1, 0, 0]
    second = steps.iloc[1]
    assert second["end_s"] - second["start_s"] >= 1.0 + second["generate_s"] + second["train_s"]
    # Completion lengths follow max_new_tokens (a random model rarely stops early).
    assert steps["max_completion_tokens"].tolist()[0] <= 8
    assert 8 < steps["max_completion_tokens"].tolist()[1] <= 40
    assert steps["completion_tokens"].iloc[1] > 2 * steps["completion_tokens"].iloc[0]
    # Out of bounds: asked 1000 and 1, got the bounds 32 and 8, and the clamp is logged.
    last = steps.iloc[3]
    assert (last["action_concurrency"], last["concurrency"]) == (1000, 32)
    assert (last["action_max_new_tokens"], last["max_new_tokens"]) == (1, 8)
    assert bool(last["clamped_concurrency"]) and bool(last["clamped_max_new_tokens"])
    assert (last["action_train_micro_batch"], last["train_micro_batch"]) == (1000, 8)
    assert bool(last["clamped_train_micro_batch"])
    assert not steps["clamped_concurrency"].iloc[:3].any()
    # Token counts in the log equal the completion ids TRL handed to the reward function.
    assert steps["completion_tokens"].tolist() == counted
    # Before the first step it saw no samples (the loading's are not the run's), as in the
    # simulator its policy is trained in; then live (simulated) telemetry and the previous
    # step's throughput.
    first = controller.observations[0]
    assert (first.samples, first.mean_power_w, first.tokens_per_s) == (0, 0.0, 0.0)
    assert controller.observations[-1].samples > 0
    assert controller.observations[-1].tokens_per_s == pytest.approx(steps["tokens_per_s"].iloc[2])
    assert steps["obs_samples"].iloc[-1] > 0
    trace = read_trace(result.paths.trace)
    assert trace.complete and trace.metadata.simulated and trace.metadata.arm == "scripted"
    manifest = json.loads(result.paths.manifest.read_text())
    assert manifest["status"] == "completed" and manifest["power"] == "simulated"
    assert manifest["packages"]["trl"] == "1.16.0"


def test_hwcap_is_rejected_without_nvml(config: Config, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"hwcap.*needs real GPUs, root and `telemetry\.source: nvml`"
    ):
        controller_for_arm("hwcap", config, tmp_path)
    with pytest.raises(ValueError, match=r"ppo\+hwcap.*needs real GPUs"):
        controller_for_arm("ppo+hwcap", config, tmp_path)
    with pytest.raises(ValueError, match="unknown arm 'ppo2'"):
        controller_for_arm("ppo2", config, tmp_path)


def _on_the_literature_curve(config: Config) -> Config:
    """``config`` with the simulated A100 on the literature's decode curve (its prior: 19 W per
    doubling of concurrency, 4 W of noise, prefill to 1.09 x nameplate) instead of the measured
    line (6.55 W per doubling, 6.4 W of noise). On the measured line the whole concurrency range
    moves decode power by 33 W, five noise widths: a 12-step run's 30 to 50 samples then put an
    arm's p99 on either side of the cap by chance (CI saw fixed-safe's at 320.96 W against
    320 W), so the arms' logic is tested where concurrency has the authority to separate them."""
    prior = literature_decode_prior(config)
    simulated = config.telemetry.simulated.model_copy(
        update={name: values["value"] for name, values in prior.items()}
    )
    telemetry = config.telemetry.model_copy(update={"simulated": simulated})
    return config.model_copy(update={"telemetry": telemetry})


@pytest.mark.slow
def test_arms_run_and_differ_as_they_should(config: Config, tmp_path: Path) -> None:
    config = _on_the_literature_curve(config.model_copy(update={"results_dir": tmp_path}))
    # The threshold rule acts on the p95 of a 5 s window. On the tiny CPU model decode is a few
    # per cent of a step's samples, so at concurrency 32 (decode 3.6 W over the cap) that p95 sat
    # at the cap (319.8 W in a CI run): the rule's trigger is set at 0.95 of the cap, so that the
    # test checks that the rule is followed, not the CPU's phase shares.
    config.arms.threshold.high_frac_of_cap = 0.95
    # Sampled every 10 ms, not 100: an arm's 12 steps then give 150 to 300 samples, not 16 to 32,
    # and the percentiles below are the plateaus', not a few samples' (with 100 ms, CI saw fixed's
    # p90 3.7 W over uncontrolled's, and one of four local runs fixed's under fixed-safe's).
    config.telemetry.period_s = 0.01
    model = GpuPowerModel(config.gpu, config.telemetry.simulated)
    power: dict[str, np.ndarray] = {}
    concurrency: dict[str, list[int]] = {}
    logs: dict[str, pd.DataFrame] = {}
    for arm in ("uncontrolled", "fixed", "fixed-safe", "threshold"):
        controller = controller_for_arm(arm, config, tmp_path / "calibration")
        result = runner.run_grpo(
            config, arm, 0, tmp_path / arm, controller, steps=12, show_progress=False
        )
        power[arm] = steps_power_w(result.paths.folder)
        logs[arm] = read_step_log(result.paths.steps)
        concurrency[arm] = logs[arm]["concurrency"].tolist()
    # The decode plateau (p90 of the samples) is the power level an arm's occupancy sets; means
    # also weigh how long each phase lasts, which the CPU's timing moves.
    plateau_w = {arm: np.percentile(p, 90) for arm, p in power.items()}
    # Highest occupancy, highest power: uncontrolled tops the arms that lower its concurrency 32.
    # fixed holds the same 32, so the two have no order: their p90s differ by sample noise and
    # by their decode shares (fixed 3.7 W above uncontrolled in a CI run).
    for lower in ("fixed-safe", "threshold"):
        assert plateau_w["uncontrolled"] > plateau_w[lower], (lower, plateau_w)
    # at concurrency 32 the decode line lies over the 320 W cap: uncontrolled and fixed violate.
    # Fixed decodes half as long (32 new tokens against 64), a smaller share of its samples, and
    # its p99 fell under the cap by chance (318.3 W in a CI run at 100 ms; 3 of 19 samples above
    # the cap in a local one), so for fixed the claim is that it goes over the cap at all.
    assert model.steady_power_w("generate", 32) > config.cap_w
    assert np.percentile(power["uncontrolled"], 99) > config.cap_w
    assert power["fixed"].max() > config.cap_w
    # fixed-safe holds the calibrated concurrency, one the calibration measured under the cap
    calibration = json.loads((tmp_path / "calibration" / "fixed_safe.json").read_text())
    assert concurrency["fixed-safe"] == [calibration["concurrency"]] * 12
    assert calibration["under_cap"] and calibration["concurrency"] < 32
    assert np.percentile(power["fixed-safe"], 99) < config.cap_w
    assert plateau_w["fixed-safe"] < plateau_w["fixed"]
    # candidates: the concurrency levels from the highest down, until one stayed under the cap
    tried = [c["concurrency"] for c in calibration["candidates"]]
    levels = config.workload.concurrency_bounds.levels()[::-1]
    assert tried == levels[: levels.index(calibration["concurrency"]) + 1]
    # threshold starts at the default and follows its rule on what it saw before each step:
    # a window whose p95 is over the cap halves concurrency
    assert concurrency["threshold"][0] == 32
    rule = config.arms.threshold
    high_w = rule.high_frac_of_cap * config.cap_w
    halved = 0
    for (_, before), (_, after) in itertools.pairwise(logs["threshold"].iterrows()):
        if after["obs_samples"] > 0 and after["obs_p95_power_w"] > high_w:
            expected = max(1, int(before["concurrency"] * rule.decrease_factor))
            assert after["concurrency"] == expected, (before["step"], after["step"])
            halved += 1
    assert halved > 0  # the rule acts


@pytest.mark.slow
def test_two_process_zero3_run_matches_a_single_process_run(tmp_path: Path) -> None:
    import yaml

    from grpo_power.config import deep_merge

    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    folders = {}
    # Another run's ranks on this node hold accelerate's default port: the launch takes a free one.
    with socket.socket() as other_run:
        with contextlib.suppress(OSError):  # held by something else already: the same situation
            other_run.bind(("127.0.0.1", 29500))
            other_run.listen()
        for name, run_size in {"single": {}, "zero3": {"processes": 2, "zero_stage": 3}}.items():
            config_file = tmp_path / f"{name}.yaml"
            sizes = [{"size": "tiny", **run_size}]
            config_file.write_text(yaml.safe_dump(deep_merge(base, {"run_sizes": sizes})))
            folders[name] = tmp_path / name
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "grpo_power.cli",
                    "run",
                    "--config",
                    str(config_file),
                    "--arm",
                    "threshold",
                    "--steps",
                    "3",
                    "--out",
                    str(folders[name]),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, done.stderr[-3000:]
    single, zero3 = (read_step_log(folders[n] / "steps.parquet") for n in ("single", "zero3"))
    assert list(single.columns) == list(zero3.columns)
    assert single["step"].tolist() == zero3["step"].tolist() == [1, 2, 3]
    # The threshold controller's concurrency acts on every rank under ZeRO-3 as in one process.
    for log in (single, zero3):
        expected_calls = np.ceil(32 / log["concurrency"]).astype(int).tolist()
        assert log["generate_calls"].tolist() == expected_calls
    # Each of the two processes generates a full step's sequences; the log sums them.
    assert (zero3["sequences"] == 2 * single["sequences"]).all()
    for name in ("single", "zero3"):
        trace = read_trace(folders[name] / "trace.parquet")
        assert trace.complete and len(trace.frame) > 5
    manifest = json.loads((folders["zero3"] / "manifest.json").read_text())
    assert manifest["config"]["run_sizes"][0]["zero_stage"] == 3


def _tiny_trainer(config: Config, tmp_path: Path) -> Any:
    """A PowerAwareGRPOTrainer on the tiny model (built locally), training chunk 4."""
    from grpo_power.telemetry.signals import WorkloadSignal
    from grpo_power.workload.models import load_model
    from grpo_power.workload.task import arithmetic_dataset, exact_answer_reward
    from grpo_power.workload.trainer import PowerAwareGRPOTrainer

    device = torch.device("cpu")
    model, tokenizer = load_model(config.workload, device)
    return PowerAwareGRPOTrainer(
        model=model,
        reward_funcs=[exact_answer_reward],
        args=runner._grpo_args(config, tmp_path, 0, 1, device),
        train_dataset=arithmetic_dataset(16, 0),
        processing_class=tokenizer,
        signal=WorkloadSignal(),
        concurrency=32,
        train_micro_batch=4,
    )


def _batch(vocab: int, sequences: int = 8) -> dict[str, torch.Tensor]:
    """A TRL training batch of ``sequences`` completions of different lengths."""
    rng = torch.Generator().manual_seed(0)
    lengths = torch.tensor([6, 1, 4, 6, 2, 5, 3, 6])[:sequences]
    completion_mask = (torch.arange(6)[None, :] < lengths[:, None]).long()
    return {
        "prompt_ids": torch.randint(0, vocab, (sequences, 5), generator=rng),
        "prompt_mask": torch.ones(sequences, 5, dtype=torch.long),
        "completion_ids": torch.randint(0, vocab, (sequences, 6), generator=rng),
        "completion_mask": completion_mask,
        "advantages": torch.randn(sequences, generator=rng),
        "num_items_in_batch": completion_mask.sum(),
    }


def test_the_training_chunk_leaves_the_gradient_unchanged(config: Config, tmp_path: Path) -> None:
    trainer = _tiny_trainer(config, tmp_path)
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets (runner: 1)
    model = trainer.model
    model.train()
    inputs = _batch(model.config.vocab_size)

    def gradient(chunk: int) -> tuple[torch.Tensor, float, int]:
        model.zero_grad()
        trainer.train_micro_batch = chunk
        before = trainer.step_stats.train_chunks
        loss = trainer.compute_loss(model, inputs)
        trainer.accelerator.backward(loss)
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return grads, float(loss), trainer.step_stats.train_chunks - before

    # Per sequence, per token and per generation-batch normalised losses (TRL's loss types).
    for loss_type in ("dapo", "grpo", "bnpo"):
        trainer.loss_type = loss_type
        whole, whole_loss, chunks = gradient(8)  # one chunk: TRL's own loss of the whole batch
        assert chunks == 1 and whole.norm() > 0
        for chunk, expected_chunks in ((4, 2), (3, 3), (2, 4), (1, 8)):  # 3: a remainder of 2
            grads, loss, chunks = gradient(chunk)
            assert chunks == expected_chunks
            assert float((grads - whole).norm() / whole.norm()) < 1e-5, (loss_type, chunk)
            assert loss == pytest.approx(whole_loss, rel=1e-5, abs=1e-7)


def test_a_checkpoint_of_ones_own_is_checked_before_the_run_and_recorded(
    tmp_path: Path,
) -> None:
    """`workload.model_path`: a seq2seq BART ran as a decoder-only model with new random
    weights and "completed"; a folder without tokenizer files, a tokenizer without EOS, damaged
    weights or a vocabulary larger than the model's failed mid-run with a traceback; a missing
    folder was taken for a hub id; a checkpoint lacking weights ran them as new random ones.
    Each is refused in one line naming workload.model_path, before any run folder is made. A
    checkpoint that works is recorded in the manifest (the size preset was all it said), and
    one replaced in the same folder is another run, not "completed" already."""
    import shutil

    import yaml
    from safetensors.torch import load_file, save_file
    from transformers import BartConfig, BartForConditionalGeneration

    from grpo_power.workload.models import _own_checkpoint, check_checkpoint, tiny_model_dir

    tiny = tiny_model_dir(tmp_path / "cache")
    good = tmp_path / "mine"
    shutil.copytree(tiny, good)

    def variant(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(good, folder)
        return folder

    bart = tmp_path / "bart"
    BartForConditionalGeneration(
        BartConfig(
            vocab_size=512,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=16,
            decoder_ffn_dim=16,
        )
    ).save_pretrained(bart)
    shutil.copy(good / "tokenizer.json", bart)
    no_tokenizer = variant("no-tokenizer")
    for file in no_tokenizer.glob("tokenizer*"):
        file.unlink()
    damaged = variant("damaged")
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    small = variant("small-vocab")
    config = json.loads((small / "config.json").read_text())
    (small / "config.json").write_text(json.dumps({**config, "vocab_size": 100}))
    short = variant("short-context")  # learned positions of a context this short: IndexError
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 40}))
    cases = {
        tmp_path / "nowhere": "expected a local checkpoint folder",
        bart: "expected a causal (decoder-only) language model, got the encoder-decoder",
        no_tokenizer: "got one without a vocabulary",
        damaged: "model.safetensors: expected readable weights",
        small: "expected the model's vocab_size to hold the tokenizer's",
        short: "expected a context of at least 82 tokens (the task's longest prompt, 18, and "
        "workload.max_new_tokens_bounds.max, 64), got 40; lower max_new_tokens_bounds.max to 22",
    }
    for folder, expected in cases.items():
        pattern = rf"^workload\.model_path: {re.escape(str(folder))}: .*{re.escape(expected)}"
        with pytest.raises(ValueError, match=pattern):
            check_checkpoint(str(folder), 64)
    check_checkpoint(str(short), 22)  # the context holds the longest prompt and 22 tokens
    lacking = variant("lacking")
    tensors = load_file(lacking / "model.safetensors")
    dropped = sorted(tensors)[-1]
    save_file({k: v for k, v in tensors.items() if k != dropped}, lacking / "model.safetensors")
    with pytest.raises(ValueError, match=rf"got a checkpoint without 1 of them \({dropped}\)"):
        _own_checkpoint(str(lacking), torch.device("cpu"))

    settings = {"model_path": str(good), "steps": 2, "cache_dir": str(tmp_path / "new-cache")}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"workload": settings}))
    run = [sys.executable, "-m", "grpo_power.cli", "run", "--arm", "fixed", "--out"]
    run += [str(tmp_path / "run"), "--config", str(tmp_path / "mine.yaml")]
    done = subprocess.run(run, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    model = json.loads((tmp_path / "run" / "manifest.json").read_text())["model"]
    assert model["path"] == str(good) and model["architectures"] == ["Qwen2ForCausalLM"]
    assert not (tmp_path / "new-cache").exists()  # no tiny preset built beside one's own
    (good / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-5}))
    again = subprocess.run(run, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "holds another run (model.config_sha256" in again.stderr
