"""A verifiable task: generated arithmetic prompts with an exact-answer and a format reward.

Prompts come from a seeded generator (no data set download); each has an ``answer`` column
that TRL passes to the reward functions.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from datasets import Dataset
from transformers import PreTrainedTokenizerBase

ANSWER_PATTERN = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")
OPERATORS = ("+", "-", "*")


def _problem_text(a: int, op: str, b: int) -> str:
    return f"Compute {a} {op} {b}. Reply as <answer>N</answer>."


def _problem(rng: random.Random) -> tuple[str, int]:
    a, b, op = rng.randint(0, 99), rng.randint(0, 99), rng.choice(OPERATORS)
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    return _problem_text(a, op, b), answer


def longest_prompt_tokens(tokenizer: PreTrainedTokenizerBase) -> int:
    """The most tokens ``tokenizer`` makes of a prompt the task draws (special tokens
    included), which a model's context must hold with the completion: every operand in both
    places with every operator (a tokenizer splits the prompt at its spaces, so an operand's
    tokens do not depend on the other's)."""
    prompts = [_problem_text(a, op, b) for a in range(100) for b in (a, 99 - a) for op in OPERATORS]
    return max(len(ids) for ids in tokenizer(prompts)["input_ids"])


def arithmetic_dataset(n_prompts: int, seed: int) -> Dataset:
    """``n_prompts`` prompts with their exact answers, the same for the same seed."""
    rng = random.Random(seed)
    problems = [_problem(rng) for _ in range(n_prompts)]
    return Dataset.from_dict(
        {"prompt": [p for p, _ in problems], "answer": [str(a) for _, a in problems]}
    )


def corpus_for_tokenizer(n_lines: int = 4000) -> Iterator[str]:
    """Text the tiny tokenizer is trained on: prompts and well-formed answers."""
    rng = random.Random(1234)
    for _ in range(n_lines):
        prompt, answer = _problem(rng)
        yield f"{prompt} <answer>{answer}</answer>"


def _text(completion: object) -> str:
    if isinstance(completion, list):  # conversational: a list of messages
        return " ".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def exact_answer_reward(completions: list, answer: list[str], **_: object) -> list[float]:
    """1.0 when the first <answer> tag holds exactly the right number, else 0.0."""
    rewards = []
    for completion, expected in zip(completions, answer, strict=True):
        match = ANSWER_PATTERN.search(_text(completion))
        rewards.append(1.0 if match and match.group(1) == expected else 0.0)
    return rewards


def format_reward(completions: list, **_: object) -> list[float]:
    """0.5 when the completion contains a well-formed <answer>N</answer> tag, else 0.0."""
    return [0.5 if ANSWER_PATTERN.search(_text(c)) else 0.0 for c in completions]
