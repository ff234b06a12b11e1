"""``python -m grpo_power.cli``: the command line, as the Snakefile's rules call it."""

from grpo_power.cli import main

main()
