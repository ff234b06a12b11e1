"""Model presets: a tiny Qwen2 built locally, and Qwen2.5 shapes with random weights.

Power does not depend on trained weights (docs/design.md section 8), so presets are built from the
published architecture shapes with random weights; nothing is downloaded. ``tiny`` runs on the
CPU and is built into a cache folder on first use (a BPE tokenizer trained with ``tokenizers`` on
generated arithmetic text, and a 2-layer Qwen2). A checkpoint named by ``workload.model_path``
(local folder or hub id) is loaded instead when given.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from grpo_power.atomic import write_folder_atomic
from grpo_power.config import WorkloadConfig
from grpo_power.workload.task import corpus_for_tokenizer, longest_prompt_tokens

TINY_VERSION = "tiny-v1"
SPECIAL_TOKENS = ["<|endoftext|>", "<|pad|>"]

# Shapes from the published Qwen2.5 config.json files (hidden, intermediate, layers, heads,
# kv heads, vocabulary, tied embeddings).
QWEN25_SHAPES: dict[str, dict[str, int | bool]] = {
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        tie_word_embeddings=False,
    ),
    "qwen2.5-14b": dict(
        hidden_size=5120,
        intermediate_size=13824,
        num_hidden_layers=48,
        num_attention_heads=40,
        num_key_value_heads=8,
        vocab_size=152064,
        tie_word_embeddings=False,
    ),
    "qwen2.5-72b": dict(
        hidden_size=8192,
        intermediate_size=29568,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        vocab_size=152064,
        tie_word_embeddings=False,
    ),
}
TINY_SHAPE = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    tie_word_embeddings=True,
)


def build_tokenizer(vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on generated arithmetic text (seconds, offline)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus_for_tokenizer(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|pad|>"
    )


def tiny_model_dir(cache_dir: Path) -> Path:
    """The tiny model's folder, built on first use (atomically: a half-built folder never stays)."""
    folder = Path(cache_dir) / TINY_VERSION
    if (folder / "config.json").exists():
        return folder

    def build(building: Path) -> None:
        tokenizer = build_tokenizer()
        torch.manual_seed(0)
        config = Qwen2Config(
            vocab_size=len(tokenizer),
            max_position_embeddings=512,
            bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **TINY_SHAPE,
        )
        Qwen2ForCausalLM(config).save_pretrained(building)
        tokenizer.save_pretrained(building)

    write_folder_atomic(folder, build)
    return folder


