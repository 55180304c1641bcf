"""Benchmark `sentcl eval --tasks sts` against plain sentence-transformers encoding.

The seven STS tasks on the `default` model (all-MiniLM-L6-v2), starting from an empty embedding
cache. sentcl's time covers the whole evaluation (loading the data, encoding each distinct sentence
once, cosine and Spearman); the baseline covers only `SentenceTransformer.encode` on the same pairs,
one sentence column at a time, as a script without sentcl would do it. Both models are loaded before
timing. Prints both times, the ratio (target <= 0.75) and the STS-B Spearman of both paths, which
must agree.

    python benchmarks/bench_eval.py [--data-dir DIR] [--batch-size 64]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("SENTCL_DATA", "../shared/data"), help="a data folder in the sentcl layout")
    ap.add_argument("--batch-size", type=int, default=64, help="batch size for both paths")
    ap.add_argument("--repeats", type=int, default=1, help="alternate the two paths this many times and compare the fastest of each")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.data_dir):
        print(f"bench_eval: data directory {args.data_dir} not found; pass --data-dir or set SENTCL_DATA", file=sys.stderr)
        return 2

    import torch
    from sentence_transformers import SentenceTransformer
    from sentcl.data.tasks import STS_TASKS, load_sts
    from sentcl.encoders import SentenceEncoder, default_model_path
    from sentcl.eval import evaluate, spearman100
    from sentcl.eval.common import cosine_rows

    print(f"torch threads: {torch.get_num_threads()}, batch size {args.batch_size}, repeats {args.repeats}", flush=True)
    encoder = SentenceEncoder("default")
    st = SentenceTransformer(str(default_model_path()), device="cpu")
    frames = {t: load_sts(t, "test", args.data_dir) for t in STS_TASKS}
    warm = frames["stsb"]["sentence1"].tolist()[:64]
    encoder.encode(warm, batch_size=args.batch_size); st.encode(warm, batch_size=args.batch_size)  # warm-up, untimed

    ours, base = [], []
    for r in range(args.repeats):  # alternate, so a busy machine slows both paths alike
        with tempfile.TemporaryDirectory(prefix="sentcl-bench-cache-") as cache:
            os.environ["SENTCL_CACHE_DIR"] = cache  # empty cache: every distinct sentence is encoded
            t0 = time.perf_counter()
            res = evaluate(encoder, "sts", data_dir=args.data_dir, batch_size=args.batch_size, cache=True, log=lambda m: None)
            ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        st_emb = {t: (st.encode(df["sentence1"].tolist(), batch_size=args.batch_size),
                      st.encode(df["sentence2"].tolist(), batch_size=args.batch_size)) for t, df in frames.items()}
        base.append(time.perf_counter() - t0)
        print(f"repeat {r + 1}: sentcl {ours[-1]:.1f} s, sentence-transformers {base[-1]:.1f} s, ratio {ours[-1] / base[-1]:.3f}", flush=True)
    ours, base = min(ours), min(base)

    pairs = sum(len(df) for df in frames.values())
    distinct = sum(len(set(df["sentence1"]) | set(df["sentence2"])) for df in frames.values())
    st_stsb = spearman100(cosine_rows(*st_emb["stsb"]), frames["stsb"]["score"])
    print(f"pairs: {pairs}, sentences: {2 * pairs}, distinct per task (summed): {distinct}")
    print(f"sentcl eval --tasks sts (empty cache): {ours:.1f} s")
    print(f"SentenceTransformer.encode, column by column: {base:.1f} s")
    print(f"STS-B test Spearman: sentcl {res['tasks']['stsb']['spearman']:.2f}, sentence-transformers {st_stsb:.2f}")
    print(f"ratio: {ours / base:.3f} (target <= 0.75)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
