"""Rebuild `sentcl/samples/` from a directory in the sentcl data layout (e.g. ../shared/data).

Only openly licensed text is copied: SNLI (CC BY-SA 4.0), STS-B (CC BY-SA 4.0) and WikiText-2
(CC BY-SA 3.0). Selection is deterministic (numpy Generator seeded with 0).
Usage: python tools/make_samples.py /path/to/data sentcl/samples
"""
import gzip, re, sys
from pathlib import Path
import numpy as np

SRC, DST = Path(sys.argv[1]), Path(sys.argv[2])
rng = np.random.default_rng(0)

def read_lines(p):
    op = gzip.open if p.suffix == ".gz" else open
    with op(p, "rt", encoding="utf-8") as f: return f.read().splitlines()

def write(path, lines):
    path = DST/path; path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(l + "\n" for l in lines), encoding="utf-8")

# NLI: the first 100 premises of SNLI dev (3 hypotheses each, original order: premise groups stay together).
rows = read_lines(SRC/"nli/snli/dev.tsv.gz")
head, body = rows[0], rows[1:]
premises, out = [], []
for r in body:
    p = r.split("\t")[0]
    if p not in premises:
        if len(premises) == 100: break
        premises.append(p)
    out.append(r)
write("nli/snli/train.tsv", [head] + out)

# STS-B dev/test: 250 rows each, uniform random subset kept in file order.
for split in ("dev", "test"):
    rows = read_lines(SRC/f"sts/stsb/{split}.tsv")
    idx = np.sort(rng.choice(len(rows) - 1, size=250, replace=False)) + 1
    write(f"sts/stsb/{split}.tsv", [rows[0]] + [rows[i] for i in idx])

def sentences(doc):
    "WikiText sentences: split paragraphs after ' . ', keep 8-40 words and no <unk>."
    out = []
    for para in read_lines(doc)[1:]:
        for s in re.split(r"(?<= \.) ", para.strip()):
            s = s.strip()
            if 8 <= len(s.split()) <= 40 and "<unk>" not in s and not s.startswith("="): out.append(s)
    return out

docs = SRC/"documents"
TOPICS = ["wikitext2_test_101_Manila", "wikitext2_test_062_Du_Fu",
          "wikitext2_valid_043_U_S_Route_2_in_Michigan", "wikitext2_valid_040_Sonic_the_Hedgehog_1991_video_game",
          "wikitext2_test_084_2003_Pacific_typhoon_season", "wikitext2_test_098_American_Beauty_1999_film",
          "wikitext2_test_096_Brad_Stevens", "wikitext2_valid_030_Japanese_battleship_Asahi"]
clus = ["text\tlabel"]
for label, stem in enumerate(TOPICS):
    ss = sentences(docs/f"{stem}.txt")
    pick = np.sort(rng.choice(len(ss), size=40, replace=False))
    clus += [f"{ss[i]}\t{label}" for i in pick]
write("clustering/wikitext_topics/all.tsv", clus)
write("transfer/topics/all.tsv", clus)  # the same sentences as a classification set (inner k-fold, like MR)

# Wiki sentences: 300 from the other WikiText-2 articles.
pool = []
for p in sorted(docs.glob("wikitext2_*.txt")):
    if p.stem not in TOPICS: pool += sentences(p)
pick = np.sort(rng.choice(len(pool), size=300, replace=False))
write("wiki/wiki1m_sample_wikitext.txt", [pool[i] for i in pick])

# Documents for DeCLUTR span sampling (one of them long enough for the paper's 2,048-token minimum).
for stem in ["wikitext2_valid_001_Homarus_gammarus", "wikitext2_test_088_Constant_k_filter",
             "wikitext2_test_066_1933_Treasure_Coast_hurricane"]:
    write(f"documents/{stem}.txt", read_lines(docs/f"{stem}.txt"))
