import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def stand_in_notebook(path, code:str):
    "An experiment notebook that only runs `code` (its parameters cell is there for papermill)."
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("preset = 'cpu-smoke'\nout = None\nplan = None"),
                                         nbformat.v4.new_code_cell(code)])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3", "language": "python"}
    nbformat.write(nb, path)
