"""sentcl.experiments.catalog: the paper tables and figures sentcl reproduces, one module per paper (sharing common),
gathered by registry. Import from the modules."""
