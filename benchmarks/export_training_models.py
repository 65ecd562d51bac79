#!/usr/bin/env python3
"""Models whose `ipu plan --train` predictions the training cost model is quoted with, exported at
run time with random weights (nothing large is committed).

  resnet50.onnx     torchvision ResNet-50, input [batch, 3, 224, 224] (dynamic batch)
  bert_large.onnx   a BERT-Large-shaped masked-language model built from torch.nn: token, position
                    and token-type embeddings, LayerNorm, 24 encoder layers (hidden 1024, 16 heads,
                    FFN 4096, GELU), the MLM head (dense + GELU + LayerNorm, decoder to the 30,522-word
                    vocabulary, not tied to the embedding); input token ids [batch, 128], output
                    logits [batch x 128, 30522] for a cross-entropy loss. Its 1.4 GB of weights go to
                    bert_large.onnx.data (ONNX external data).
  bert_small.onnx   the same with 2 layers, hidden 64, 4 heads, FFN 256, vocabulary 1000,
                    sequence 16: the tests' BERT-style encoder.

Usage: export_training_models.py OUT_DIR [resnet50] [bert_large] [bert_small]

Then, for example:
  ipu plan OUT_DIR/resnet50.onnx --train --device bow --precision fp16 --batch 16 \\
      --gradient-accumulation 8 --replicas 16 --ipus 1 --optimizer sgd --momentum 0.9 \\
      --loss cross-entropy --device-iterations 1
  ipu plan OUT_DIR/bert_large.onnx --train --device bow --precision fp16 --batch 8 --ipus 4 \\
      --strategy pipelined --replicas 4 --gradient-accumulation 64 --optimizer lamb \\
      --loss cross-entropy --device-iterations 1
"""
import os
import sys


def bert(vocab=30522, hidden=1024, layers=24, heads=16, ff=4096, seq=128):
    import torch

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.words = torch.nn.Embedding(vocab, hidden)
            self.positions = torch.nn.Embedding(512, hidden)
            self.token_types = torch.nn.Embedding(2, hidden)
            self.norm = torch.nn.LayerNorm(hidden, eps=1e-12)
            layer = torch.nn.TransformerEncoderLayer(hidden, heads, ff, dropout=0.0, activation="gelu",
                                                     batch_first=True, layer_norm_eps=1e-12)
            self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.dense = torch.nn.Linear(hidden, hidden)
            self.act = torch.nn.GELU()
            self.head_norm = torch.nn.LayerNorm(hidden, eps=1e-12)
            self.decoder = torch.nn.Linear(hidden, vocab)
            self.register_buffer("position_ids", torch.arange(seq).unsqueeze(0))

        def forward(self, ids):
            x = self.words(ids) + self.positions(self.position_ids) + self.token_types(torch.zeros_like(ids))
            x = self.encoder(self.norm(x))
            x = self.head_norm(self.act(self.dense(x)))
            return self.decoder(x).reshape(-1, vocab)

    return Bert(), seq, vocab


def export_bert(out_dir, name, **shape):
    import onnx
    import torch

    torch.manual_seed(0)
    model, seq, vocab = bert(**shape)
    # TransformerEncoder deep-copies one layer, and the exporter merges equal initializers: draw
    # every parameter afresh so each layer keeps weights of its own, as a trained BERT has.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    model.eval()
    ids = torch.randint(0, vocab, (2, seq))
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, ids, path, opset_version=13, input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "batch"}, "logits": {0: "tokens"}})
    if os.path.getsize(path) > 2 * 1024 * 1024:
        m = onnx.load(path)
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=name + ".onnx.data", size_threshold=1024)


def resnet50(out_dir):
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, x, os.path.join(out_dir, "resnet50.onnx"), opset_version=13, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    import torch
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    exporters = {
        "resnet50": resnet50,
        "bert_large": lambda d: export_bert(d, "bert_large"),
        "bert_small": lambda d: export_bert(d, "bert_small", vocab=1000, hidden=64, layers=2, heads=4, ff=256, seq=16),
    }
    for name in sys.argv[2:] or exporters:
        exporters[name](out_dir)
        print("exported", os.path.join(out_dir, name + ".onnx"))


if __name__ == "__main__":
    main()
