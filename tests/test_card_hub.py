"""The model card sentcl writes, as the Hub reads it: its front matter parses back with huggingface_hub's card tools
(offline) with the library, base model, datasets, tags and a model-index whose scores carry their protocol, and the
folder still loads with `SentenceTransformer(path)`."""
import json

from huggingface_hub import ModelCard
from huggingface_hub.repocard import metadata_load
from sentence_transformers import SentenceTransformer

from sentcl.encoders import SentenceEncoder
from sentcl.train.cards import write_model_card


def test_the_card_parses_with_its_metadata_and_the_folder_still_loads(tmp_path):
    SentenceEncoder("tiny", device="cpu").save(tmp_path/"model")
    (tmp_path/"config.json").write_text(json.dumps({"run.method": "pairsupcon", "method.model": "default",
                                                    "run.train_data": "snli", "method.batch_size": 1024}))
    evaluation = {"tasks": {"stsb": {"spearman": 82.031, "split": "test"}, "wikitext_topics": {"acc_mean": 60.5}},
                  "settings": {"protocol": "senteval", "pooling": "mean", "max_length": 512}}
    path = write_model_card(tmp_path, evaluation, {"step": 3})
    meta = metadata_load(path)
    assert (meta["library_name"], meta["pipeline_tag"], meta["base_model"], meta["datasets"]) == (
        "sentence-transformers", "sentence-similarity", "sentence-transformers/all-MiniLM-L6-v2", ["snli"])
    assert "sentcl-method:pairsupcon" in meta["tags"]
    results = ModelCard.load(path).data.eval_results
    assert [(r.task_type, r.dataset_type, r.metric_type, r.metric_value) for r in results] == [
        ("STS", "stsb", "spearman", 82.03), ("Clustering", "wikitext_topics", "accuracy", 60.5)]
    assert results[0].metric_args == {"protocol": "senteval", "pooling": "mean", "max_length": 512}
    assert "training datasets (MTEB asks them, to judge zero-shot): `snli`" in path.read_text()
    model = SentenceTransformer(str(tmp_path/"model"), device="cpu", trust_remote_code=True)
    assert model.encode(["a cat"]).shape == (1, 128)
