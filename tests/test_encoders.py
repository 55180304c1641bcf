"""Encoder round trips through sentence-transformers and equality with its embeddings."""
import numpy as np
import pytest
import torch

from sentcl.encoders import SentenceEncoder, default_model_path

st = pytest.importorskip("sentence_transformers")
from sentcl.st_modules import load_sentence_transformer  # sentcl's module classes: no remote code

SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument.", "", "ok",
             " ".join(["token"] * 500),  # longer than max_length: truncated the same way
             "The quick brown fox jumps over the lazy dog."]


def assert_two_codes_agree(got, want):
    """Vectors of the same fp32 weights through two codes or batchings: sums in another order differ in the last bits,
    more on some CPUs' kernels than on others, so 1e-4 relative to the largest entry (a real difference is far larger)."""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def cos_gap(a, b):
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return 1 - (a * b).sum(1)


def test_default_equals_sentence_transformers():
    ours = SentenceEncoder("default").encode(SENTENCES, batch_size=4)
    theirs = st.SentenceTransformer(str(default_model_path()), device="cpu").encode(SENTENCES, batch_size=4)
    assert ours.shape == theirs.shape == (len(SENTENCES), 384)
    assert cos_gap(ours, theirs).max() < 1e-5
    assert_two_codes_agree(ours, theirs)


@pytest.mark.parametrize("pooling", ["mean", "cls_before_pooler", "cls"])
def test_save_loads_in_sentence_transformers(tmp_path, pooling):
    enc = SentenceEncoder("tiny", pooling=pooling, max_length=32)
    want = enc.encode(SENTENCES)
    enc.save(tmp_path / "m")
    got_st = st.SentenceTransformer(str(tmp_path / "m"), device="cpu").encode(SENTENCES)
    got_ours = SentenceEncoder(tmp_path / "m").encode(SENTENCES)
    assert SentenceEncoder(tmp_path / "m").settings.pooling == pooling
    assert_two_codes_agree(got_st, want)
    np.testing.assert_allclose(got_ours, want, atol=1e-6)


def test_mask_pooling_folder_loads_with_template(tmp_path):
    template = 'This sentence : "{sentence}" means [MASK] .'
    enc = SentenceEncoder("tiny", pooling="mask", template=template, max_length=24)
    want = enc.encode(SENTENCES)
    enc.save(tmp_path / "m")
    back = SentenceEncoder(tmp_path / "m")
    assert (back.settings.pooling, back.settings.template, back.settings.max_length) == ("mask", template, 24)
    np.testing.assert_allclose(back.encode(SENTENCES), want, atol=1e-6)
    got_st = load_sentence_transformer(tmp_path / "m", device="cpu").encode(SENTENCES)
    assert_two_codes_agree(got_st, want)


def test_template_survives_truncation():
    enc = SentenceEncoder("tiny", pooling="mask", template='This sentence : "{sentence}" means [MASK] .', max_length=16)
    feats = enc.tokenize([" ".join(["word"] * 100)])
    assert feats["input_ids"].shape[1] == 16
    assert (feats["input_ids"] == enc.tokenizer.mask_token_id).sum() == 1


def test_default_saved_copy_keeps_normalize(tmp_path):
    enc = SentenceEncoder("default")
    enc.save(tmp_path / "copy")
    back = SentenceEncoder(tmp_path / "copy")
    assert back.settings.normalize and back.settings.max_length == 256
    np.testing.assert_allclose(back.encode(SENTENCES[:2]), enc.encode(SENTENCES[:2]), atol=1e-6)


@pytest.mark.parametrize("pooling", ["mean_no_cls", "mean_no_cls_padded"])
def test_liao_pooling_folders_load_in_sentence_transformers(tmp_path, pooling):
    "Liao's poolings reload in sentcl and in sentence-transformers (SentclPooling) with the same vectors."
    enc = SentenceEncoder("tiny", pooling=pooling, max_length=32)
    one_batch = len(SENTENCES)  # the padded mode depends on the batch: compare calls that batch alike
    want = enc.encode(SENTENCES, batch_size=one_batch)
    enc.save(tmp_path / "m")
    back = SentenceEncoder(tmp_path / "m")
    assert back.settings.pooling == pooling
    np.testing.assert_allclose(back.encode(SENTENCES, batch_size=one_batch), want, atol=1e-6)
    got_st = load_sentence_transformer(tmp_path / "m", device="cpu").encode(
        SENTENCES, batch_size=one_batch)
    assert_two_codes_agree(got_st, want)
    small = enc.encode(SENTENCES, batch_size=2)  # padded with shorter neighbours: the same, or a larger vector
    same = np.allclose(small, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())  # other batches: two computations
    assert same if pooling == "mean_no_cls" else not same
