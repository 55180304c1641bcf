"""sentcl.data: the benchmark data sentcl reads, from the dataset hub or a folder in its layout (layout, hub, tasks,
corpora) and the numbers the papers printed (paper_numbers). Import from the modules; this package has no face of its own."""
