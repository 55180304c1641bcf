"""A method registers itself: a new class with its name, view and paper is all a method needs to train, write its
model card with the paper's citation, and show in `sentcl train --help`."""
import argparse

from sentcl.cli import build_parser
from sentcl.methods import METHODS, get_method
from sentcl.methods.simcse import SimCSEUnsup
from sentcl.train.trainer import RunOptions, train


class ToySimCSE(SimCSEUnsup):
    "A throwaway method: unsupervised SimCSE under another name, to show what registering takes."
    name, paper = "toy-simcse", "simcse"


def _train_help() -> str:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["train"].format_help()


def test_a_new_method_registers_trains_and_cites_its_paper(tmp_path, monkeypatch):
    assert "toy-simcse" not in _train_help()
    monkeypatch.setitem(METHODS, ToySimCSE.name, ToySimCSE)  # the one registry line a new method adds
    assert get_method("toy-simcse") is ToySimCSE and "toy-simcse" in _train_help()
    out = tmp_path/"run"
    summary = train("toy-simcse", {"model": "tiny", "batch_size": 4},
                    RunOptions(preset="cpu-smoke", max_steps=1, out=str(out), progress=False))
    assert summary["finished"] and summary["step"] == 1
    card = (out/"model"/"README.md").read_text()
    assert "toy-simcse" in card and "Gao, Yao and Chen, SimCSE" in card


def test_every_registered_method_names_its_paper():
    from sentcl.train.cards import BASELINE_CITATIONS
    from sentcl.data.paper_numbers import PAPERS
    for name, cls in METHODS.items():
        assert cls.paper in (*PAPERS, *BASELINE_CITATIONS), f"{name}: paper {cls.paper!r}"
