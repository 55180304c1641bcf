"""Experiment notebooks do not state a small preset's settings by hand.

A sentence about what `cpu` or `cpu-smoke` runs is rendered from the preset (`sentcl.experiments.describe.preset_summaries`,
shown in a code cell of each notebook); typed numbers drift (eighteen notebooks said 200 steps after the preset
moved to 100). This test reads the markdown of every `nbs/experiments/*.ipynb`, attributes each stretch of text
to the preset it follows (`cpu`, `cpu-smoke`, `paper`, or "CPU study"), and finds the settings it states:
training steps, batch sizes, clustering-set counts and seeds. Under `cpu` and `cpu-smoke`:

- any count that disagrees with the preset (its `preset_facts` for that experiment) fails;
- training steps, batch sizes and clustering-set counts fail even when they agree: they are the summary's to say.

Seeds are only checked for agreement, since "at least three seeds" is also how a claim is judged.
"""
import re
from pathlib import Path

import nbformat
import pytest

from sentcl.experiments.catalog.registry import EXPERIMENTS
from sentcl.experiments.describe import preset_facts

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/"nbs"/"experiments"
CHECKED = ("cpu", "cpu-smoke")
TYPED_NEVER = ("steps", "batch", "clustering sets")  # not even when they agree

WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
WORDS |= {"twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100, "a hundred": 100}
NUM = r"(\d[\d,]*|a few hundred|a hundred|" + "|".join(sorted(WORDS, key=len, reverse=True)) + r")"
PATTERNS = {  # setting -> regexes whose first group is the number stated
    "steps": [rf"\b{NUM}\s+(?:training\s+|optimi[sz]er\s+)?steps\b"],
    "batch": [rf"\bsteps of {NUM}\s+\w+", rf"\b{NUM}\s+[\w-]+\s+(?:at a time|per batch)\b",
              rf"\bbatch(?:es)?(?: size)? of {NUM}\b"],
    "clustering sets": [rf"(?<!for the ){NUM}\s+(?:short-text\s+)?(?:clustering\s+)?sets\b"],
    "seeds": [rf"(?<!at least ){NUM}\s+(?:training\s+)?seeds?\b"],
}
PRESET = re.compile(r"`(cpu-smoke|cpu|paper)`|\b(CPU study)\b")


def number(text: str):
    "The value of a stated count, or None when it is vague ('a few hundred')."
    text = text.lower().replace(",", "")
    return int(text) if text.isdigit() else WORDS.get(text)


def segments(markdown: str):
    "(preset, text) for each stretch of `markdown` that follows a mention of a preset, within a paragraph or bullet."
    for block in re.split(r"\n\s*\n|\n(?=\s*[-*] )", markdown):
        marks = list(PRESET.finditer(block))
        for m, nxt in zip(marks, marks[1:] + [None]):
            yield ("cpu" if m.group(2) else m.group(1)), block[m.end(): nxt.start() if nxt else len(block)]


def expected(experiment: str, preset: str) -> dict:
    "What `preset` sets for `experiment`, per checked setting."
    f = preset_facts(preset, experiment)
    return {"steps": {f["steps"]}, "batch": {b for b, _ in f["batches"]},
            "clustering sets": {len(f["tasks"].get("clustering", []))}, "seeds": {len(f["seeds"] or (None,))}}


def stated_settings(markdown: str, experiment: str) -> list[dict]:
    "Every preset setting `markdown` states by hand about `cpu`/`cpu-smoke`, with the value the preset has."
    found, want = [], {p: expected(experiment, p) for p in CHECKED}
    for preset, text in segments(markdown):
        if preset not in CHECKED: continue
        for setting, patterns in PATTERNS.items():
            for pattern in patterns:
                for m in re.finditer(pattern, text, flags=re.IGNORECASE):
                    value = number(m.group(1))
                    found.append({"preset": preset, "setting": setting, "stated": m.group(1), "value": value,
                                  "expected": want[preset][setting], "agrees": value in want[preset][setting],
                                  "excerpt": " ".join(text[max(0, m.start() - 60): m.end() + 20].split())})
    return found


def problems(markdown: str, experiment: str) -> list[str]:
    "A line per stated setting that disagrees with the preset, or that only the summary may state."
    return [f"{s['preset']}: {s['setting']} stated as {s['stated']!r} (the preset: {sorted(s['expected'])}) "
            f"in '...{s['excerpt']}...'" for s in stated_settings(markdown, experiment)
            if not s["agrees"] or s["setting"] in TYPED_NEVER]


def markdown_of(name: str) -> str:
    return "\n\n".join(c.source for c in nbformat.read(NBS/f"{name}.ipynb", 4).cells if c.cell_type == "markdown")


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_prose_states_no_preset_setting_by_hand(name):
    bad = problems(markdown_of(name), name)
    assert not bad, f"{name}: " + "\n".join(bad)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_each_notebook_renders_its_preset_summaries(name):
    code = "\n".join(c.source for c in nbformat.read(NBS/f"{name}.ipynb", 4).cells if c.cell_type == "code")
    assert f'preset_summaries("{name}")' in code, f"{name}: no cell shows preset_summaries(\"{name}\")"


def test_the_check_fails_when_a_number_is_edited():
    text = markdown_of("pairsupcon-table4")
    assert problems(text, "pairsupcon-table4") == []
    # the drift this test exists for, in the words the notebooks used before
    old = ("- **`cpu`** trains the two components and the full objective at β = 1 from all-MiniLM-L6-v2 for 200 "
           "steps of 64 pairs on SNLI dev+test,\n  three seeds each, and scores all seven STS tasks and eight "
           "clustering sets.")
    bad = problems(text + "\n\n" + old, "pairsupcon-table4")
    assert sorted(b.split(" stated")[0] for b in bad) == ["cpu: batch", "cpu: clustering sets", "cpu: seeds", "cpu: steps"], bad
    assert [b for b in bad if b.startswith("cpu: seeds")][0].startswith("cpu: seeds stated as 'three' (the preset: [5])")
    cpu = preset_facts("cpu", "pairsupcon-table4")
    assert "'200'" in bad[0] and f"[{cpu['steps']}]" in bad[0]
    assert "'eight'" in bad[2] and f"[{len(cpu['tasks']['clustering'])}]" in bad[2]
    # a seed count that disagrees fails; one that agrees is allowed (it is also how claims are judged)
    seeds, smoke = len(cpu["seeds"]), len(preset_facts("cpu-smoke")["seeds"])
    assert problems(text + f"\n\nUnder `cpu` it trains {seeds + 1} seeds.", "pairsupcon-table4")
    assert not problems(text + f"\n\nUnder `cpu` it trains {seeds} seeds of each arm.", "pairsupcon-table4")
    assert problems(text + f"\n\nUnder `cpu-smoke` it trains {smoke + 2} seeds.", "pairsupcon-table4")
    # a number typed right is still typed: steps belong to the rendered summary
    assert problems(text + "\n\nUnder `cpu` each arm trains 100 steps.", "pairsupcon-table4")
    # text about the paper preset, or not after any preset, is not checked
    assert not problems(text + "\n\nUnder `paper` it trains 5,000 steps with four seeds.", "pairsupcon-table4")
    assert not problems(text + "\n\nA check trained 5 training steps.", "pairsupcon-table4")
