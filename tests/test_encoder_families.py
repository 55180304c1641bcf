"""Every method trains on the encoder families a user is likely to bring, and saves a folder that
sentence-transformers loads with the same vectors.

Each family is a tiny random-weight model built from transformers' own config class (hidden size 32, two
layers) with the default model's tokenizer: what matters here is each family's code (its attention mask,
pooler, embeddings), not its weights. A family whose config class this transformers lacks is skipped, and
the skip says so.
"""
import json
import warnings

import numpy as np
import pytest
import torch
import transformers

from sentcl.core import SentclError
from sentcl.encoders import SentenceEncoder, default_model_path
from sentcl.methods import METHODS
from sentcl.train.trainer import RunOptions, train

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
DEBERTA_V3 = dict(relative_attention=True, position_buckets=64, norm_rel_ebd="layer_norm", share_att_key=True,
                  pos_att_type=["p2c", "c2p"], position_biased_input=False, max_relative_positions=-1)
FAMILIES = {  # name: (config class, its arguments besides the tokenizer's ids)
    "bert": ("BertConfig", SMALL),
    "roberta": ("RobertaConfig", {**SMALL, "max_position_embeddings": 514}),  # positions start after padding
    "distilbert": ("DistilBertConfig", dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64)),
    "mpnet": ("MPNetConfig", {**SMALL, "max_position_embeddings": 514}),
    # a sliding window of 16 tokens: the long sentences below cross it
    "modernbert": ("ModernBertConfig", {**SMALL, "global_attn_every_n_layers": 2, "local_attention": 16}),
    "electra": ("ElectraConfig", {**SMALL, "embedding_size": 16}),  # embeddings narrower than the states, as -small
    "xlm-roberta": ("XLMRobertaConfig", {**SMALL, "max_position_embeddings": 514}),
    "deberta-v3": ("DebertaV2Config", {**SMALL, **DEBERTA_V3}),
    "deberta-v2": ("DebertaV2Config", {**SMALL, **DEBERTA_V3, "conv_kernel_size": 3, "conv_act": "gelu"}),
}
TOKEN_TYPES = {"bert", "electra", "deberta-v3", "deberta-v2"}  # their tokenizers return token_type_ids
NO_POOLER = {"distilbert", "modernbert", "electra", "deberta-v3", "deberta-v2"}  # no BERT pooler in their code
SENTENCES = ["A man is playing a guitar.", "word " * 60, "Tom and Jerry became good friends " * 4]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Models this small run fastest on one thread (two threads only wait on each other); restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def family_dir(tmp_path_factory):
    """The folder of family `name`'s tiny model (built once per module)."""
    built = {}

    def make(name):
        if name not in built:
            kind, kwargs = FAMILIES[name]
            if not hasattr(transformers, kind):
                pytest.skip(f"transformers {transformers.__version__} has no {kind}")
            # the default model's vocabulary; what the tokenizer returns as each family's own does
            inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if name in TOKEN_TYPES else [])
            tok = transformers.AutoTokenizer.from_pretrained(default_model_path(), model_input_names=inputs)
            ids = dict(pad_token_id=tok.pad_token_id)
            if name == "modernbert":
                ids.update(cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
                           bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
            config = getattr(transformers, kind)(vocab_size=tok.vocab_size, **kwargs, **ids)
            torch.manual_seed(0)
            built[name] = tmp_path_factory.mktemp(name)
            transformers.AutoModel.from_config(config).save_pretrained(built[name])
            tok.save_pretrained(built[name])
        return built[name]
    return make


@pytest.mark.parametrize("family", FAMILIES)
def test_the_training_mask_is_the_models_own(family_dir, family):
    # A training step's mask (`bias=True`) against the 2-D mask the model turns into its own: on a padded batch
    # longer than ModernBERT's window both are the mask the model's code builds, through the same code, so equal.
    enc = SentenceEncoder(family_dir(family), device="cpu").eval()
    feats = enc.tokenize(SENTENCES)
    assert feats["input_ids"].shape[1] > 40 and not bool(feats["attention_mask"].all())  # padded, past the window
    with torch.no_grad():
        assert torch.equal(enc(feats, bias=True), enc(feats))


def _train(model, method, out, **overrides):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny models have no pretrained MLM head; the warning says so
        return train(method, {"model": str(model), "batch_size": 2 if method == "declutr" else 4,
                              "eval_every": None, **overrides},
                     RunOptions(preset="cpu-smoke", out=str(out), max_steps=2, log_every=1, loader_workers=0,
                                progress=False))


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("family", FAMILIES)
def test_every_method_trains_and_saves_on_every_family(family_dir, tmp_path, family, method):
    st = pytest.importorskip("sentence_transformers")
    model, overrides = family_dir(family), {}
    if METHODS[method].Config().train_pooling == "cls" and family in NO_POOLER:
        with pytest.raises(SentclError, match="--set train_pooling=cls_before_pooler"):  # says what to do instead
            _train(model, method, tmp_path / "refused")
        overrides = dict(train_pooling="cls_before_pooler", eval_pooling="cls_before_pooler")
    summary = _train(model, method, tmp_path / "run", **overrides)
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in log if "loss" in row]
    assert summary["finished"] and len(losses) == 2 and np.isfinite(losses).all(), losses
    ours = SentenceEncoder(tmp_path / "run" / "model", device="cpu").encode(SENTENCES)
    theirs = st.SentenceTransformer(str(tmp_path / "run" / "model"), device="cpu",
                                    trust_remote_code=True).encode(SENTENCES)
    # The same fp32 weights through two codes (sentcl's forward and pooling, sentence-transformers' modules):
    # sums taken in another order differ in the last bits, about 1e-7 on these vectors here and more on other CPUs'
    # kernels: 1e-4 relative to the largest entry.
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())
