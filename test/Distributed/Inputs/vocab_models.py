#!/usr/bin/python3
"""Export small language models whose vocabulary no model-rank count of 2
or 4 divides (27 words), the way a PyTorch user does (torch.onnx.export's
defaults), batch 8 of 6 tokens, a scalar loss:

    vocab_models.py OUTDIR [NAME...]

OUTDIR/tied.onnx: nn.Embedding(27, 16), a Linear-GELU-Linear block with a
residual, LayerNorm, and the output layer tied to the embedding (its
transpose, plus a bias of 27), cross entropy over every position
(BERT's masked-LM head without the mask); exported without constant
folding (make_models.py's way), which keeps the tie: the default export
folds the transpose into an initializer of its own.
OUTDIR/folded.onnx: the tied model with torch.onnx.export's defaults,
whose constant folding writes the embedding's transpose as an initializer
of its own ([16, 27]: the output layer's classes are its second
dimension).
OUTDIR/untied.onnx: nn.Embedding(27, 16), a Linear-ReLU, and an output
nn.Linear(16, 27) of its own (more classes than inputs: a vocabulary),
cross entropy over every position.
"""


import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_export import export_models

BATCH, LEN, VOCAB, WIDTH = 8, 6, 27, 16


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.fc1 = nn.Linear(WIDTH, 32)
        self.fc2 = nn.Linear(32, WIDTH)
        self.norm = nn.LayerNorm(WIDTH)
        self.out_bias = nn.Parameter(torch.zeros(VOCAB))

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        h = self.norm(h + self.fc2(F.gelu(self.fc1(h))))
        logits = h @ self.embed.weight.t() + self.out_bias
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


class Untied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens, targets):
        h = F.relu(self.fc(self.embed(tokens)))
        return F.cross_entropy(self.out(h).reshape(-1, VOCAB), targets.reshape(-1))


MODELS = {"tied": Tied, "folded": Tied, "untied": Untied}
TRAINING = {"tied"}


def main():
    export_models(MODELS, lambda name: (torch.randint(0, VOCAB, (BATCH, LEN)),
                                        torch.randint(0, VOCAB, (BATCH, LEN))),
                  training=TRAINING)


if __name__ == "__main__":
    main()
