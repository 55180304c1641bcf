"""`make bench`: sentcl against sentence-transformers on this machine, in one process, in fp32 and bf16.

Every ratio is sentcl's time over a peer's time measured in the same run (the machine may be shared:
absolute times move, ratios much less). Sections, each skippable:

1. encode      sentences/s of `SentenceEncoder.encode` (fp32, bf16 autocast) against `SentenceTransformer.encode`
               (fp32) on the distinct sentences of STS12-16; 1 - cosine of bf16 against fp32.
2. sts         `evaluate(default, "sts")` from an empty cache (loading, deduplicating, encoding, scoring) against
               `SentenceTransformer.encode` of each task's two sentence columns plus the same scoring; every score
               of sentcl fp32, sentcl bf16 and sentence-transformers side by side.
3. clustering  PairSupCon's protocol (KMeans, 10 seeds x n_init 10) on AgNews, SearchSnippets and Tweet: the
               protocol as the code before this change ran it (scikit-learn's k-means++, seeds one after another)
               against `kmeans_scores`, on the same fp32 embeddings, asserting identical ACC/NMI per seed; and the
               whole `eval_clustering` (encoding included, empty cache) in fp32 and bf16 against the old path.
4. train       a simcse-sup training step (benchmarks/bench_train.py) against `SentenceTransformerTrainer` with
               MultipleNegativesRankingLoss on the same batches, fp32 and bf16.
5. all         `evaluate(default, "all")` (STS, transfer, few-shot, the 8 clustering sets) from an empty cache, fp32
               and bf16, with the time of each group.
6. floor       how fast bf16 could be here at best: the bf16/fp32 throughput of this model's linear layers as bare
               matrix products, and, under the profiler, the seconds bf16 encode, STS and a training step spend in
               matrix products alone. Those seconds are a floor for any code on this CPU's kernels: with every other
               operation taking no time at all, the ratio against sentence-transformers would still be this.

Prints Markdown tables and writes them, with the machine described, to benchmarks/RESULTS.md (--results).

    python benchmarks/bench.py [--data-dir DIR] [--skip all,train] [--results benchmarks/RESULTS.md]
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

SECTIONS = ("encode", "sts", "clustering", "train", "all", "floor")
CLUSTER_SETS = ("agnews", "searchsnippets", "tweet")
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("SENTCL_DATA", "../shared/data"), help="a data folder in sentcl's layout")
    ap.add_argument("--skip", default="", help=f"comma list of sections to skip: {', '.join(SECTIONS)}")
    ap.add_argument("--batch-size", type=int, default=64, help="encoding batch size, both frameworks")
    ap.add_argument("--repeats", type=int, default=2, help="encode and STS: alternating repeats, fastest of each kept")
    ap.add_argument("--train-steps", type=int, default=5, help="train: timed steps per framework per round")
    ap.add_argument("--train-rounds", type=int, default=3, help="train: rounds, alternating which framework goes first")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"), help="write the tables here ('' to skip)")
    return ap.parse_args(argv)


@contextlib.contextmanager
def empty_cache():
    "An empty sentcl cache for the duration (SENTCL_CACHE_DIR)."
    old = os.environ.get("SENTCL_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="sentcl-bench-cache-") as d:
        os.environ["SENTCL_CACHE_DIR"] = d
        try: yield d
        finally:
            if old is None: os.environ.pop("SENTCL_CACHE_DIR", None)
            else: os.environ["SENTCL_CACHE_DIR"] = old


def timed(fn, *a, **k):
    t0 = time.perf_counter(); out = fn(*a, **k)
    return time.perf_counter() - t0, out


def say(msg): print(msg, flush=True)


def table(head, rows) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"] + \
           ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def machine() -> list[str]:
    import numpy, sklearn, torch, transformers, sentence_transformers
    from sentcl.precision import cpu_flags, fast_bf16
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx", "avx2", "fma")))
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    return [f"- CPU: {model}, {len(os.sched_getaffinity(0))} cores usable, torch threads {torch.get_num_threads()}; "
            f"bf16 matrix units (AVX-512 BF16 / AMX): {'yes' if fast_bf16('cpu') else 'no'}",
            f"- CPU flags: {' '.join(flags)}",
            f"- torch {torch.__version__}, transformers {transformers.__version__}, sentence-transformers "
            f"{sentence_transformers.__version__}, scikit-learn {sklearn.__version__}, numpy {numpy.__version__}, "
            f"Python {platform.python_version()}",
            f"- sentcl commit {git}; run {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}; load average at the start "
            f"{os.getloadavg()[0]:.1f} (the machine is shared: ratios are in-run, absolute times are not comparable)"]


# ---------------------------------------------------------------- 1. encode

def bench_encode(args, encoder, st) -> tuple[list[str], dict]:
    import numpy as np
    from sentcl.data.tasks import STS_TASKS, load_sts
    from sentcl.eval.common import dedupe
    texts, _ = dedupe([s for t in STS_TASKS[:5] for df in [load_sts(t, "test", args.data_dir)] for c in ("sentence1", "sentence2")
                       for s in df[c].tolist()])
    say(f"encode: {len(texts)} distinct STS12-16 sentences, batch {args.batch_size}")
    enc_fp32 = lambda: encoder.encode(texts, batch_size=args.batch_size, show_progress=False)
    enc_bf16 = lambda: encoder.encode(texts, batch_size=args.batch_size, show_progress=False, precision="bf16")
    st_fp32 = lambda: st.encode(texts, batch_size=args.batch_size)
    times = {"sentcl fp32": [], "sentcl bf16": [], "ST fp32": []}
    for r in range(args.repeats):
        for name, fn in (("sentcl fp32", enc_fp32), ("ST fp32", st_fp32), ("sentcl bf16", enc_bf16)):
            s, out = timed(fn); times[name].append(s)
            if name == "sentcl fp32": e32 = out
            if name == "sentcl bf16": e16 = out
        say("  " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()))
    best = {k: min(v) for k, v in times.items()}
    cos = (e16 * e32).sum(1) / np.linalg.norm(e16, axis=1) / np.linalg.norm(e32, axis=1)
    rate = {k: len(texts) / v for k, v in best.items()}
    rows = [[k, f"{rate[k]:.0f}", f"{rate[k] / rate['ST fp32']:.2f}x"] for k in ("ST fp32", "sentcl fp32", "sentcl bf16")]
    lines = table(["encode (distinct STS12-16 sentences)", "sentences/s", "vs ST fp32"], rows)
    lines.append(f"\nbf16 against fp32: max 1 - cosine {float((1 - cos).max()):.1e}, mean {float((1 - cos).mean()):.1e}; "
                 f"{len(texts)} sentences, fastest of {args.repeats}. Target: bf16 >= 2.5x ST fp32.")
    return lines, {"bf16_speedup": rate["sentcl bf16"] / rate["ST fp32"], "texts": texts, "st_rate": rate["ST fp32"]}


# ---------------------------------------------------------------- 2. STS

def st_sts_scores(st, data_dir, batch_size) -> dict:
    "The seven STS scores from sentence-transformers' embeddings of each task's two columns (no dedupe, no cache)."
    from sentcl.data.tasks import STS_TASKS, load_sts
    from sentcl.eval import STS_SUBSET_TASKS, spearman100
    from sentcl.eval.common import cosine_rows
    out = {}
    for t in STS_TASKS:
        df = load_sts(t, "test", data_dir)
        u, v = st.encode(df["sentence1"].tolist(), batch_size=batch_size), st.encode(df["sentence2"].tolist(), batch_size=batch_size)
        out[t] = round(spearman100(cosine_rows(u, v), df["score"]), 2)
    return out


def sts_scores(doc) -> dict:
    return {t: r.get("all", r.get("spearman")) for t, r in doc["tasks"].items()}


def bench_sts(args, encoder, st) -> tuple[list[str], dict]:
    from sentcl.data.tasks import STS_TASKS
    from sentcl.eval import evaluate
    say("sts: evaluate(default, 'sts') from an empty cache, against SentenceTransformer.encode of both columns")
    times, scores = {"sentcl fp32": [], "sentcl bf16": [], "ST fp32": []}, {}
    for r in range(args.repeats):
        for name in ("sentcl fp32", "ST fp32", "sentcl bf16"):
            if name == "ST fp32": s, scores[name] = timed(st_sts_scores, st, args.data_dir, args.batch_size)
            else:
                with empty_cache():
                    s, doc = timed(evaluate, encoder, "sts", data_dir=args.data_dir, batch_size=args.batch_size,
                                   precision=name.split()[1], log=lambda m: None)
                scores[name] = sts_scores(doc)
            times[name].append(s)
        say("  " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()))
    best = {k: min(v) for k, v in times.items()}
    rows = [[k, f"{best[k]:.1f}", f"{best[k] / best['ST fp32']:.2f}x"] for k in ("ST fp32", "sentcl fp32", "sentcl bf16")]
    lines = table(["7 STS test sets, empty cache", "seconds", "vs ST fp32"], rows)
    lines += ["", *table(["STS (Spearman x100)", *STS_TASKS], [[k, *[f"{scores[k][t]:.2f}" for t in STS_TASKS]] for k in scores]
                         + [["bf16 - fp32", *[f"{scores['sentcl bf16'][t] - scores['sentcl fp32'][t]:+.2f}" for t in STS_TASKS]]])]
    same = all(scores["sentcl fp32"][t] == scores["ST fp32"][t] for t in STS_TASKS)
    worst = max(abs(scores["sentcl bf16"][t] - scores["sentcl fp32"][t]) for t in STS_TASKS)
    lines.append(f"\nSTS12-16 are scored as 'all' (one Spearman over the pairs, as MTEB). sentcl fp32 scores equal ST's: "
                 f"{'yes' if same else 'NO'}; largest bf16 - fp32 difference {worst:.2f}. Targets: fp32 <= 0.65x with "
                 f"identical scores, bf16 <= 0.25x with every score within 0.05.")
    return lines, {"fp32_ratio": best["sentcl fp32"] / best["ST fp32"], "bf16_ratio": best["sentcl bf16"] / best["ST fp32"],
                   "identical": same, "worst_bf16_diff": worst, "st_seconds": best["ST fp32"]}


# ---------------------------------------------------------------- 3. clustering

def old_kmeans_scores(embeddings, labels, seeds=range(10), n_init=10) -> dict:
    "The protocol as sentcl ran it before this change: scikit-learn's KMeans with its own k-means++, seed after seed."
    import numpy as np
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score
    from sentcl.eval import cluster_accuracy
    from sentcl.eval.common import remap_labels
    y, classes = remap_labels(labels)
    acc, nmi = [], []
    for seed in seeds:
        pred = KMeans(n_clusters=len(classes), n_init=n_init, random_state=seed).fit_predict(embeddings)
        acc.append(round(100 * cluster_accuracy(y, pred), 2)); nmi.append(round(100 * normalized_mutual_info_score(y, pred), 2))
    return {"acc": acc, "nmi": nmi, "acc_mean": round(float(np.mean(acc)), 2), "nmi_mean": round(float(np.mean(nmi)), 2)}


def bench_clustering(args, encoder) -> tuple[list[str], dict]:
    from sentcl.data.tasks import load_clustering
    from sentcl.eval import CLUSTERING_MAX_LENGTH, eval_clustering, kmeans_scores
    from sentcl.eval.common import embed_unique
    say(f"clustering: {', '.join(CLUSTER_SETS)}; KMeans 10 seeds x n_init 10")
    rows, tot = [], {"old": 0.0, "new": 0.0, "old_e2e": 0.0, "new_e2e": 0.0, "bf16_e2e": 0.0}
    for name in CLUSTER_SETS:
        df = load_clustering(name=name, data_dir=args.data_dir)
        texts, labels = df["text"].tolist(), df["label"].tolist()
        with empty_cache():  # the old path end to end: encode (fp32), then the old protocol
            t_enc, (emb, idx) = timed(embed_unique, encoder, texts, task=name, batch_size=args.batch_size,
                                      max_length=CLUSTERING_MAX_LENGTH, cache=False)
            t_old, old = timed(old_kmeans_scores, emb[idx], labels)
            t_new, new = timed(kmeans_scores, emb[idx], labels)
        assert (old["acc"], old["nmi"]) == (new["acc"], new["nmi"]), f"{name}: the protocols disagree: {old} {new}"
        with empty_cache(): t_e2e, r32 = timed(eval_clustering, encoder, name, args.data_dir, args.batch_size)
        with empty_cache(): t_b16, r16 = timed(eval_clustering, encoder, name, args.data_dir, args.batch_size, precision="bf16")
        assert (r32["acc"], r32["nmi"]) == (old["acc"], old["nmi"]), f"{name}: eval_clustering disagrees with the old path"
        for k, v in (("old", t_old), ("new", t_new), ("old_e2e", t_enc + t_old), ("new_e2e", t_e2e), ("bf16_e2e", t_b16)): tot[k] += v
        rows.append([name, f"{t_old:.1f}", f"{t_new:.1f}", f"{t_new / t_old:.2f}x", f"{t_enc + t_old:.1f}", f"{t_e2e:.1f}",
                     f"{t_e2e / (t_enc + t_old):.2f}x", f"{t_b16:.1f}", f"{t_b16 / (t_enc + t_old):.2f}x",
                     f"{r32['acc_mean']:.2f} / {r32['nmi_mean']:.2f}", f"{r16['acc_mean']:.2f} / {r16['nmi_mean']:.2f}"])
        say("  " + " | ".join(rows[-1]))
    rows.append(["three sets", f"{tot['old']:.1f}", f"{tot['new']:.1f}", f"{tot['new'] / tot['old']:.2f}x", f"{tot['old_e2e']:.1f}",
                 f"{tot['new_e2e']:.1f}", f"{tot['new_e2e'] / tot['old_e2e']:.2f}x", f"{tot['bf16_e2e']:.1f}",
                 f"{tot['bf16_e2e'] / tot['old_e2e']:.2f}x", "", ""])
    lines = table(["clustering set", "protocol before, s", "protocol now, s", "ratio", "eval before (fp32 encode + protocol), s",
                   "eval now fp32, s", "ratio", "eval now bf16, s", "ratio", "ACC / NMI fp32", "ACC / NMI bf16"], rows)
    lines.append("\n'protocol' is KMeans alone on the same fp32 embeddings: identical ACC and NMI for every seed (asserted). "
                 "'eval' adds encoding from an empty cache. Target: the protocol <= 0.5x of before in fp32.")
    return lines, {"protocol_ratio": tot["new"] / tot["old"], "e2e_ratio": tot["new_e2e"] / tot["old_e2e"]}


# ---------------------------------------------------------------- 4. training step

def bench_training(args) -> tuple[list[str], dict]:
    sys.path.insert(0, HERE)
    import bench_train
    rows, out = [], {}
    for precision in ("fp32", "bf16"):
        targs = bench_train.parse_args(["--data-dir", args.data_dir, "--steps", str(args.train_steps), "--rounds",
                                        str(args.train_rounds), "--precision", precision, "--skip-memory"])
        say(f"train: simcse-sup step, {precision}")
        res = bench_train.throughput(targs)
        out[precision] = res
    st32 = out["fp32"]["st"]["s_per_step"]
    for precision, res in out.items():
        a, b = res["sentcl"]["s_per_step"], res["st"]["s_per_step"]
        rows.append([precision, f"{a:.3f}", f"{b:.3f}", f"{a / b:.2f}x", f"{a / st32:.2f}x"])
    lines = table(["simcse-sup step, 32 triplets (96 sentences), max length 32", "sentcl s/step", "ST trainer s/step",
                   "sentcl / ST same precision", "sentcl / ST fp32"], rows)
    lines.append("\nMedian step times over all timed steps (fetching and tokenising the batch, forward, loss, backward, "
                 "optimiser, bookkeeping), both from the same weights on the same batches. Targets: fp32 <= 1.0x, "
                 "bf16 <= 0.5x of ST's fp32 step.")
    return lines, {**{p: r["sentcl"]["s_per_step"] / st32 for p, r in out.items()}, "st_step": st32}


# ---------------------------------------------------------------- 5. --tasks all

def bench_all(args, encoder) -> tuple[list[str], dict]:
    from sentcl.eval import evaluate, task_kind
    rows, totals = [], {}
    for precision in ("fp32", "bf16"):
        say(f"all: evaluate(default, 'all', precision={precision}) from an empty cache")
        stamps, groups = [time.perf_counter()], {}
        def on_task(doc):
            name = list(doc["tasks"])[-1]
            stamps.append(time.perf_counter())
            groups[task_kind(name)] = groups.get(task_kind(name), 0.0) + stamps[-1] - stamps[-2]
            say(f"  {name}: {stamps[-1] - stamps[-2]:.1f} s")
        with empty_cache():
            t, doc = timed(evaluate, encoder, "all", data_dir=args.data_dir, batch_size=args.batch_size,
                           precision=precision, log=lambda m: None, on_task=on_task)
        totals[precision] = (t, groups, doc["avg"])
    head = ["--tasks all, empty cache", "sts, s", "transfer, s", "fewshot, s", "clustering, s", "total, min", "averages"]
    for precision, (t, g, avg) in totals.items():
        rows.append([precision, *[f"{g.get(k, 0):.0f}" for k in ("sts", "transfer", "fewshot", "clustering")], f"{t / 60:.1f}",
                     ", ".join(f"{k} {v:.2f}" for k, v in avg.items() if v is not None)])
    lines = table(head, rows)
    lines.append("\nOne `evaluate` call per precision: the 7 STS sets, the 7 transfer tasks with SentEval's classifier, "
                 "their few-shot variants, the 8 clustering sets. Target: fp32 <= 30 min, bf16 faster.")
    return lines, {p: v[0] for p, v in totals.items()}


# ---------------------------------------------------------------- 6. the matrix-product floor

MATMUL_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation")
OP_NAMES = {"aten::_scaled_dot_product_flash_attention_for_cpu": "attention", "aten::bernoulli_": "dropout masks",
            "aten::copy_": "casts", "aten::_fused_adamw_": "AdamW", "aten::fill_": "zero fills", "aten::gelu": "GELU",
            "aten::gelu_backward": "GELU backward", "aten::native_layer_norm": "layer norm"}


def matmul_seconds(fn) -> tuple[float, float, list]:
    """Under torch's profiler: (seconds `fn()` spends inside matrix products, its wall seconds, the three other
    operations with the most self time as (name, seconds))."""
    from torch.profiler import ProfilerActivity, profile
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof: fn()
    wall = time.perf_counter() - t0
    ops = prof.key_averages()
    others = sorted(((OP_NAMES.get(e.key, e.key.removeprefix("aten::")), e.self_cpu_time_total / 1e6) for e in ops
                     if e.key not in MATMUL_OPS), key=lambda x: -x[1])[:3]
    return sum(e.self_cpu_time_total for e in ops if e.key in MATMUL_OPS) / 1e6, wall, others


def linear_speedup(hidden:int, inter:int, tokens:int=1024, reps:int=20) -> float:
    "fp32 time / bf16 time of one transformer layer's six linear products (q, k, v, out, up, down) on `tokens` rows."
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(0)
    shapes = [(hidden, hidden)] * 4 + [(inter, hidden), (hidden, inter)]
    xs = {d: torch.randn(tokens, d, generator=g) for d in (hidden, inter)}
    ws = [torch.randn(o, i, generator=g) for o, i in shapes]
    best = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = {d: t.to(dtype) for d, t in xs.items()}; w = [t.to(dtype) for t in ws]
        run = lambda: [F.linear(x[t.shape[1]], t) for t in w]
        run()
        best[dtype] = min(timed(run)[0] for _ in range(reps))
    return best[torch.float32] / best[torch.bfloat16]


def bench_floor(args, encoder, summary:dict) -> tuple[list[str], dict]:
    cfg = encoder.model.config
    kernel = linear_speedup(cfg.hidden_size, cfg.intermediate_size)
    say(f"floor: bf16 linear products {kernel:.2f}x faster than fp32 at this model's shapes")
    rows, out = [], {"kernel": kernel}
    def row(target, measured, mm, wall, others, peer, goal, higher_better=False, per=1):
        "One target: measured ratio, floor (matrix products only), other work now, and the most the target allows."
        mm, others = mm / per, [(k, v / per) for k, v in others]
        floor = peer / mm if higher_better else mm / peer
        allowed = peer / goal - mm if higher_better else goal * peer - mm
        digits = 1 if wall > 5 else 3
        rows.append([target, f"{measured:.2f}x", f"{floor:.2f}x", f"{wall - mm:.{digits}f} s of {wall:.{digits}f} s",
                     ", ".join(f"{k} {v:.{digits}f} s" for k, v in others),
                     f"{allowed:.{digits}f} s" if allowed > 0 else "none"])
        out[target] = floor
    if "encode" in summary:
        e = summary["encode"]
        texts = e["texts"]
        mm, wall, others = matmul_seconds(lambda: encoder.encode(texts, batch_size=args.batch_size, show_progress=False,
                                                                 precision="bf16"))
        row("encode bf16 >= 2.5x ST fp32", e["bf16_speedup"], mm, wall, others, len(texts) / e["st_rate"], 2.5, True)
    if "sts" in summary:
        from sentcl.eval import evaluate
        with empty_cache():
            mm, wall, others = matmul_seconds(lambda: evaluate(encoder, "sts", data_dir=args.data_dir, precision="bf16",
                                                               batch_size=args.batch_size, log=lambda m: None))
        s = summary["sts"]
        row("STS bf16 <= 0.25x ST time", s["bf16_ratio"], mm, wall, others, s["st_seconds"], 0.25)
    if "train" in summary:
        sys.path.insert(0, HERE)
        import bench_train
        targs = bench_train.parse_args(["--data-dir", args.data_dir, "--steps", str(args.train_steps),
                                        "--precision", "bf16", "--skip-memory"])
        batches, _ = bench_train.fixed_batches("simcse-sup", "triplets", targs, targs.batch_size, targs.steps + 1)
        with tempfile.TemporaryDirectory(prefix="sentcl-bench-floor-") as d:
            box = {}
            mm, _, others = matmul_seconds(lambda: box.update(steps=bench_train.sentcl_steps(batches, targs, d)[0]))
        # per step: the warm-up step is counted too (one of len(batches)), so the floor errs high by at most that share
        t = summary["train"]
        row("training step bf16 <= 0.5x ST fp32", t["bf16"], mm, bench_train.median(box["steps"]), others,
            t["st_step"], 0.5, per=len(batches))
    lines = table(["bf16 target", "measured", "floor: matrix products alone", "other work now", "largest other work",
                   "other work the target allows"], rows)
    lines.append(f"\nOn this CPU bf16 makes the linear layers' matrix products {kernel:.2f}x faster than fp32 "
                 "(one layer's six products on 1,024 tokens). The floor is the seconds the bf16 run spends inside "
                 "matrix products (torch profiler, self time of addmm/mm/bmm) set against sentence-transformers' fp32 "
                 "time: no code on these kernels does better even if everything else took no time. 'Other work' is "
                 "the rest of the bf16 run (attention, activations, layer norms, casts, tokenising, scoring; for "
                 "training also dropout, the optimiser and bookkeeping; seconds per step) under the profiler, which "
                 "slows it somewhat, with its three largest operations by self time; 'allowed' is what the target "
                 "leaves for it.")
    return lines, out


def targets(summary: dict) -> list[str]:
    "The issue's targets, each with what this run measured and whether it was met (sections skipped are left out)."
    rows = []
    def row(name, value, text, ok): rows.append([name, text.format(value), "yes" if ok else "**no**"])
    if "encode" in summary:
        v = summary["encode"]["bf16_speedup"]; row("encode bf16 >= 2.5x ST fp32 throughput", v, "{:.2f}x", v >= 2.5)
    if "sts" in summary:
        s = summary["sts"]
        row("STS fp32 <= 0.65x ST time", s["fp32_ratio"], "{:.2f}x", s["fp32_ratio"] <= 0.65)
        row("STS fp32 scores identical to ST", s["identical"], "{}", s["identical"])
        row("STS bf16 <= 0.25x ST time", s["bf16_ratio"], "{:.2f}x", s["bf16_ratio"] <= 0.25)
        worst = s["worst_bf16_diff"]
        row("STS bf16 every score within 0.05 of fp32", worst, "largest {:.2f}", worst <= 0.05)
    if "clustering" in summary:
        v = summary["clustering"]["protocol_ratio"]
        row("clustering protocol <= 0.5x before (identical ACC/NMI)", v, "{:.2f}x", v <= 0.5)
    if "train" in summary:
        t = summary["train"]
        row("training step fp32 <= 1.0x ST fp32", t["fp32"], "{:.2f}x", t["fp32"] <= 1.0)
        row("training step bf16 <= 0.5x ST fp32", t["bf16"], "{:.2f}x", t["bf16"] <= 0.5)
    if "all" in summary:
        a = summary["all"]
        row("--tasks all fp32 <= 30 min", a["fp32"] / 60, "{:.1f} min", a["fp32"] <= 1800)
        row("--tasks all bf16 faster than fp32", a["bf16"] / 60, "{:.1f} min", a["bf16"] < a["fp32"])
    if not rows: return []
    met = sum(r[2] == "yes" for r in rows)
    return [*table(["target", "measured", "met"], rows), "", f"{met} of {len(rows)} targets met in this run."]


def main(argv=None) -> int:
    args = parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if bad := skip - set(SECTIONS): raise SystemExit(f"bench: unknown section(s) {', '.join(sorted(bad))}; choose from {SECTIONS}")
    if not os.path.isdir(args.data_dir):
        print(f"bench: data directory {args.data_dir} not found; pass --data-dir or set SENTCL_DATA", file=sys.stderr); return 2
    import torch
    from sentence_transformers import SentenceTransformer
    from sentcl.encoders import SentenceEncoder, default_model_path
    from sentcl.eval import protocol_encoder
    t_start, info = time.perf_counter(), machine()
    for line in info: say(line)
    encoder = protocol_encoder(SentenceEncoder("default", device="cpu"), "senteval")
    st = SentenceTransformer(str(default_model_path()), device="cpu")
    warm = ["A warm-up sentence, encoded before anything is timed."] * 64
    encoder.encode(warm); encoder.encode(warm, precision="bf16"); st.encode(warm)
    blocks, summary = [], {}
    for name, fn in (("encode", lambda: bench_encode(args, encoder, st)), ("sts", lambda: bench_sts(args, encoder, st)),
                     ("clustering", lambda: bench_clustering(args, encoder)), ("train", lambda: bench_training(args)),
                     ("all", lambda: bench_all(args, encoder)), ("floor", lambda: bench_floor(args, encoder, summary))):
        if name in skip: continue
        lines, summary[name] = fn()
        blocks.append((name, lines))
        say("\n" + "\n".join(lines) + "\n")
    text = ["# Benchmarks", "", "`make bench` (benchmarks/bench.py): sentcl against sentence-transformers on one machine, in one "
            "process; every ratio compares two timings of the same run.", "", "## Machine", "", *info, ""]
    if goals := targets(summary): text += ["## Targets", "", *goals, ""]
    for name, lines in blocks: text += [f"## {name}", "", *lines, ""]
    text.append(f"Total benchmark time {(time.perf_counter() - t_start) / 60:.1f} min.")
    say("\n".join(text))
    if args.results:
        from sentcl.core import atomic_write
        with atomic_write(args.results) as f: f.write("\n".join(text) + "\n")
        say(f"written: {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