# where a config.json states the longest sequence its model takes, by architecture
CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def check_checkpoint(model_path: str, completion_tokens: int = 0) -> None:
    """Nothing when ``model_path`` is a local checkpoint a GRPO run can load and generate with:
    a folder (nothing is downloaded) with ``config.json`` of a causal language model, a
    tokenizer with a vocabulary, an end-of-sequence token and no more tokens than the model's
    vocabulary, and a context that holds the task's longest prompt and ``completion_tokens``
    (the most new tokens the run may generate: ``workload.max_new_tokens_bounds.max``).

    Raises:
        ValueError: naming ``workload.model_path``, the folder and what is missing or wrong (a
            seq2seq BART ran as a decoder-only model with new random weights; a folder without
            tokenizer files, a tokenizer without EOS, or a context shorter than the prompt and
            completion failed mid-run with a traceback).
    """
    folder = Path(model_path).expanduser()
    where = f"workload.model_path: {model_path}"
    if not folder.is_dir():
        found = "a file" if folder.exists() else "no such folder"
        raise ValueError(
            f"{where}: expected a local checkpoint folder (config.json, weights, tokenizer; "
            f"nothing is downloaded from a hub), found {found}"
        )
    if not (folder / "config.json").is_file():
        raise ValueError(f"{where}: expected a checkpoint folder with config.json, found none")
    config = AutoConfig.from_pretrained(folder)
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{where}: expected a causal (decoder-only) language model, got the "
            f"encoder-decoder {config.architectures or config.model_type}"
        )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if len(tokenizer) < 2 or tokenizer.eos_token_id is None:
        lacks = "a vocabulary (no tokenizer files)" if len(tokenizer) < 2 else "an eos_token"
        raise ValueError(
            f"{where}: expected a tokenizer with its vocabulary and an end-of-sequence token "
            f"(tokenizer.json or vocabulary files, tokenizer_config.json), got one without {lacks}"
        )
    for weights in sorted(folder.glob("*.safetensors")):
        try:  # the header only: a truncated or damaged file, before the run's folder is made
            with safe_open(weights, framework="pt"):
                pass
        except (SafetensorError, OSError) as error:
            raise ValueError(
                f"{where}: {weights.name}: expected readable weights, got {error}"
            ) from None
    vocab = getattr(config, "vocab_size", None)
    if isinstance(vocab, int) and vocab < len(tokenizer):
        raise ValueError(
            f"{where}: expected the model's vocab_size to hold the tokenizer's {len(tokenizer)} "
            f"tokens, got {vocab}"
        )
    context = next((getattr(config, f) for f in CONTEXT_FIELDS if hasattr(config, f)), None)
    prompt = longest_prompt_tokens(tokenizer) if isinstance(context, int) else 0
    if isinstance(context, int) and context < prompt + completion_tokens:
        raise ValueError(
            f"{where}: expected a context of at least {prompt + completion_tokens} tokens (the "
            f"task's longest prompt, {prompt}, and workload.max_new_tokens_bounds.max, "
            f"{completion_tokens}), got {context}; lower max_new_tokens_bounds.max to "
            f"{max(context - prompt, 0)} or below"
        )


def check_runs_on(workload: WorkloadConfig, device: torch.device) -> None:
    """Nothing when ``workload``'s model can run on ``device`` (and its own checkpoint can be
    loaded: :func:`check_checkpoint`).

    Raises:
        ValueError: a random-weight Qwen2.5 preset (bf16) without a GPU, or a checkpoint a run
            cannot use.
    """
    if workload.model_path is not None:
        check_checkpoint(workload.model_path, workload.max_new_tokens_bounds.max)
    if workload.model_path is None and workload.size != "tiny" and device.type != "cuda":
        raise ValueError(
            f"workload.size: the random-weight {workload.size} preset runs on a GPU only "
            "(bf16); use size 'tiny' on the CPU, or simulate it in the simulator stage"
        )


def load_model(
    workload: WorkloadConfig, device: torch.device
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """The model and tokenizer of a workload config, on ``device``.

    Raises:
        ValueError: a random-weight Qwen2.5 preset was asked for without a GPU, or a checkpoint
            a run cannot use (:func:`check_runs_on`).
    """
    check_runs_on(workload, device)
    if workload.model_path is not None:
        return _own_checkpoint(workload.model_path, device)
    tiny = tiny_model_dir(workload.cache_dir)
    if workload.size == "tiny":
        tokenizer = AutoTokenizer.from_pretrained(tiny)
        model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tiny)
        config = Qwen2Config(
            max_position_embeddings=32768,
            rope_theta=1_000_000.0,
            rms_norm_eps=1e-6,
            bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **QWEN25_SHAPES[workload.size],
        )
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _own_checkpoint(
    model_path: str, device: torch.device
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A user's checkpoint, checked already (:func:`check_checkpoint`), and its tokenizer,
    bf16 on a GPU.

    Raises:
        ValueError: the weights are unreadable, or lack some of the model's (another
            architecture's checkpoint: the missing ones would run as new random weights).
    """
    folder = Path(model_path).expanduser()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            folder,
            dtype=torch.bfloat16 if device.type == "cuda" else torch.float32,
            output_loading_info=True,
        )
    except SafetensorError as error:
        raise ValueError(
            f"workload.model_path: {model_path}: expected readable weights, got {error}"
        ) from None
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise ValueError(
            f"workload.model_path: {model_path}: expected every weight of "
            f"{type(model).__name__}, got a checkpoint without {len(missing)} of them "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
