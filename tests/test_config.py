"""The config schema accepts the embedded default and rejects bad values with path and reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from grpo_power.config import Config, ConfigError, deep_merge, load_config, validate_config
from tests.conftest import REPO


def test_default_config_is_valid() -> None:
    cfg = load_config(REPO / "config" / "config.yaml")
    assert cfg.telemetry.source == "simulated"
    assert cfg.gpu.nameplate_w == 400.0
    assert cfg.telemetry.period_s == 0.1


@pytest.mark.parametrize("shipped", ["config.yaml", "a100-slurm.yaml"])
def test_a_config_naming_another_part_after_a_shipped_one_gets_that_parts_power(
    shipped: str,
) -> None:
    """A config given after a shipped one (as the README gives them to Snakemake) that names
    an H100 gets its 700 W board and 75 W idle power: the shipped configs pinned the A100's,
    so it was refused as a 400 W H100, or kept the A100's idle power beside 700 W."""
    data = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    if shipped != "config.yaml":
        data = deep_merge(data, yaml.safe_load((REPO / "config" / shipped).read_text()))
    h100 = {"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "cap_w": 500}
    cfg = validate_config(deep_merge(data, h100))
    assert (cfg.gpu.nameplate_w, cfg.gpu.idle_w) == (700.0, 75.0)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"telemetry": {"period_s": -1}},
            "telemetry.period_s: Input should be greater than 0 (got -1)",
        ),
        ({"telemetry": {"period_s": 0}}, "telemetry.period_s: Input should be greater than 0"),
        ({"telemetry": {"perod_s": 0.1}}, "telemetry.perod_s: unknown key"),
        ({"colour": "red"}, "colour: unknown key"),
        ({"cap_w": 450}, "cap_w (450.0 W) is above gpu.nameplate_w (400.0 W)"),
        ({"cap_w": 50}, "cap_w (50.0 W) must be above gpu.idle_w (60.0 W)"),
        ({"cap_w": "lots"}, "cap_w: Input should be a valid number"),
        (
            {"telemetry": {"source": "rapl"}},
            "telemetry.source: Input should be 'simulated', 'nvml' or 'auto'",
        ),
        ({"gpu": {"idle_w": 500}}, "idle_w (500.0 W) must be below nameplate_w (400.0 W)"),
        (
            {"telemetry": {"simulated": {"decode_base_frac": 1.5}}},
            "telemetry.simulated.decode_base_frac: Input should be less than or equal to 1",
        ),
        ({"telemetry": {"gpus": "0,1"}}, "telemetry.gpus: Input should be a valid list"),
        ({"seed": -3}, "seed: Input should be greater than or equal to 0"),
        (
            {"telemetry": {"flush_s": 600}},
            "telemetry.flush_s: Input should be less than or equal to 60",
        ),
        ({"evaluate": {"seeds": [0, 0, 0, 0, 0]}}, "my.yaml: evaluate.seeds: expected each seed"),
        ({"seeds": [0, 0]}, "my.yaml: seeds: expected each seed once (one run each), got [0, 0]"),
        (
            {"evaluate": {"seeds": [0, 1, 2, 3, 1000]}},
            "my.yaml: evaluate.tuning_seeds: [1000] also in seeds; expected seeds the",
        ),
        # checks across sections say which field, with no "(top level): Value error," before
        ({"cap_w": 450}, "my.yaml: cap_w (450.0 W) is above"),
        (  # a scenario's cap went unchecked: a 50 W or 900 W scenario ran
            {"evaluate": {"scenarios": [{"name": "low", "cap_w": 50}]}},
            "my.yaml: evaluate.scenarios low: cap_w (50 W) must lie above gpu.idle_w (60 W)",
        ),
        (  # a schedule's share of the cap went unchecked: 0.1 x 320 W = 32 W, below idle
            {
                "evaluate": {
                    "scenarios": [
                        {"name": "dr", "schedule": [{"start_frac": 0.4, "cap_frac": 0.1}]}
                    ]
                }
            },
            "evaluate.scenarios dr: schedule segment from 0.4 on 7b: cap_frac 0.1 x 320 W: "
            "cap_w (32 W) must lie above gpu.idle_w (60 W)",
        ),
        (  # two segments starting together: one of them had no time
            {
                "evaluate": {
                    "scenarios": [
                        {"name": "dr", "schedule": [{"start_frac": 0.5}, {"start_frac": 0.5}]}
                    ]
                }
            },
            "evaluate.scenarios.0.schedule: expected each segment's start_frac once",
        ),
        (  # every actuator outside its bounds, a line each (only the first was named)
            {"workload": {"concurrency": 99, "max_new_tokens": 1000}},
            "my.yaml: workload.concurrency: 99 lies outside concurrency_bounds [1, 32]\n"
            "my.yaml: workload.max_new_tokens: 1000 lies outside max_new_tokens_bounds [8, 64]",
        ),
        (
            {"evaluate": {"scenarios": [{"name": "high", "cap_w": 900}]}},
            "evaluate.scenarios high: cap_w (900 W) must lie above gpu.idle_w (60 W) and at most "
            "gpu.nameplate_w (400 W)",
        ),
        (  # it overrode slurm_account in the job script, while messages named the key's value
            {"launch": {"job": {"additional_parameters": {"account": "other"}}}},
            "launch.job.additional_parameters.account: an sbatch option with a key of its own, "
            "launch.slurm_account; expected it there",
        ),
        (  # sbatch spells it --cpus-per-task, submitit's keys cpus_per_task: both are the key's
            {"launch": {"job": {"additional_parameters": {"cpus_per_task": 4}}}},
            "cpus_per_task: an sbatch option with a key of its own, cpus_per_task",
        ),
        (  # a gres of gpu:a100 80:1, refused by sbatch after the runs were planned
            {"launch": {"job": {"gpu_type": "a100 80"}}},
            "launch.job.gpu_type: expected a Slurm name: not empty, without blanks, commas or "
            "colons (null: none) (got 'a100 80')",
        ),
        ({"launch": {"slurm_partition": ""}}, "launch.slurm_partition: expected a Slurm name"),
    ],
)
def test_bad_values_are_rejected_with_path_and_reason(overrides: dict, expected: str) -> None:
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

    with pytest.raises(ConfigError) as error:
        validate_config(deep_merge(base, overrides), source="my.yaml")
    message = str(error.value)
    assert message.startswith("my.yaml: ")
    assert expected in message
    assert "(top level)" not in message


