"""sentcl.train: one trainer for every method (trainer), with its run options (options), run folder and finish
(run_folder), schedules, checkpoints, gradients, model cards, training curves and presets. Import from the modules."""
