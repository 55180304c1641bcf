"""bf16 training on CPU against fp32: the same PairSupCon run twice, loss curves compared with fp32's own noise.

Both runs start from `default` (all-MiniLM-L6-v2) with the same seed, data order and dropout masks (cpu-smoke preset:
32 NLI pairs per step, max length 32, constant learning rate after the preset's schedule), one in fp32 and one under
bf16 autocast. The step-to-step noise of a loss curve is the standard deviation of fp32's per-step loss around its own
moving average (window `--window`); the two curves agree within noise when the moving averages differ by less than
that. Prints a table, writes metrics of both runs and a figure (PNG) beside `--out`.

    python benchmarks/bf16_loss_curve.py [--data-dir DIR] [--steps 300] [--out benchmarks/bf16_loss_curve.png]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = os.path.dirname(os.path.abspath(__file__))


def run(precision:str, args, out:str) -> tuple[list[float], float]:
    "Train PairSupCon for `args.steps` steps in `precision`; (per-step losses, seconds)."
    from sentcl.train.trainer import RunOptions, train
    data = {"train_data": "snli:test", "data_dir": args.data_dir} if os.path.isdir(os.path.join(args.data_dir, "nli")) else {}
    options = RunOptions(out=out, preset="cpu-smoke", max_steps=args.steps, progress=False, precision=precision, **data)
    t0 = time.perf_counter()
    train("pairsupcon", {"model": "default", "seed": args.seed, "epochs": 100}, options)
    seconds = time.perf_counter() - t0
    rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"loss"' in l]
    return [r["loss"] for r in rows], seconds


def moving_average(x, w:int):
    import numpy as np
    x = np.asarray(x, dtype=float)
    return np.convolve(x, np.ones(w) / w, mode="valid")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("SENTCL_DATA", "../shared/data"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--window", type=int, default=25, help="moving-average window, steps")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", default=os.path.join(HERE, "bf16_loss_curve.png"), help="figure path ('' to skip)")
    args = ap.parse_args(argv)
    import numpy as np
    curves, seconds = {}, {}
    with tempfile.TemporaryDirectory() as d:
        for precision in ("fp32", "bf16"):
            print(f"training pairsupcon, {precision}, {args.steps} steps", flush=True)
            curves[precision], seconds[precision] = run(precision, args, os.path.join(d, precision))
    a, b = np.array(curves["fp32"]), np.array(curves["bf16"])
    ma, mb = moving_average(a, args.window), moving_average(b, args.window)
    noise = float(np.std(a[args.window - 1:] - ma))
    gap = np.abs(ma - mb)
    lines = ["| pairsupcon from default, cpu-smoke preset | fp32 | bf16 |", "|---|---:|---:|",
             f"| seconds per step | {seconds['fp32'] / args.steps:.3f} | {seconds['bf16'] / args.steps:.3f} |",
             f"| mean loss, first {args.window} steps | {a[:args.window].mean():.4f} | {b[:args.window].mean():.4f} |",
             f"| mean loss, last {args.window} steps | {a[-args.window:].mean():.4f} | {b[-args.window:].mean():.4f} |",
             "", f"fp32 step-to-step noise (std around its {args.window}-step moving average): {noise:.4f}; "
             f"|moving average bf16 - fp32|: mean {gap.mean():.4f}, max {gap.max():.4f} "
             f"({gap.max() / noise:.2f}x the noise) over {args.steps} steps; per-step |bf16 - fp32| mean {np.abs(a - b).mean():.4f}."]
    print("\n".join(lines))
    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.5), dpi=110)
        steps = np.arange(1, args.steps + 1)
        for name, x, m, c in (("fp32", a, ma, "tab:blue"), ("bf16", b, mb, "tab:orange")):
            ax.plot(steps, x, color=c, alpha=0.25, lw=0.8)
            ax.plot(steps[args.window - 1:], m, color=c, lw=2, label=f"{name} ({args.window}-step mean)")
        ax.set(xlabel="step", ylabel="training loss", title="PairSupCon on CPU: bf16 autocast against fp32")
        ax.legend(); fig.tight_layout(); fig.savefig(args.out); print(f"figure: {args.out}")
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f: json.dump({"fp32": curves["fp32"], "bf16": curves["bf16"]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
