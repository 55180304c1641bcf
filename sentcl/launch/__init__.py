"""sentcl.launch: experiment batches as scheduler jobs (Slurm, submitit). Import from the modules."""