def test_unreadable_and_malformed_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read the config file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("telemetry: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        load_config(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(
        ConfigError, match="expected a mapping of settings at the top level, got list"
    ):
        load_config(listed)


def test_an_exponent_yaml_reads_as_text_says_how_to_write_it(tmp_path: Path) -> None:
    """YAML 1.1 (PyYAML, Snakemake's reader) takes `1e5` for text, which an integer field
    refuses as "unable to parse string as an integer" though the user wrote a number; the
    line now says so and how to write it. A float field takes the text as its number."""
    path = tmp_path / "exp.yaml"
    path.write_text("controller:\n  total_timesteps: 1e5\nsim:\n  sweep_s: 1e3\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    (line,) = str(error.value).splitlines()
    assert line.startswith(f"{path}: controller.total_timesteps: ")
    assert "YAML reads 1e5 as text: write 100000" in line
    path.write_text("sim:\n  sweep_s: 1e3\n")
    assert load_config(path).sim.sweep_s == 1000.0


def test_overrides_are_validated_too() -> None:
    with pytest.raises(ConfigError, match=r"telemetry\.period_s"):
        load_config(REPO / "config" / "config.yaml", {"telemetry": {"period_s": -0.5}})
    cfg = load_config(REPO / "config" / "config.yaml", {"telemetry": {"period_s": 0.05}})
    assert cfg.telemetry.period_s == 0.05
    assert cfg.telemetry.source == "simulated"  # untouched keys keep the file's values


@pytest.mark.parametrize("name", ["../escape", "/etc", "a/b", ".hidden", ""])
def test_names_that_become_paths_cannot_escape_results(name: str) -> None:
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    scenario = {"name": name, "cap_w": 300, "retrain": False}
    with pytest.raises(ConfigError, match=r"evaluate\.scenarios\.0\.name: String should match"):
        validate_config(deep_merge(base, {"evaluate": {"scenarios": [scenario]}}), "x.yaml")


# --------------------------------------------------------------------------------------------
# the JSON schema the Snakefile validates with, generated from the pydantic schema


def test_the_committed_json_schema_is_current() -> None:
    from grpo_power.config.json_schema import SCHEMA_PATH, config_json_schema_text

    committed = (REPO / SCHEMA_PATH).read_text()
    assert committed == config_json_schema_text(), (
        "workflow/schemas/config.schema.json is stale: run "
        "`grpo-power config schema --out workflow/schemas/config.schema.json`"
    )


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "config").glob("*.yaml")))
def test_every_shipped_config_meets_the_json_schema(name: str) -> None:
    import jsonschema

    from grpo_power.config.json_schema import SCHEMA_PATH

    schema = json.loads((REPO / SCHEMA_PATH).read_text())
    jsonschema.validate(yaml.safe_load((REPO / "config" / name).read_text()) or {}, schema)


