"""Launch: run stages as jobs through submitit (Slurm on clusters, local processes elsewhere)."""
