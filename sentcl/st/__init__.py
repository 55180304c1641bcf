"""sentcl.st: the four papers' objectives for sentence-transformers' own trainer: models (a sentcl model as a
`SentenceTransformer`), datasets (each loss's columns), losses and evaluators. Import from the modules."""