@pytest.mark.parametrize(
    "bad",
    [
        {"cap_w": -3},
        {"telemetry": {"perod_s": 0.1}},
        {"telemetry": {"source": "magic"}},
        {"evaluate": {"seeds": [0, 1]}},
        {"windows": {"windows_s": [0.5, -1]}},
    ],
)
def test_the_json_schema_refuses_what_pydantic_refuses(bad: dict) -> None:
    import jsonschema

    from grpo_power.config.json_schema import config_json_schema

    with pytest.raises(ConfigError):
        validate_config(bad)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, config_json_schema())


@pytest.mark.parametrize("base", [["config.yaml"], ["config.yaml", "a100-slurm.yaml"]])
def test_the_h100_overlay_sets_caps_that_bind_and_can_be_kept(base: list[str]) -> None:
    """config/h100.yaml after a shipped config: the H100's part, and caps set as the A100
    study's are (an H100 config that kept the A100's watts made every cap infeasible): about
    10-14 % above each deployment's simulated fixed-arm mean power, where the fixed arm breaks
    the violation budget and concurrency 2 keeps it."""
    from grpo_power.control.controllers import FixedController
    from grpo_power.control.simulate import run_outcome, simulate
    from grpo_power.sim.calibration import default_calibration
    from grpo_power.sim.step_model import physics_for

    data: dict = {}
    for name in [*base, "h100.yaml"]:
        data = deep_merge(data, yaml.safe_load((REPO / "config" / name).read_text()))
    cfg = validate_config(data)
    assert (cfg.gpu.nameplate_w, cfg.gpu.nvml_power) == (700.0, "average_1s")
    if len(base) > 1:
        return  # the cluster study: the same part and caps (its workload is not simulated here)
    calibration = default_calibration(cfg)
    budget = cfg.objective.violation_budget
    for deployment in cfg.sim.deployments:
        cap_w = deployment.cap_w or cfg.cap_w
        physics = physics_for(calibration, deployment.name, cfg)
        fixed, low = (
            run_outcome(
                simulate(physics, cfg, FixedController(c, m), cap_w, 600.0, 0), 600.0, cfg.objective
            )
            for c, m in ((cfg.workload.concurrency, cfg.workload.max_new_tokens), (2, 64))
        )
        assert 1.08 <= cap_w / fixed.mean_power_w <= 1.15, deployment.name
        assert fixed.violation_rate > budget > low.violation_rate, deployment.name


def test_the_schemas_defaults_are_the_embedded_default_config() -> None:
    """config/README.md calls config/config.yaml the embedded default and the JSON schema where
    every default can be read; a config file given alone is validated over the schema's
    defaults, which differed in six fields (fleet.horizon_s null against 600 s, the launch job's
    resources and poll, arms.run): a short config of one's own silently changed the fleet."""
    embedded = load_config(REPO / "config" / "config.yaml").model_dump(mode="json")
    assert Config().model_dump(mode="json") == embedded


def test_likely_mistakes_of_a_valid_config_are_said() -> None:
    """An H200 study on the packaged A100 caps trained controllers at 69-76 % violations and
    called every cap infeasible with nothing said before; a100-slurm.yaml's placeholder account
    reached sbatch. Both are said before any job runs (nothing refused)."""
    from grpo_power.config.notes import config_notes

    def merged(*names: str, **over: object) -> Config:
        data: dict = {}
        for name in names:
            data = deep_merge(data, yaml.safe_load((REPO / "config" / name).read_text()))
        return validate_config(deep_merge(data, over))

    assert config_notes(merged("config.yaml")) == []
    (placeholder,) = config_notes(merged("config.yaml", "a100-slurm.yaml"))
    assert placeholder.startswith("launch.slurm_account is 'your-account', config/a100-slurm")
    (caps,) = config_notes(merged("config.yaml", gpu={"name": "NVIDIA H200"}))
    assert caps.startswith("the caps per GPU of 7b 320 W, 14b 240 W, 72b 220 W are the packaged")
    assert "this config's gpu is NVIDIA H200 (700 W)" in caps
    assert config_notes(merged("config.yaml", "h100.yaml")) == []  # every cap its own
    # a cap of its own on one deployment: the others are still named
    own_7b = merged("config.yaml", gpu={"name": "NVIDIA H200"}, cap_w=515)
    assert "of 14b 240 W, 72b 220 W are" in config_notes(own_7b)[0]
    # a part described by its powers: its NVML reading silently the A100's instant one
    b200 = {"name": "NVIDIA B200", "nameplate_w": 1000, "idle_w": 140}
    reading = config_notes(merged("config.yaml", "h100.yaml", gpu=b200))
    assert reading == [
        "gpu.name 'NVIDIA B200' is no packaged part, so its NVML power reading is taken as "
        "'instant' (the A100's); Hopper and newer parts read 1 s averages: give gpu.nvml_power "
        "(instant or average_1s)"
    ]
    assert (
        config_notes(merged("config.yaml", "h100.yaml", gpu={**b200, "nvml_power": "average_1s"}))
        == []
    )
