#!/usr/bin/python3
"""Export small transformers built from PyTorch's own attention modules the
way a user does (torch.onnx.export's defaults), batch 8, a scalar loss:

    attention_models.py OUTDIR [NAME...]

OUTDIR/vit.onnx: torchvision's VisionTransformer as it comes (32 x 32
images, 8 x 8 patches, 2 encoder layers of 4 heads, width 64, 10 classes;
its nn.MultiheadAttention, LayerNorms and GELU MLPs), then cross entropy.
OUTDIR/tenc.onnx: an nn.Embedding, an nn.TransformerEncoder of 2
nn.TransformerEncoderLayer(batch_first=True) with a key padding mask (id 0
is padding), the first position's state, an nn.Linear, cross entropy.
OUTDIR/tdec.onnx: an nn.Embedding, an nn.TransformerDecoder of 2
nn.TransformerDecoderLayer(batch_first=True, norm_first=True) with a
causal mask over the tokens and cross-attention to a [B, 6, 32] memory
input (whose keys and values one product computes), an nn.Linear over the
vocabulary, cross entropy per token.
"""

import torch
import torch.nn as nn
from torchvision.models.vision_transformer import VisionTransformer

from torch_export import export_models

BATCH, CLASSES, SEQUENCE, VOCABULARY = 8, 6, 12, 100


class Vit(nn.Module):
    def __init__(self):
        super().__init__()
        self.vit = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                     hidden_dim=64, mlp_dim=128, num_classes=CLASSES)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        return self.loss(self.vit(x), y)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, 32)
        layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(32, CLASSES)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, ids, y):
        h = self.encoder(self.embed(ids), src_key_padding_mask=ids == 0)
        return self.loss(self.head(h[:, 0]), y)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, 32)
        layer = nn.TransformerDecoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                           batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(layer, num_layers=2)
        self.out = nn.Linear(32, VOCABULARY)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, ids, memory, y):
        causal = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        h = self.decoder(self.embed(ids), memory, tgt_mask=causal)
        return self.loss(self.out(h).reshape(-1, VOCABULARY), y.reshape(-1))


MODELS = {"vit": Vit, "tenc": Encoder, "tdec": Decoder}


def example_args(name):
    labels = torch.randint(0, CLASSES, (BATCH,))
    if name == "vit":
        return torch.randn(BATCH, 3, 32, 32), labels
    if name == "tdec":
        return (torch.randint(0, VOCABULARY, (BATCH, SEQUENCE)), torch.randn(BATCH, 6, 32),
                torch.randint(0, VOCABULARY, (BATCH, SEQUENCE)))
    return torch.randint(0, VOCABULARY, (BATCH, SEQUENCE)), labels


if __name__ == "__main__":
    export_models(MODELS, example_args)
