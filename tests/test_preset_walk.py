"""tools/preset_walk.py records the sentcl calls given a preset and counts the walk's climbs back (issue 36 item 4)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]/"tools"))
import preset_walk  # noqa: E402

from sentcl.experiments.presets import get_preset, resolve_preset
from sentcl.train.presets import training_preset


def test_the_recorder_sees_a_preset_by_name_or_object_and_its_caller():
    calls = []
    sys.setprofile(preset_walk.recorder(calls))
    try:
        resolve_preset("cpu")  # presets.resolve_preset -> get_preset, within the experiments layer
        resolve_preset(get_preset("paper"))  # a Preset as it is: no further call
        get_preset("cpu").seeds_for("liao-table2")  # a method of the Preset: self is the preset
        training_preset("cpu").overrides_for("sbert")  # a training preset: a preset too
    finally: sys.setprofile(None)
    assert calls == [(None, "sentcl.experiments.presets", "resolve_preset"),
                     ("sentcl.experiments.presets", "sentcl.experiments.presets", "get_preset"),
                     (None, "sentcl.experiments.presets", "get_preset"),
                     (None, "sentcl.experiments.presets", "resolve_preset"),
                     (None, "sentcl.experiments.presets", "get_preset"),
                     (None, "sentcl.experiments.presets", "seeds_for"),
                     (None, "sentcl.train.presets", "training_preset"),
                     (None, "sentcl.train.presets", "overrides_for")]


def test_a_device_named_cpu_is_not_a_preset():
    calls = []
    from sentcl.precision import resolve_precision
    sys.setprofile(preset_walk.recorder(calls))
    try: resolve_precision("fp32", "cpu")
    finally: sys.setprofile(None)
    assert calls == []


def test_climbs_back_are_calls_into_a_higher_layer_than_the_callers():
    calls = [("sentcl.cli", "sentcl.experiments.runner", "run_batch"),  # interface -> experiments: climbs
             ("sentcl.experiments.runner", "sentcl.experiments.plan", "plan_runs"),  # same layer
             ("sentcl.experiments.plan", "sentcl.train.presets", "get_preset"),  # experiments -> training: climbs
             ("sentcl.experiments.plan", "sentcl.train.presets", "overrides_for"),  # the same edge again
             ("sentcl.train.trainer", "sentcl.train.presets", "get_preset"),  # same layer
             (None, "sentcl.experiments.session", "__init__")]  # called from outside sentcl
    s = preset_walk.summary(calls)
    assert s["modules"] == ["sentcl.experiments.runner", "sentcl.experiments.plan", "sentcl.train.presets",
                            "sentcl.experiments.session"]
    assert (s["calls"], s["climbs"]) == (6, 3)
    assert s["climb_edges"] == [("sentcl.cli", "sentcl.experiments.runner"),
                                ("sentcl.experiments.plan", "sentcl.train.presets")]
