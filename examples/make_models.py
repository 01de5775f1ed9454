#!/usr/bin/python3
"""Export Parallax's example models as ONNX *training graphs*.

Every model is an nn.Module whose forward takes the data inputs (and labels)
and returns one scalar loss, so the exported graph is the forward pass of a
training step; Parallax derives the backward pass and the optimizer itself.

Usage (Debian's python, which has python3-torch/-onnx/-torchvision):

    /usr/bin/python3 examples/make_models.py [--out DIR] [NAME ...]
    /usr/bin/python3 examples/make_models.py --check [NAME ...]
    /usr/bin/python3 examples/make_models.py --if-stale [NAME ...]
    /usr/bin/python3 examples/make_models.py --references [NAME ...]
    /usr/bin/python3 examples/make_models.py --noise-check [NAME ...]

DIR defaults to examples/models next to this script, NAME to every model
except the on-demand ones (Model.on_demand: bert_base, a BERT-base-sized
graph of ~110M parameters and ~420 MiB for strategy-search timing), which
are exported, checked and stamped only when named, e.g.
`make_models.py bert_base` or `--if-stale bert_base`; scripts/models.sh
(`--if-stale` without names) never spends time on them.
--check re-verifies existing files (ONNX checker, shape inference, op set,
inputs, sparse variables) without exporting.  --if-stale exports only when
DIR/.stamp is missing or stale or a requested file is missing, and then
writes the training references of the requested models that are stale or
missing.  --references (re)writes the training references
(DIR/golden/NAME/: a fixed data set and the losses and trained weights of
20 PyTorch SGD and Adam steps with Parallax's semantics; default: mlp, cnn,
nmt, lm, bag, densenet, dlrm), exporting stale models first.  --noise-check measures how
far rounding alone moves those references.

DIR/.stamp: line 1 is the sha256 of this script, then one entry per line:
the models (NAME) and training references (golden/NAME) that this exact
script version produced in DIR.

Exports are deterministic (fixed seed per model, no timestamps in the
file), so re-running with the same torch/onnx produces byte-identical files.
"""

import argparse
import collections
import dataclasses
import hashlib
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Tuple

SCRIPT = Path(__file__).resolve()
DEFAULT_OUT = SCRIPT.parent / "models"
OPSET = 17

# The ONNX ops Parallax's importer lowers.  Anything else in an exported
# graph is an error: rewrite the model with constructs that stay inside.
ALLOWED_OPS = frozenset("""
    Gather GatherElements MatMul Gemm Add Sub Mul Div Neg Pow Sqrt Reciprocal
    Exp Log Abs Relu LeakyRelu Tanh Sigmoid Erf Softmax LogSoftmax
    SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss ReduceSum ReduceMean
    ReduceMax Reshape Flatten Transpose Concat Split Slice Squeeze Unsqueeze
    Expand Where Equal Less Greater Not Cast Constant ConstantOfShape Shape
    Range Identity Dropout LayerNormalization BatchNormalization Conv MaxPool
    AveragePool GlobalAveragePool Clip Max Min Pad Loop If
""".split())

# Loop and If are allowed with compile-time trip counts and conditions (the
# importer unrolls and inlines them); their subgraphs' ops must be allowed too.
SUBGRAPH_OPS = frozenset(("Loop", "If"))

# Committed models have to stay small enough for git.
COMMITTED_SIZE_LIMIT = 5 * 1024 * 1024

BATCH = "batch"  # marks the dynamic leading dimension of an input

# Other dynamic dimensions, by name, and the size the examples and the
# training references use for them (parallax-opt binds them with
# --input-shape NAME=...).
DIM_SIZES: Dict[str, int] = {}


@dataclasses.dataclass(frozen=True)
class Input:
    """One graph input.  shape[0] == BATCH makes dim 0 dynamic ("batch");
    another string is another dynamic dimension (sized by DIM_SIZES)."""
    name: str
    shape: Tuple
    dtype: str          # "float32" or "int64"
    high: int = 0       # int64: values drawn from [0, high); float32 with
                        # high=2: values drawn from {0., 1.} (binary labels)

    @property
    def batched(self) -> bool:
        return len(self.shape) > 0 and self.shape[0] == BATCH

    def static_shape(self, batch: int) -> Tuple[int, ...]:
        return tuple(batch if d == BATCH else DIM_SIZES[d] if isinstance(d, str) else d
                     for d in self.shape)


@dataclasses.dataclass(frozen=True)
class Model:
    build: Callable     # () -> nn.Module (imports torch itself)
    inputs: Tuple[Input, ...]  # forward()'s arguments, in order
    batch: int          # batch size of the example inputs used for tracing
    seed: int
    committed: bool     # committed to git (small) or generated on demand
    sparse: Tuple[str, ...] = ()  # initializers that must be read only via
                                  # Gather(init, ids, axis=0)
    doc: str = ""
    on_demand: bool = False  # large: left out when no NAME is given (see
                             # default_names()); export it by naming it

    def __post_init__(self):
        assert not (self.on_demand and self.committed), "on-demand models are not committed"


# Sizes shared by a builder and its input list in MODELS.
NMT_SRC_VOCAB, NMT_TGT_VOCAB, NMT_LEN = 8000, 8000, 16
BAG_ITEMS, BAG_TAGS, BAG_DENSE = 5000, 300, 8
DIM_SIZES.update(item_ids=96, tag_ids=48)  # ids per step (all of a step's bags)
LM_VOCAB, LM_LEN, LM_SAMPLES = 100_000, 20, 1024
DLRM_TABLES, DLRM_DENSE = (1_000_000, 100_000, 10_000, 1_000), 13
BERT_VOCAB, BERT_LEN = 30522, 128

# --------------------------------------------------------------------------
# Model builders.  torch is imported lazily (see _torch()) so that --check
# and an up-to-date --if-stale do not pay for importing it.
# --------------------------------------------------------------------------

def _torch():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    return torch, nn, F


def build_mlp():
    torch, nn, F = _torch()

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(64, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x, y):
            return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)

    return MLP()


def build_cnn():
    torch, nn, F = _torch()

    class BasicBlock(nn.Module):
        """ResNet basic block; 1x1 conv + BN shortcut when the shape changes."""

        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False),
                    nn.BatchNorm2d(cout))
            else:
                self.shortcut = nn.Identity()  # traced away: no node

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class SmallResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn = nn.BatchNorm2d(16)
            # Shape-preserving max pool: exercises MaxPool (with padding)
            # without shrinking 32x32 inputs further.
            self.pool = nn.MaxPool2d(3, stride=1, padding=1)
            self.layer1 = BasicBlock(16, 16, 1)
            self.layer2 = BasicBlock(16, 32, 2)
            self.layer3 = BasicBlock(32, 64, 2)
            self.avgpool = nn.AdaptiveAvgPool2d(1)  # -> GlobalAveragePool
            self.fc = nn.Linear(64, 10)

        def forward(self, x, y):
            h = self.pool(F.relu(self.bn(self.conv(x))))
            h = self.layer3(self.layer2(self.layer1(h)))
            h = torch.flatten(self.avgpool(h), 1)
            return F.cross_entropy(self.fc(h), y)

    return SmallResNet()


def _transformer_parts():
    """Hand-written attention / layers shared by nmt and lm.

    nn.MultiheadAttention and nn.Transformer*Layer are avoided on purpose:
    their training-mode export goes through baddbmm / chunk / fused paths
    whose ops are not all in ALLOWED_OPS.  Sequence lengths are passed as
    Python ints so reshapes get constant shapes (-1 for the batch) instead
    of Shape/Gather/Concat chains.
    """
    torch, nn, F = _torch()

    class Attention(nn.Module):
        def __init__(self, d, heads, dropout):
            super().__init__()
            self.heads, self.dh = heads, d // heads
            self.q = nn.Linear(d, d)
            self.k = nn.Linear(d, d)
            self.v = nn.Linear(d, d)
            self.o = nn.Linear(d, d)
            self.drop = nn.Dropout(dropout)

        def _split(self, x, t):  # [B, t, d] -> [B, heads, t, dh]
            return x.reshape(-1, t, self.heads, self.dh).transpose(1, 2)

        def forward(self, xq, xkv, tq, tk, mask=None):
            q = self._split(self.q(xq), tq)
            k = self._split(self.k(xkv), tk)
            v = self._split(self.v(xkv), tk)
            scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(self.dh))
            if mask is not None:
                scores = scores + mask  # additive: 0 or -1e9, broadcast
            attn = self.drop(F.softmax(scores, dim=-1))
            out = torch.matmul(attn, v).transpose(1, 2)
            return self.o(out.reshape(-1, tq, self.heads * self.dh))

    class FeedForward(nn.Module):
        def __init__(self, d, ffn, dropout, act):
            super().__init__()
            self.fc1 = nn.Linear(d, ffn)
            self.fc2 = nn.Linear(ffn, d)
            self.drop = nn.Dropout(dropout)
            self.act = act

        def forward(self, x):
            return self.fc2(self.drop(self.act(self.fc1(x))))

    def causal_mask(t):
        # Additive mask, -1e9 above the diagonal.  -1e9 rather than -inf
        # keeps every intermediate finite.  Registered as a non-persistent
        # buffer by the callers so the exporter emits a Constant node, not
        # a (trainable-looking) initializer; torch.triu itself would
        # export as Trilu, which is not in the op set.
        return torch.triu(torch.full((t, t), -1e9), diagonal=1)

    def sinusoid(t, d):
        pos = torch.arange(t, dtype=torch.float32)[:, None]
        freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
        table = torch.zeros(t, d)
        table[:, 0::2] = torch.sin(pos * freq)
        table[:, 1::2] = torch.cos(pos * freq)
        return table

    return Attention, FeedForward, causal_mask, sinusoid


def build_nmt():
    torch, nn, F = _torch()
    Attention, FeedForward, causal_mask, sinusoid = _transformer_parts()
    V_SRC, V_TGT, T = NMT_SRC_VOCAB, NMT_TGT_VOCAB, NMT_LEN
    D, HEADS, FFN, P = 128, 4, 256, 0.1

    class EncoderLayer(nn.Module):  # post-LN, as in "Attention is all you need"
        def __init__(self):
            super().__init__()
            self.attn = Attention(D, HEADS, P)
            self.ffn = FeedForward(D, FFN, P, F.relu)
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.drop = nn.Dropout(P)

        def forward(self, x):
            x = self.ln1(x + self.drop(self.attn(x, x, T, T)))
            return self.ln2(x + self.drop(self.ffn(x)))

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = Attention(D, HEADS, P)
            self.cross_attn = Attention(D, HEADS, P)
            self.ffn = FeedForward(D, FFN, P, F.relu)
            self.ln1, self.ln2, self.ln3 = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
            self.drop = nn.Dropout(P)

        def forward(self, x, memory, mask):
            x = self.ln1(x + self.drop(self.self_attn(x, x, T, T, mask)))
            x = self.ln2(x + self.drop(self.cross_attn(x, memory, T, T)))
            return self.ln3(x + self.drop(self.ffn(x)))

    class NMT(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = nn.Embedding(V_SRC, D)
            self.tgt_embed = nn.Embedding(V_TGT, D)
            # Constants, not parameters: exported as Constant nodes.
            self.register_buffer("pos", sinusoid(T, D), persistent=False)
            self.register_buffer("mask", causal_mask(T), persistent=False)
            self.drop = nn.Dropout(P)
            self.encoder = EncoderLayer()
            self.decoder = DecoderLayer()
            self.out = nn.Linear(D, V_TGT)  # full softmax, not tied

        def embed(self, table, ids):
            return self.drop(table(ids) * math.sqrt(D) + self.pos)

        def forward(self, src, tgt_in, tgt_out):
            memory = self.encoder(self.embed(self.src_embed, src))
            h = self.decoder(self.embed(self.tgt_embed, tgt_in), memory, self.mask)
            logits = self.out(h)  # [B, T, V_TGT]
            return F.cross_entropy(logits.reshape(-1, V_TGT), tgt_out.reshape(-1))

    return NMT()


def build_lm():
    torch, nn, F = _torch()
    Attention, FeedForward, causal_mask, _ = _transformer_parts()
    V, T = LM_VOCAB, LM_LEN
    D, HEADS, FFN, LAYERS, P = 256, 4, 1024, 2, 0.1

    class Block(nn.Module):  # pre-LN decoder block (GPT-2 style), GELU -> Erf
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.attn = Attention(D, HEADS, P)
            self.ffn = FeedForward(D, FFN, P, F.gelu)
            self.drop = nn.Dropout(P)

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.drop(self.attn(h, h, T, T, mask))
            return x + self.drop(self.ffn(self.ln2(x)))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D)
            nn.init.normal_(self.embed.weight, std=0.02)
            self.pos = nn.Parameter(torch.randn(T, D) * 0.02)  # learned, dense
            self.register_buffer("mask", causal_mask(T), persistent=False)
            self.drop = nn.Dropout(P)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(D)
            # Sampled-softmax output layer.  Plain parameters read only
            # through index_select / F.embedding, i.e. Gather(axis 0): the
            # full [V, D] matrix never enters a MatMul, which is what makes
            # it a sparse variable.
            self.w_out = nn.Parameter(torch.randn(V, D) * D ** -0.5)
            self.b_out = nn.Parameter(torch.zeros(V))

        def forward(self, tokens, targets, sampled):
            x = self.drop(self.embed(tokens) + self.pos)
            for block in self.blocks:
                x = block(x, self.mask)
            h = self.ln_f(x).reshape(-1, D)                      # [B*T, D]
            # Sampled softmax as TensorFlow's sampled_softmax_loss: each
            # position scores its own target against the step's shared
            # sampled candidates. (Scoring against the other positions'
            # targets too would make a sample's loss depend on how the batch
            # is split over ranks.)
            t = targets.reshape(-1)                              # [B*T]
            w_t = F.embedding(t, self.w_out)                     # Gather
            b_t = self.b_out.index_select(0, t)                  # Gather axis 0
            w_s = F.embedding(sampled, self.w_out)               # [S, D]
            b_s = self.b_out.index_select(0, sampled)            # [S]
            true_logit = (h * w_t).sum(-1, keepdim=True) + b_t.unsqueeze(1)
            sampled_logits = torch.matmul(h, w_s.t()) + b_s      # [B*T, S]
            logits = torch.cat([true_logit, sampled_logits], 1)  # [B*T, 1+S]
            # The true word is class 0.  The size is traced from h, so this
            # becomes a shape computation folded at import.
            labels = torch.zeros(h.shape[0], dtype=torch.long)
            return F.cross_entropy(logits, labels)

    return LM()


def build_bert_base():
    torch, nn, F = _torch()
    Attention, FeedForward, _, _ = _transformer_parts()
    V, T = BERT_VOCAB, BERT_LEN
    D, HEADS, FFN, LAYERS, P, EPS = 768, 12, 3072, 12, 0.1, 1e-12

    class Layer(nn.Module):  # post-LN encoder layer, as BERT's; GELU -> Erf
        def __init__(self):
            super().__init__()
            self.attn = Attention(D, HEADS, P)
            self.ffn = FeedForward(D, FFN, P, F.gelu)  # as lm's (BERT has no dropout there)
            self.ln1, self.ln2 = nn.LayerNorm(D, eps=EPS), nn.LayerNorm(D, eps=EPS)
            self.drop = nn.Dropout(P)

        def forward(self, x):
            x = self.ln1(x + self.drop(self.attn(x, x, T, T)))
            return self.ln2(x + self.drop(self.ffn(x)))

    class BertBase(nn.Module):
        """BERT-base (12 layers, hidden 768, 12 heads, FFN 3072) with its
        masked-LM head, the loss taken at every position (no masking and no
        padding mask: every token is a prediction target).  Differences to
        BERT: no token-type embeddings and no pooler / next-sentence head,
        the learned position table has the T rows a step uses rather than
        512 (a slice of a variable would be the only such read in the
        examples), and the FFN has lm's dropout after its GELU."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.zeros(T, D))  # learned, dense
            self.ln_embed = nn.LayerNorm(D, eps=EPS)
            self.drop = nn.Dropout(P)
            self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
            # Masked-LM head: transform, then the decoder tied to the word
            # embeddings (so embed.weight is read by Gather and densely: it
            # is not a sparse variable) plus its own bias.
            self.head = nn.Linear(D, D)
            self.ln_head = nn.LayerNorm(D, eps=EPS)
            self.out_bias = nn.Parameter(torch.zeros(V))
            for m in self.modules():  # BERT's initializer
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)
            nn.init.normal_(self.pos, std=0.02)

        def forward(self, tokens, targets):
            x = self.drop(self.ln_embed(self.embed(tokens) + self.pos))
            for layer in self.layers:
                x = layer(x)
            h = self.ln_head(F.gelu(self.head(x)))                 # [B, T, D]
            logits = torch.matmul(h, self.embed.weight.t()) + self.out_bias  # [B, T, V]
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    return BertBase()


def build_dlrm():
    torch, nn, F = _torch()
    TABLES, DENSE, EMB = DLRM_TABLES, DLRM_DENSE, 16
    N = len(TABLES) + 1  # interacting features: bottom MLP output + tables

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = nn.Sequential(nn.Linear(DENSE, 64), nn.ReLU(),
                                        nn.Linear(64, EMB), nn.ReLU())
            self.tables = nn.ModuleList(nn.Embedding(n, EMB) for n in TABLES)
            for t, n in zip(self.tables, TABLES):  # DLRM reference init
                nn.init.uniform_(t.weight, -n ** -0.5, n ** -0.5)
            # Strict upper triangle of the N x N interaction matrix, as flat
            # indices; a constant (non-persistent buffer -> Constant node)
            # read by Gather(axis=1).
            iu = [i * N + j for i in range(N) for j in range(i + 1, N)]
            self.register_buffer("triu", torch.tensor(iu, dtype=torch.int64),
                                 persistent=False)
            self.top = nn.Sequential(nn.Linear(EMB + len(iu), 64), nn.ReLU(),
                                     nn.Linear(64, 1))

        def forward(self, dense, cat0, cat1, cat2, cat3, label):
            z = self.bottom(dense)                                   # [B, 16]
            embs = [t(c) for t, c in zip(self.tables, (cat0, cat1, cat2, cat3))]
            feats = torch.stack([z] + embs, dim=1)                   # [B, 5, 16]
            inter = torch.matmul(feats, feats.transpose(1, 2))       # [B, 5, 5]
            pairs = inter.reshape(-1, N * N).index_select(1, self.triu)  # [B, 10]
            logit = self.top(torch.cat([z, pairs], dim=1)).reshape(-1)  # [B]
            # Stable BCE-with-logits written by hand: the builtin exports as
            # log(sigmoid(z)) and log(1 - sigmoid(z)), which hit log(0) for
            # large |z|.
            loss = F.relu(logit) - logit * label + torch.log(1 + torch.exp(-torch.abs(logit)))
            return loss.mean()

    return DLRM()


def build_bag():
    torch, nn, F = _torch()

    class Recommender(nn.Module):
        """Bags of ids as nn.EmbeddingBag takes them: one flat id tensor per
        step and the offset where each sample's bag starts (a bag may be
        empty).  The history is averaged, the tags summed."""

        def __init__(self):
            super().__init__()
            self.items = nn.EmbeddingBag(BAG_ITEMS, 16, mode="mean")
            self.tags = nn.EmbeddingBag(BAG_TAGS, 16, mode="sum")
            self.dense = nn.Linear(BAG_DENSE, 16)
            self.top = nn.Sequential(nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, item_ids, item_offsets, tag_ids, tag_offsets, dense, label):
            h = torch.cat([self.items(item_ids, item_offsets),
                           self.tags(tag_ids, tag_offsets),
                           F.relu(self.dense(dense))], dim=1)
            logit = self.top(h).squeeze(1)  # a dynamic squeeze: an If
            # Stable BCE-with-logits, as dlrm writes it.
            loss = F.relu(logit) - logit * label + torch.log(1 + torch.exp(-torch.abs(logit)))
            return loss.mean()

    return Recommender()


def build_densenet():
    torch, nn, F = _torch()

    class DenseLayer(nn.Module):
        """BN-ReLU-Conv producing `growth` channels, concatenated to its input."""

        def __init__(self, cin, growth):
            super().__init__()
            self.bn = nn.BatchNorm2d(cin)
            self.conv = nn.Conv2d(cin, growth, 3, padding=1, bias=False)

        def forward(self, x):
            return torch.cat([x, self.conv(F.relu(self.bn(x)))], 1)

    class Transition(nn.Module):
        """BN-ReLU-1x1 Conv, then a padded average pool (Pad + AveragePool,
        the padding counted, as nn.AvgPool2d's default)."""

        def __init__(self, cin, cout):
            super().__init__()
            self.bn = nn.BatchNorm2d(cin)
            self.conv = nn.Conv2d(cin, cout, 1, bias=False)
            self.pool = nn.AvgPool2d(3, stride=2, padding=1)

        def forward(self, x):
            return self.pool(self.conv(F.relu(self.bn(x))))

    class DenseNet(nn.Module):
        def __init__(self, growth=8):
            super().__init__()
            # Reflection padding instead of the conv's zeros: Pad(reflect).
            self.stem = nn.Sequential(nn.ReflectionPad2d(1),
                                      nn.Conv2d(3, 16, 3, bias=False))
            self.block1 = nn.Sequential(*(DenseLayer(16 + k * growth, growth)
                                          for k in range(3)))
            self.trans1 = Transition(16 + 3 * growth, 20)
            self.block2 = nn.Sequential(*(DenseLayer(20 + k * growth, growth)
                                          for k in range(3)))
            self.trans2 = Transition(20 + 3 * growth, 24)
            self.bn = nn.BatchNorm2d(24)
            self.fc = nn.Linear(24, 10)

        def forward(self, x, y):
            h = self.trans2(self.block2(self.trans1(self.block1(self.stem(x)))))
            h = F.adaptive_avg_pool2d(F.relu(self.bn(h)), 1)
            return F.cross_entropy(self.fc(torch.flatten(h, 1)), y)

    return DenseNet()


def _torchvision(factory_name, **kwargs):
    """A torchvision classifier (random init, no weight download) + loss."""
    def build():
        torch, nn, F = _torch()
        import torchvision

        class WithLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = getattr(torchvision.models, factory_name)(
                    weights=None, num_classes=10, **kwargs)

            def forward(self, x, y):
                return F.cross_entropy(self.net(x), y)

        return WithLoss()
    return build


def build_mobile():
    torch, nn, F = _torch()

    class InvertedResidual(nn.Module):
        """MobileNetV2's block: 1x1 expansion (none when the ratio is 1, as
        torchvision's first block), 3x3 depthwise convolution (groups =
        channels), linear 1x1 projection, each with BatchNorm; the input
        added back when the shape is kept."""

        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            self.expand = None
            if expand != 1:
                self.expand = nn.Conv2d(cin, hidden, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(hidden)
            self.depthwise = nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False)
            self.bn2 = nn.BatchNorm2d(hidden)
            self.project = nn.Conv2d(hidden, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            h = x if self.expand is None else F.relu6(self.bn1(self.expand(x)))
            h = F.relu6(self.bn2(self.depthwise(h)))
            h = self.bn3(self.project(h))
            return x + h if self.residual else h

    class Mobile(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, 2, 1, bias=False)
            self.bn = nn.BatchNorm2d(16)
            self.blocks = nn.Sequential(InvertedResidual(16, 8, 1, 1),
                                        InvertedResidual(8, 24, 2, 4),
                                        InvertedResidual(24, 24, 1, 4))
            self.head = nn.Conv2d(24, 64, 1, bias=False)
            self.bn_head = nn.BatchNorm2d(64)
            self.drop = nn.Dropout(0.2)
            self.fc = nn.Linear(64, 10)

        def forward(self, x, y):
            h = self.blocks(F.relu6(self.bn(self.stem(x))))
            h = F.relu6(self.bn_head(self.head(h)))
            h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
            return F.cross_entropy(self.fc(self.drop(h)), y)

    return Mobile()


def _classifier_inputs():
    # 32x32 is enough even for squeezenet1_1, whose last pool ends at 1x1.
    return (Input("x", (BATCH, 3, 32, 32), "float32"),
            Input("y", (BATCH,), "int64", 10))


MODELS: Dict[str, Model] = {
    "mlp": Model(build_mlp, batch=32, seed=1, committed=True,
                 inputs=(Input("x", (BATCH, 64), "float32"),
                         Input("y", (BATCH,), "int64", 10)),
                 doc="Linear-ReLU-Linear + softmax cross entropy"),
    "cnn": Model(build_cnn, batch=16, seed=2, committed=True,
                 inputs=_classifier_inputs(),
                 doc="small ResNet (3 basic blocks) with BatchNorm"),
    "nmt": Model(build_nmt, batch=16, seed=3, committed=False,
                 inputs=(Input("src", (BATCH, NMT_LEN), "int64", NMT_SRC_VOCAB),
                         Input("tgt_in", (BATCH, NMT_LEN), "int64", NMT_TGT_VOCAB),
                         Input("tgt_out", (BATCH, NMT_LEN), "int64", NMT_TGT_VOCAB)),
                 sparse=("src_embed.weight", "tgt_embed.weight"),
                 doc="1+1 layer encoder-decoder transformer, full softmax"),
    "lm": Model(build_lm, batch=8, seed=4, committed=False,
                inputs=(Input("tokens", (BATCH, LM_LEN), "int64", LM_VOCAB),
                        Input("targets", (BATCH, LM_LEN), "int64", LM_VOCAB),
                        # The negative samples are shared by the whole batch:
                        # dim 0 is not the batch and stays static.
                        Input("sampled", (LM_SAMPLES,), "int64", LM_VOCAB)),
                sparse=("embed.weight", "w_out", "b_out"),
                doc="2-layer decoder LM with sampled softmax (LM1B-style)"),
    "dlrm": Model(build_dlrm, batch=128, seed=5, committed=False,
                  inputs=(Input("dense", (BATCH, DLRM_DENSE), "float32"),
                          *(Input(f"cat{i}", (BATCH,), "int64", n)
                            for i, n in enumerate(DLRM_TABLES)),
                          Input("label", (BATCH,), "float32", 2)),
                  sparse=tuple(f"tables.{i}.weight" for i in range(len(DLRM_TABLES))),
                  doc="DLRM: bottom MLP, 4 tables, dot interaction, top MLP"),
    "bag": Model(build_bag, batch=16, seed=9, committed=True,
                 inputs=(Input("item_ids", ("item_ids",), "int64", BAG_ITEMS),
                         # Offsets reach the step's id count when the
                         # last bags are empty.
                         Input("item_offsets", (BATCH,), "int64", DIM_SIZES["item_ids"] + 1),
                         Input("tag_ids", ("tag_ids",), "int64", BAG_TAGS),
                         Input("tag_offsets", (BATCH,), "int64", DIM_SIZES["tag_ids"] + 1),
                         Input("dense", (BATCH, BAG_DENSE), "float32"),
                         Input("label", (BATCH,), "float32", 2)),
                 sparse=("items.weight", "tags.weight"),
                 doc="recommender: nn.EmbeddingBag with offsets (mean, sum) + MLP"),
    "densenet": Model(build_densenet, batch=16, seed=10, committed=True,
                      inputs=_classifier_inputs(),
                      doc="DenseNet-style CNN: dense blocks (concat), BatchNorm, "
                          "padded AvgPool, reflection padding"),
    "mobile": Model(build_mobile, batch=16, seed=12, committed=True,
                    inputs=_classifier_inputs(),
                    doc="MobileNetV2-style CNN: inverted residual blocks with "
                        "depthwise convolutions, BatchNorm, ReLU6, dropout"),
    # Models we did not write: import compatibility only.
    "tv_resnet18": Model(_torchvision("resnet18"), batch=2, seed=6, committed=False,
                         inputs=_classifier_inputs(), doc="torchvision resnet18"),
    "tv_mobilenet_v2": Model(_torchvision("mobilenet_v2"), batch=2, seed=7, committed=False,
                             inputs=_classifier_inputs(), doc="torchvision mobilenet_v2"),
    "tv_squeezenet": Model(_torchvision("squeezenet1_1"), batch=2, seed=8, committed=False,
                           inputs=_classifier_inputs(), doc="torchvision squeezenet1_1"),
    # On demand only (~230 MiB): the network of SPAA'18's worked example
    # (its fully connected stack, 9216 -> 4096 -> 4096, dominates), at the
    # 224 x 224 its adaptive pool needs.
    "tv_alexnet": Model(_torchvision("alexnet"), batch=4, seed=13, committed=False, on_demand=True,
                        inputs=(Input("x", (BATCH, 3, 224, 224), "float32"),
                                Input("y", (BATCH,), "int64", 10)),
                        doc="torchvision alexnet at 224 x 224"),
    # On demand only (~420 MiB, ~15 s to export): a BERT-base-sized graph
    # for timing the strategy search.
    "bert_base": Model(build_bert_base, batch=8, seed=11, committed=False, on_demand=True,
                       inputs=(Input("tokens", (BATCH, BERT_LEN), "int64", BERT_VOCAB),
                               Input("targets", (BATCH, BERT_LEN), "int64", BERT_VOCAB)),
                       doc="BERT-base: 12-layer post-LN encoder (768 wide, 12 heads, "
                           "FFN 3072, GELU), masked-LM head tied to the embeddings, "
                           "loss at every position"),
}


# --------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------

def example_inputs(inputs: List[Input], batch: int):
    torch, _, _ = _torch()
    out = []
    for i in inputs:
        shape = i.static_shape(batch)
        if i.name.endswith("_offsets"):  # bag starts: sorted, from 0
            ids = DIM_SIZES[i.name[:-len("_offsets")] + "_ids"]
            out.append(torch.sort(torch.randint(0, ids, shape)).values.index_fill(0, torch.tensor([0]), 0))
        elif i.dtype == "int64":
            out.append(torch.randint(0, i.high, shape, dtype=torch.int64))
        elif i.high == 2:
            out.append(torch.randint(0, 2, shape).to(torch.float32))
        else:
            out.append(torch.randn(shape))
    return tuple(out)


def export(name: str, model: Model, path: Path) -> dict:
    torch, _, _ = _torch()
    torch.manual_seed(model.seed)  # parameters and example inputs
    module = model.build()
    inputs = model.inputs
    args = example_inputs(inputs, model.batch)
    module.train()
    tmp = path.with_name(path.name + ".tmp")
    try:
        _export_to(torch, module, args, inputs, tmp)
        _set_default_batch(tmp, model.batch)
        summary = verify(name, model, tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)  # never leave a half-written or unverified model
    summary["path"] = path
    return summary


def _set_default_batch(path: Path, batch: int) -> None:
    """Records the example batch size as model metadata.

    parallax-opt binds a dynamic batch dimension from --batch-size, and falls
    back to this value, so `parallax-opt examples/models/lm.onnx` works as is.
    """
    import onnx
    model = onnx.load(str(path))
    entry = model.metadata_props.add()
    entry.key, entry.value = "parallax.batch_size", str(batch)
    onnx.save(model, str(path))


def _export_to(torch, module, args, inputs, path: Path) -> None:
    with warnings.catch_warnings():
        # Expected in training mode: BatchNorm's num_batches_tracked += 1 is
        # dropped (it only matters for momentum=None, which no model uses).
        warnings.filterwarnings("ignore", message=".*num_batches_tracked.*")
        torch.onnx.export(
            module, args, str(path),
            export_params=True,
            opset_version=OPSET,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
            input_names=[i.name for i in inputs],
            output_names=["loss"],
            dynamic_axes={i.name: {d: n for d, n in enumerate(i.shape) if isinstance(n, str)}
                          for i in inputs if any(isinstance(n, str) for n in i.shape)})


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------

class ModelError(Exception):
    pass


_ONNX_DTYPES = {1: "float32", 7: "int64", 6: "int32", 9: "bool", 10: "float16", 11: "float64"}


def _dims(value_info):
    out = []
    for d in value_info.type.tensor_type.shape.dim:
        out.append(d.dim_param if d.HasField("dim_param") else
                   d.dim_value if d.HasField("dim_value") else "?")
    return tuple(out)


def _dtype(value_info):
    t = value_info.type.tensor_type.elem_type
    return _ONNX_DTYPES.get(t, f"onnx_type_{t}")


def _numel(tensor):
    n = 1
    for d in tensor.dims:
        n *= d
    return n


def _all_nodes(graph):
    """The graph's nodes and those of its subgraphs (Loop bodies, If
    branches), depth first."""
    import onnx
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from _all_nodes(sub)


def _gather_axis(node):
    for a in node.attribute:
        if a.name == "axis":
            return a.i
    return 0  # ONNX default


def verify(name: str, model: Model, path: Path) -> dict:
    """Check one exported file against `model`; raise on any problem.

    Needs only onnx (not torch).  Returns a summary dict for report().
    """
    import onnx

    if not path.exists():
        raise ModelError(f"{name}: {path} does not exist")
    onnx.checker.check_model(str(path))  # path form also handles >2 GB
    m = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    g = inferred.graph

    # Op set, default domain, and subgraphs only in Loop and If.
    ops = collections.Counter()
    for node in _all_nodes(g):
        if node.domain not in ("", "ai.onnx"):
            raise ModelError(f"{name}: node {node.name} is in domain {node.domain!r}")
        if node.op_type not in SUBGRAPH_OPS and any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in node.attribute):
            raise ModelError(f"{name}: node {node.name} has a subgraph")
        ops[node.op_type] += 1
    bad = sorted(set(ops) - ALLOWED_OPS)
    if bad:
        raise ModelError(f"{name}: ops outside the allowed set: {', '.join(bad)}")

    # Inputs: names, dtypes, "batch" only on dim 0 of batched inputs.
    inits = {t.name: t for t in g.initializer}
    graph_inputs = [i for i in g.input if i.name not in inits]
    got = [(i.name, _dims(i), _dtype(i)) for i in graph_inputs]
    want = [(i.name, tuple(i.shape), i.dtype) for i in model.inputs]
    if got != want:
        raise ModelError(f"{name}: inputs {got}, expected {want}")

    # A single scalar float output named "loss".
    outs = [(o.name, _dims(o), _dtype(o)) for o in g.output]
    if outs != [("loss", (), "float32")]:
        raise ModelError(f"{name}: outputs {outs}, expected one scalar float32 'loss'")

    # Who reads each initializer (in subgraphs too)?
    readers = collections.defaultdict(list)
    for node in _all_nodes(g):
        for k, inp in enumerate(node.input):
            if inp in inits:
                readers[inp].append((node, k))

    def gather_only(t):
        rs = readers.get(t)
        return bool(rs) and all(n.op_type == "Gather" and k == 0 and _gather_axis(n) == 0
                                for n, k in rs)

    float_inits = [t for t in g.initializer if t.data_type == onnx.TensorProto.FLOAT]
    sparse = [t.name for t in float_inits if gather_only(t.name)]
    for s in model.sparse:
        if s not in inits:
            raise ModelError(f"{name}: expected sparse variable {s} is not an initializer")
        if not gather_only(s):
            uses = [(n.op_type, k) for n, k in readers.get(s, [])]
            raise ModelError(f"{name}: {s} must be read only by Gather(axis 0, input 0); "
                             f"readers: {uses}")

    # Parameter groups.  BatchNorm running stats (inputs 3, 4) are state,
    # not trainable parameters.
    bn_stats = {t.name for t in float_inits
                if readers.get(t.name) and all(n.op_type == "BatchNormalization" and k in (3, 4)
                                               for n, k in readers[t.name])}
    groups = {"sparse": {s: _numel(inits[s]) for s in sparse}}
    groups["dense"] = sum(_numel(t) for t in float_inits
                          if t.name not in bn_stats and t.name not in sparse)
    groups["bn_stats"] = sum(_numel(inits[s]) for s in bn_stats)
    unused = [t.name for t in g.initializer if t.name not in readers]

    return {
        "name": name,
        "path": path,
        "size": path.stat().st_size,
        "inputs": got,
        "ops": ops,
        "nodes": len(g.node),
        "params": sum(_numel(t) for t in float_inits),
        "groups": groups,
        "unused": unused,
        "other_inits": [(t.name, t.data_type) for t in g.initializer
                        if t.data_type != onnx.TensorProto.FLOAT],
    }


def _fmt_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"


def report(model: Model, s: dict) -> None:
    kind = ("committed" if model.committed else
            "generated on demand" if model.on_demand else "generated")
    print(f"{s['name']}: {s['path']} ({_fmt_size(s['size'])}, {s['size']} bytes, {kind}, "
          f"default batch {model.batch}, seed {model.seed})")
    print(f"  {model.doc}")
    print("  inputs: " + "; ".join(f"{n} [{','.join(map(str, d))}] {t}"
                                   for n, d, t in s["inputs"]))
    gr = s["groups"]
    parts = [f"dense {gr['dense']:,}"]
    parts += [f"{k} {v:,} (sparse)" for k, v in gr["sparse"].items()]
    if gr["bn_stats"]:
        parts.append(f"batchnorm running stats {gr['bn_stats']:,}")
    print(f"  float initializer elements: {s['params']:,} = " + ", ".join(parts))
    print(f"  read only via Gather axis 0: {', '.join(gr['sparse']) or 'none'}")
    if s["other_inits"]:
        print(f"  non-float initializers: {s['other_inits']}")
    if s["unused"]:
        print(f"  unused initializers: {s['unused']}")
    print(f"  ops ({s['nodes']} nodes): " +
          ", ".join(f"{op} x{n}" for op, n in sorted(s["ops"].items())))
    if model.committed and s["size"] > COMMITTED_SIZE_LIMIT:
        print(f"  WARNING: committed model is larger than {_fmt_size(COMMITTED_SIZE_LIMIT)}")


# --------------------------------------------------------------------------
# Stamp
# --------------------------------------------------------------------------

def script_hash() -> str:
    return hashlib.sha256(SCRIPT.read_bytes()).hexdigest()


def read_stamp(out: Path):
    try:
        lines = (out / ".stamp").read_text().split()
    except FileNotFoundError:
        return None, set()
    return (lines[0] if lines else None), set(lines[1:])


def write_stamp(out: Path, names) -> None:
    digest, have = read_stamp(out)
    if digest != script_hash():
        have = set()  # files from another script version are not vouched for
    tmp = out / ".stamp.tmp"
    tmp.write_text("\n".join([script_hash()] + sorted(have | set(names))) + "\n")
    os.replace(tmp, out / ".stamp")


# --------------------------------------------------------------------------
# Training references (--references): PyTorch runs of 20 SGD and 20 Adam
# steps with Parallax's exact semantics, written as small golden files so
# that the tests (test/Training) compare parallax-run against them without
# torch.  docs/models.md, "Training references", describes what they encode.
# --------------------------------------------------------------------------

REFERENCE_STEPS = 20
REFERENCE_SAMPLE = 4096     # weights: every element up to this many, else a sample
REFERENCE_RUN_SEED = 0      # parallax-run --seed the references assume
GOLDEN_DIR = "golden"       # DIR/golden/<model>/


@dataclasses.dataclass(frozen=True)
class Reference:
    data: Callable          # (np.random.Generator, batch) -> {input: ndarray}
    gathers: Callable       # ({input: torch tensor}) -> {variable: ids read}
    optim: Dict[str, Dict[str, float]]  # optimizer -> {"lr": ..., "epsilon": ...}
    data_seed: int


# numpy re-implementation of include/parallax/Runtime/Random.h.  All uint64
# arithmetic wraps mod 2^64, as in C++.

def _np():
    import numpy as np
    return np


def splitmix64(x):
    """SplitMix64 of x (array or int): x + golden, then the finaliser."""
    np = _np()
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def stream_key(seed: int, stream: int, step: int) -> int:
    np = _np()
    k = splitmix64(seed) ^ np.uint64(stream)
    return int(splitmix64(splitmix64(k) ^ np.uint64(step)))


def uniform_at(key: int, counters):
    """Uniform floats in [0, 1) with 24 random bits, one per counter."""
    np = _np()
    with np.errstate(over="ignore"):
        c = np.uint64(key) + np.asarray(counters, dtype=np.uint64)
    return (splitmix64(c) >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def dropout_keep(seed: int, stream: int, step: int, n: int, ratio):
    """Parallax's dropout mask: element e (row-major) kept iff u(e) >= ratio."""
    np = _np()
    key = stream_key(seed, stream, step)
    return uniform_at(key, np.arange(n, dtype=np.uint64)) >= np.float32(ratio)


def check_random() -> None:
    """Our splitmix64(x) is the standard SplitMix64 generator's output for
    state x: with state 1234567 its first three outputs are these."""
    np = _np()
    golden = 0x9E3779B97F4A7C15
    states = [(1234567 + i * golden) % 2**64 for i in range(3)]
    got = [int(v) for v in splitmix64(np.array(states, dtype=np.uint64))]
    want = [6457827717110365317, 3203168211198807973, 9817491932198370423]
    if got != want:
        raise ModelError(f"numpy splitmix64 gives {got}, expected {want}")


def _zipf_ids(np, rng, n: int, size, perm):
    """Ids from Zipf(s = 1) over n ranks (P(k) ~ 1/(k+1)), as parallax-run's
    --synthetic draws them, then mapped through a fixed permutation so the
    hot rows are spread over the table."""
    cdf = np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64))
    u = rng.random(size) * cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, u, side="left"), n - 1)
    return perm[ranks].astype(np.int64)


def _classifier_data(features):
    def data(rng, batch):
        np = _np()
        n = REFERENCE_STEPS * batch
        protos = rng.standard_normal((10,) + features).astype(np.float32)
        y = rng.integers(0, 10, n).astype(np.int64)
        # Noise plus a class prototype: learnable, so the loss falls.
        x = rng.standard_normal((n,) + features).astype(np.float32) + 0.5 * protos[y]
        return {"x": x.astype(np.float32), "y": y}
    return data


def _nmt_data(rng, batch):
    np = _np()
    n = REFERENCE_STEPS * batch
    perm = rng.permutation(NMT_SRC_VOCAB)
    src = _zipf_ids(np, rng, NMT_SRC_VOCAB, (n, NMT_LEN), perm)
    tgt = src[:, ::-1]                       # the task: reverse the sentence
    tgt_in = np.concatenate([np.full((n, 1), 1, np.int64), tgt[:, :-1]], axis=1)
    return {"src": src, "tgt_in": np.ascontiguousarray(tgt_in),
            "tgt_out": np.ascontiguousarray(tgt)}


def _lm_data(rng, batch):
    np = _np()
    n = REFERENCE_STEPS * batch
    perm = rng.permutation(LM_VOCAB)
    seq = _zipf_ids(np, rng, LM_VOCAB, (n, LM_LEN + 1), perm)
    # Sampled-softmax candidates from the same unigram distribution (as a
    # log-uniform candidate sampler would): they repeat, and they overlap the
    # targets, so w_out / b_out rows are gathered several times per step.
    sampled = _zipf_ids(np, rng, LM_VOCAB, (REFERENCE_STEPS, LM_SAMPLES), perm)
    return {"tokens": np.ascontiguousarray(seq[:, :-1]),
            "targets": np.ascontiguousarray(seq[:, 1:]), "sampled": sampled}


def _dlrm_data(rng, batch):
    np = _np()
    n = REFERENCE_STEPS * batch
    dense = rng.standard_normal((n, DLRM_DENSE)).astype(np.float32)
    out = {"dense": dense}
    score = dense @ rng.standard_normal(DLRM_DENSE).astype(np.float32) * 0.5
    for i, rows in enumerate(DLRM_TABLES):
        ids = _zipf_ids(np, rng, rows, n, rng.permutation(rows))
        out[f"cat{i}"] = ids
        score = score + np.where(ids % 2 == 0, 0.5, -0.5)
    out["label"] = (score + 0.5 * rng.standard_normal(n) > 0).astype(np.float32)
    return out


def _bags(np, rng, ids_per_step: int, batch: int):
    """Offsets of `batch` bags over `ids_per_step` ids, per step, as one
    [steps * batch] array: random bag sizes (some bags empty), each step's
    offsets counting from that step's first id."""
    n = REFERENCE_STEPS * batch
    sizes = rng.multinomial(ids_per_step, np.full(batch, 1.0 / batch), size=REFERENCE_STEPS)
    starts = np.concatenate([np.zeros((REFERENCE_STEPS, 1), np.int64),
                             np.cumsum(sizes, axis=1)[:, :-1]], axis=1)
    return starts.reshape(n).astype(np.int64), sizes


def _bag_data(rng, batch):
    np = _np()
    n = REFERENCE_STEPS * batch
    out = {}
    score = np.zeros(n, np.float64)
    for kind, rows in (("item", BAG_ITEMS), ("tag", BAG_TAGS)):
        per_step = DIM_SIZES[f"{kind}_ids"]
        ids = _zipf_ids(np, rng, rows, (REFERENCE_STEPS, per_step), rng.permutation(rows))
        offsets, sizes = _bags(np, rng, per_step, batch)
        out[f"{kind}_ids"], out[f"{kind}_offsets"] = ids, offsets
        # The label depends on the parity of the ids in each bag.
        for t in range(REFERENCE_STEPS):
            bounds = np.concatenate([[0], np.cumsum(sizes[t])])
            for b in range(batch):
                bag = ids[t, bounds[b]:bounds[b + 1]]
                score[t * batch + b] += np.mean(np.where(bag % 2 == 0, 0.5, -0.5)) if len(bag) else 0
    dense = rng.standard_normal((n, BAG_DENSE)).astype(np.float32)
    score += dense @ rng.standard_normal(BAG_DENSE) * 0.3
    out["dense"] = dense
    out["label"] = (score + 0.3 * rng.standard_normal(n) > 0).astype(np.float32)
    return out


def _reference_gathers(table):
    def gathers(inputs):
        torch, _, _ = _torch()
        out = {}
        for var, names in table.items():
            out[var] = torch.cat([inputs[n].reshape(-1) for n in names])
        return out
    return gathers


# Learning rates (and Adam's epsilon) are chosen so that 20 steps train
# visibly while rounding alone moves no result by more than about 1e-5
# (--noise-check; the tests allow 1e-4): cnn's ReLUs after BatchNorm and
# nmt's saturated attention amplify one-ulp differences at larger steps, and
# an attention key bias has an exactly zero gradient (softmax is shift
# invariant), so its float32 gradient is pure rounding noise (~1e-10) that
# Adam with eps 1e-8 would turn into steps of up to lr/10; eps 1e-6 makes
# those 100 times smaller.
REFERENCES: Dict[str, Reference] = {
    "mlp": Reference(_classifier_data((64,)), _reference_gathers({}),
                     optim={"sgd": {"lr": 0.1}, "adam": {"lr": 0.001}}, data_seed=101),
    "cnn": Reference(_classifier_data((3, 32, 32)), _reference_gathers({}),
                     optim={"sgd": {"lr": 0.003}, "adam": {"lr": 1e-5}}, data_seed=102),
    "nmt": Reference(_nmt_data, _reference_gathers({"src_embed.weight": ["src"],
                                                    "tgt_embed.weight": ["tgt_in"]}),
                     optim={"sgd": {"lr": 0.02}, "adam": {"lr": 1e-4, "epsilon": 1e-6}},
                     data_seed=103),
    "lm": Reference(_lm_data, _reference_gathers({"embed.weight": ["tokens"],
                                                  "w_out": ["targets", "sampled"],
                                                  "b_out": ["targets", "sampled"]}),
                    optim={"sgd": {"lr": 0.1}, "adam": {"lr": 3e-4, "epsilon": 1e-6}},
                    data_seed=104),
    "bag": Reference(_bag_data, _reference_gathers({"items.weight": ["item_ids"],
                                                    "tags.weight": ["tag_ids"]}),
                     optim={"sgd": {"lr": 0.1}, "adam": {"lr": 0.001}}, data_seed=106),
    "densenet": Reference(_classifier_data((3, 32, 32)), _reference_gathers({}),
                          optim={"sgd": {"lr": 0.003}, "adam": {"lr": 3e-5}}, data_seed=107),
    "dlrm": Reference(_dlrm_data, _reference_gathers(
                          {f"tables.{i}.weight": [f"cat{i}"] for i in range(len(DLRM_TABLES))}),
                      optim={"sgd": {"lr": 0.1}, "adam": {"lr": 0.001}}, data_seed=105),
}
REFERENCE_OPTIMIZERS = ("sgd", "adam")


def compile_flags(name: str, optimizer: str):
    """The parallax-opt flags (after --emit=plan) a reference was made for."""
    return [f"--optimizer={optimizer}"] + [
        f"--{k}={v:g}" for k, v in REFERENCES[name].optim[optimizer].items()]


def _graph_facts(path: Path) -> dict:
    """What the reference needs from the exported file: initial values,
    trainable variables (in file order), sparse candidates, Dropout nodes."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(path))
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    readers = collections.defaultdict(list)
    for node in _all_nodes(g):
        for k, inp in enumerate(node.input):
            if inp in inits:
                readers[inp].append((node, k))
    floats = [t.name for t in g.initializer if t.data_type == onnx.TensorProto.FLOAT]
    bn_stats = {n for n in floats if readers.get(n) and all(
        r.op_type == "BatchNormalization" and k in (3, 4) for r, k in readers[n])}
    sparse = {n for n in floats if readers.get(n) and all(
        r.op_type == "Gather" and k == 0 and _gather_axis(r) == 0 for r, k in readers[n])}
    constants = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    dropouts = []
    for node in g.node:
        if node.op_type != "Dropout":
            continue
        ratio = 0.5
        if len(node.input) > 1 and node.input[1]:
            c = constants.get(node.input[1])
            if c is None:
                raise ModelError(f"{path}: Dropout {node.name}: ratio is not a Constant")
            ratio = float(numpy_helper.to_array(c.attribute[0].t))
        seed = next((a.i for a in node.attribute if a.name == "seed"), 0)
        dropouts.append((node.name, ratio, seed))
    return {
        "values": {n: numpy_helper.to_array(inits[n]) for n in inits},
        "trainable": [n for n in floats if n not in bn_stats and n in readers],
        "sparse": sparse,
        "dropouts": dropouts,
    }


def _reference_dropout(torch, nn, ctx):
    class ParallaxDropout(nn.Module):
        """Dropout with Parallax's counter-based masks (see dropout_keep)."""

        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            np = _np()
            k = len(ctx["ratios"])
            if k >= len(ctx["dropouts"]):
                raise ModelError("the module runs more dropouts than the graph has")
            _, ratio, attr_seed = ctx["dropouts"][k]
            ctx["ratios"].append(self.p)
            ratio32 = np.float32(ratio)
            keep = dropout_keep(REFERENCE_RUN_SEED ^ attr_seed, k, ctx["step"],
                                x.numel(), ratio32)
            mask = torch.from_numpy(keep.reshape(tuple(x.shape)))
            scale = torch.tensor(1.0 - ratio32, dtype=x.dtype)  # float32(1 - ratio)
            return torch.where(mask, x / scale, torch.zeros((), dtype=x.dtype))

    return ParallaxDropout


def train_reference(name: str, model: Model, path: Path, data, optimizer: str,
                    facts=None, dtype=None, perturb=None) -> dict:
    """PyTorch training of `name` for REFERENCE_STEPS steps on `data`.

    Returns losses, final trainable values and the rows each sparse variable
    gathered.  `dtype` (default float32) and `perturb` (a seed: every initial
    trainable value is scaled by 1 + k * 2^-23, k random in {-1, 0, 1}) are
    for --noise-check, which measures how much rounding alone moves the
    results.
    """
    torch, nn, F = _torch()
    np = _np()
    ref = REFERENCES[name]
    facts = facts or _graph_facts(path)
    dtype = dtype or torch.float32
    hyper = ref.optim[optimizer]
    lr = hyper["lr"]
    eps = hyper.get("epsilon", 1e-8)

    torch.manual_seed(model.seed)
    module = model.build()
    # Initial values: the exported file's initializers (the export may have
    # run the module, so its in-memory state is not trusted).
    state = module.state_dict()
    params = dict(module.named_parameters())
    missing = [k for k in state if k not in facts["values"] and
               not k.endswith("num_batches_tracked")]
    if missing or set(params) != set(facts["trainable"]):
        raise ModelError(f"{name}: module parameters {sorted(params)} and the file's "
                         f"trainable initializers {facts['trainable']} differ "
                         f"(state without initializer: {missing})")
    with torch.no_grad():
        for k, v in state.items():
            if k in facts["values"]:
                v.copy_(torch.from_numpy(facts["values"][k].copy()))
    module = module.to(dtype)
    module.train()
    if perturb is not None:
        rng = np.random.default_rng([model.seed, perturb])
        with torch.no_grad():
            for n in facts["trainable"]:
                k = rng.integers(-1, 2, tuple(params[n].shape)).astype(np.float64)
                params[n].mul_(torch.from_numpy(1 + k * 2.0 ** -23).to(dtype))

    ctx = {"dropouts": facts["dropouts"], "ratios": [], "step": 0}
    Dropout = _reference_dropout(torch, nn, ctx)
    for parent in list(module.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(parent, child_name, Dropout(child.p))

    sparse = [n for n in facts["trainable"] if n in facts["sparse"]]
    dense = [n for n in facts["trainable"] if n not in facts["sparse"]]
    if optimizer == "sgd":
        opts = [torch.optim.SGD([params[n] for n in facts["trainable"]], lr=lr)]
    elif optimizer == "adam":
        opts = [torch.optim.Adam([params[n] for n in dense], lr=lr, eps=eps, foreach=False)]
        if sparse:
            opts.append(torch.optim.SparseAdam([params[n] for n in sparse], lr=lr, eps=eps))
    else:
        raise ModelError(f"unknown optimizer {optimizer}")

    losses, touched = [], collections.defaultdict(list)
    for t in range(1, REFERENCE_STEPS + 1):
        batch = {}
        for i in model.inputs:
            a = data[i.name]
            a = a[(t - 1) * model.batch:t * model.batch] if i.batched else a[t - 1]
            x = torch.from_numpy(np.ascontiguousarray(a))
            batch[i.name] = x.to(dtype) if x.is_floating_point() else x
        gathered = ref.gathers(batch)
        if set(gathered) != set(sparse):
            raise ModelError(f"{name}: reference gathers {sorted(gathered)}, the graph's "
                             f"sparse variables are {sparse}")
        ctx["step"], ctx["ratios"] = t, []
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss = module(*(batch[i.name] for i in model.inputs))
        if len(ctx["ratios"]) != len(facts["dropouts"]) or any(
                abs(r - d[1]) > 1e-6 for r, d in zip(ctx["ratios"], facts["dropouts"])):
            raise ModelError(f"{name}: the module's dropouts {ctx['ratios']} do not match "
                             f"the graph's {[d[1] for d in facts['dropouts']]}")
        loss.backward()
        for n in sparse:
            rows = torch.unique(gathered[n])
            touched[n].append(gathered[n].numpy())
            g = params[n].grad
            outside = torch.ones(g.shape[0], dtype=torch.bool)
            outside[rows] = False
            if bool(g[outside].ne(0).any()):
                raise ModelError(f"{name}: {n} has gradient outside its gathered rows")
            if optimizer == "adam":
                # Lazy (SparseAdam) update of exactly the gathered rows, even
                # those whose gradient happens to be zero.
                params[n].grad = torch.sparse_coo_tensor(
                    rows.unsqueeze(0), g[rows], g.shape).coalesce()
        for o in opts:
            o.step()
        losses.append(float(loss.detach().to(torch.float32)))
        if not math.isfinite(losses[-1]):
            raise ModelError(f"{name} {optimizer}: loss {losses[-1]} at step {t}")

    return {
        "losses": losses,
        "weights": {n: params[n].detach().to(torch.float32).numpy().copy()
                    for n in facts["trainable"]},
        # Per sparse variable: (rows gathered in any step, the most gathered row).
        "touched": {n: (np.unique(ids), int(np.bincount(ids).argmax()))
                    for n, ids in ((n, np.concatenate(v)) for n, v in touched.items())},
    }


def weight_positions(name: str, var_index: int, shape, touched_rows):
    """Flat positions of a variable that a golden records: all of them up to
    REFERENCE_SAMPLE elements, else a fixed sample; for a sparse variable
    half from rows the steps touched (the hottest row whole) and half from
    rows they did not."""
    np = _np()
    numel = int(np.prod(shape)) if len(shape) else 1
    if numel <= REFERENCE_SAMPLE:
        return np.arange(numel, dtype=np.int64)
    rng = np.random.default_rng([MODELS[name].seed, 1000 + var_index])
    if touched_rows is None:
        return np.sort(rng.choice(numel, REFERENCE_SAMPLE, replace=False)).astype(np.int64)
    rows, hot = touched_rows
    row_len = numel // shape[0]
    untouched = (shape[0] - len(rows)) * row_len
    want_touched = REFERENCE_SAMPLE - min(REFERENCE_SAMPLE // 2, untouched)
    picked = set(range(hot * row_len, (hot + 1) * row_len))
    while len(picked) < want_touched:
        r = rows[rng.integers(0, len(rows), want_touched)]
        c = rng.integers(0, row_len, want_touched)
        for p in (r * row_len + c).tolist():
            if len(picked) < want_touched:
                picked.add(p)
    is_touched = np.zeros(shape[0], dtype=bool)
    is_touched[rows] = True
    while len(picked) < REFERENCE_SAMPLE:
        p = rng.integers(0, numel, REFERENCE_SAMPLE)
        for q in p[~is_touched[p // row_len]].tolist():
            if len(picked) < REFERENCE_SAMPLE:
                picked.add(q)
    return np.array(sorted(picked), dtype=np.int64)


def _f32_list(a):
    """float32 values as the shortest decimals that read back exactly."""
    np = _np()
    return [float(str(v)) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def make_reference(name: str, out: Path) -> dict:
    """Writes out/golden/<name>/ (data and one JSON per optimizer)."""
    import json
    import shutil
    np = _np()
    torch, _, _ = _torch()
    model, ref = MODELS[name], REFERENCES[name]
    path = out / f"{name}.onnx"
    check_random()
    data = ref.data(np.random.default_rng(ref.data_seed), model.batch)
    for i in model.inputs:
        want = ((REFERENCE_STEPS * model.batch,) if i.batched else (REFERENCE_STEPS,)) + \
            i.static_shape(model.batch)[1 if i.batched else 0:]
        a = data[i.name]
        if a.shape != want or a.dtype != np.dtype(i.dtype):
            raise ModelError(f"{name}: reference data {i.name} is {a.dtype}{list(a.shape)}, "
                             f"expected {i.dtype}{list(want)}")
        if i.dtype == "int64" and (a.min() < 0 or a.max() >= i.high):
            raise ModelError(f"{name}: reference data {i.name} is out of [0, {i.high})")
    facts = _graph_facts(path)

    final = out / GOLDEN_DIR / name
    tmp = out / GOLDEN_DIR / f"{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "data").mkdir(parents=True)
    summary = {}
    try:
        for i in model.inputs:
            np.save(tmp / "data" / f"{i.name}.npy", data[i.name])
        threads = torch.get_num_threads()
        deterministic = torch.are_deterministic_algorithms_enabled()
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        try:
            for opt in REFERENCE_OPTIMIZERS:
                result = train_reference(name, model, path, data, opt, facts)
                weights = {}
                for k, n in enumerate(facts["trainable"]):
                    w = result["weights"][n]
                    pos = weight_positions(name, k, w.shape, result["touched"].get(n))
                    weights[n] = {"shape": list(w.shape), "positions": pos.tolist(),
                                  "values": _f32_list(w.reshape(-1)[pos])}
                golden = {"model": name, "optimizer": opt,
                          "compile": compile_flags(name, opt),
                          "steps": REFERENCE_STEPS,
                          "run": ["--steps", str(REFERENCE_STEPS),
                                  "--seed", str(REFERENCE_RUN_SEED)],
                          "losses": _f32_list(result["losses"]),
                          "weights": weights}
                (tmp / f"{opt}.json").write_text(json.dumps(golden, separators=(",", ":")) + "\n")
                summary[opt] = result["losses"]
        finally:
            torch.set_num_threads(threads)
            torch.use_deterministic_algorithms(deterministic)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def noise_check(name: str, out: Path, perturbed_runs: int = 2) -> List[str]:
    """How far rounding alone moves a reference: the float32 reference
    against a float64 run and against float32 runs from initial values
    perturbed by one ulp.  A correct float32 implementation (parallax-run)
    differs from the reference by about this much, so it has to stay well
    below the tests' tolerance (1e-4)."""
    torch, _, _ = _torch()
    np = _np()
    model, ref = MODELS[name], REFERENCES[name]
    data = ref.data(np.random.default_rng(ref.data_seed), model.batch)
    facts = _graph_facts(out / f"{name}.onnx")
    lines = []
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for opt in REFERENCE_OPTIMIZERS:
        base = train_reference(name, model, None, data, opt, facts)
        others = [("float64", train_reference(name, model, None, data, opt, facts,
                                               dtype=torch.float64))]
        others += [(f"perturbed {k}", train_reference(name, model, None, data, opt, facts,
                                                      perturb=k))
                   for k in range(1, perturbed_runs + 1)]
        la = np.array(base["losses"], dtype=np.float64)
        loss_dev = max(float(np.max(np.abs(la - o["losses"]) / np.abs(la))) for _, o in others)
        worst = (0.0, "", "")
        moved = {}
        for n in facts["trainable"]:
            b = base["weights"][n].astype(np.float64)
            moved[n] = float(np.max(np.abs(b - facts["values"][n]) / np.maximum(1, np.abs(b))))
            for label, o in others:
                e = float(np.max(np.abs(o["weights"][n] - b) / np.maximum(1, np.abs(b))))
                worst = max(worst, (e, n, label))
        lines.append(f"{name} {' '.join(compile_flags(name, opt))}: loss {la[0]:.4f} -> {la[-1]:.4f}; "
                     f"rounding moves losses by {loss_dev:.1e} (relative), weights by "
                     f"{worst[0]:.1e} ({worst[1]}, {worst[2]}); the steps move weights by "
                     f"up to {max(moved.values()):.1e}")
    return lines


def golden_complete(out: Path, name: str) -> bool:
    d = out / GOLDEN_DIR / name
    return all((d / f"{o}.json").exists() for o in REFERENCE_OPTIMIZERS) and all(
        (d / "data" / f"{i.name}.npy").exists() for i in MODELS[name].inputs)


# --------------------------------------------------------------------------
# Recurrent models: torch.nn.LSTM and nn.GRU as they come (ONNX LSTM / GRU,
# one node per layer; batch_first inserts Transposes).
# --------------------------------------------------------------------------

ALLOWED_OPS = ALLOWED_OPS | {"LSTM", "GRU"}
RNN_LM_VOCAB, RNN_LM_LEN = 256, 16
GRU_STEPS, GRU_FEATURES = 12, 8


def build_lstm_lm():
    torch, nn, F = _torch()
    V = RNN_LM_VOCAB

    class LSTMLM(nn.Module):
        """Embedding -> 2-layer LSTM -> Linear -> next-token cross entropy."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, 32)
            self.lstm = nn.LSTM(32, 64, num_layers=2, batch_first=True)
            self.out = nn.Linear(64, V)

        def forward(self, tokens, targets):
            h, _ = self.lstm(self.embed(tokens))             # [B, T, 64]
            logits = self.out(h)                             # [B, T, V]
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    return LSTMLM()


def build_gru_classifier():
    torch, nn, F = _torch()

    class GRUClassifier(nn.Module):
        """Bidirectional GRU over feature sequences; the two final states
        -> Linear -> cross entropy."""

        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(GRU_FEATURES, 32, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(64, 10)

        def forward(self, x, y):
            _, h = self.gru(x)                               # h: [2, B, 32]
            return F.cross_entropy(self.fc(torch.cat([h[0], h[1]], dim=1)), y)

    return GRUClassifier()


def _rnn_lm_data(rng, batch):
    """Token sequences of a sparse Markov chain: each token is followed by
    one of its two successors, or with probability 0.2 by a random token;
    successors and random tokens are Zipf-distributed, as words are. The
    unigram and bigram statistics are learnable, so the loss falls."""
    np = _np()
    n = REFERENCE_STEPS * batch
    perm = rng.permutation(RNN_LM_VOCAB)
    succ = _zipf_ids(np, rng, RNN_LM_VOCAB, (RNN_LM_VOCAB, 2), perm)
    seq = np.empty((n, RNN_LM_LEN + 1), dtype=np.int64)
    seq[:, 0] = _zipf_ids(np, rng, RNN_LM_VOCAB, n, perm)
    for k in range(1, RNN_LM_LEN + 1):
        follow = succ[seq[:, k - 1], rng.integers(0, 2, n)]
        jump = _zipf_ids(np, rng, RNN_LM_VOCAB, n, perm)
        seq[:, k] = np.where(rng.random(n) < 0.8, follow, jump)
    return {"tokens": np.ascontiguousarray(seq[:, :-1]),
            "targets": np.ascontiguousarray(seq[:, 1:])}


MODELS["lstm_lm"] = Model(
    build_lstm_lm, batch=16, seed=9, committed=False,
    inputs=(Input("tokens", (BATCH, RNN_LM_LEN), "int64", RNN_LM_VOCAB),
            Input("targets", (BATCH, RNN_LM_LEN), "int64", RNN_LM_VOCAB)),
    sparse=("embed.weight",),
    doc="embedding, 2-layer nn.LSTM (batch_first), Linear, cross entropy")
MODELS["gru_classifier"] = Model(
    build_gru_classifier, batch=16, seed=10, committed=False,
    inputs=(Input("x", (BATCH, GRU_STEPS, GRU_FEATURES), "float32"),
            Input("y", (BATCH,), "int64", 10)),
    doc="bidirectional nn.GRU over [T, 8] features, final states, Linear, cross entropy")
# lstm_lm's Adam uses epsilon 1e-6 for the reason nmt's and lm's do: rows of
# the output layer for words a step never sees get gradients of pure
# rounding noise, which epsilon 1e-8 would turn into steps of up to lr.
REFERENCES["lstm_lm"] = Reference(
    _rnn_lm_data, _reference_gathers({"embed.weight": ["tokens"]}),
    optim={"sgd": {"lr": 1.0}, "adam": {"lr": 0.003, "epsilon": 1e-6}}, data_seed=106)
REFERENCES["gru_classifier"] = Reference(
    _classifier_data((GRU_STEPS, GRU_FEATURES)), _reference_gathers({}),
    optim={"sgd": {"lr": 0.1}, "adam": {"lr": 0.001}}, data_seed=107)


# --------------------------------------------------------------------------

def _reference_line(name: str, out: Path, losses: dict) -> str:
    parts = [f"{opt} ({' '.join(compile_flags(name, opt)[1:])}) loss {v[0]:.4f} -> {v[-1]:.4f}"
             for opt, v in losses.items()]
    return f"{name}: training reference {out / GOLDEN_DIR / name}: " + "; ".join(parts)


def default_names(references: bool = False) -> List[str]:
    """The models a run without NAME covers: those with a training reference
    for --references and --noise-check, else every model that is not
    on demand."""
    return [n for n in MODELS if (n in REFERENCES if references else not MODELS[n].on_demand)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    on_demand = [n for n in MODELS if MODELS[n].on_demand]
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"models to build (default: {', '.join(default_names())}; "
                         f"only when named: {', '.join(on_demand) or 'none'})")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="verify existing files only; do not export")
    mode.add_argument("--if-stale", action="store_true",
                      help="export only if DIR/.stamp is stale or a file is missing; "
                           "likewise for the training references")
    mode.add_argument("--references", action="store_true",
                      help=f"(re)write the training references DIR/{GOLDEN_DIR}/NAME "
                           f"(default: {', '.join(REFERENCES)}), exporting stale models first")
    mode.add_argument("--noise-check", action="store_true",
                      help="measure how much rounding alone moves the references "
                           "(slow; writes nothing)")
    args = ap.parse_args(argv)

    if (args.references or args.noise_check) and args.names:
        none = [n for n in args.names if n not in REFERENCES]
        if none:
            ap.error(f"no training reference for {', '.join(none)}; "
                     f"references exist for {', '.join(REFERENCES)}")
    names = args.names or default_names(args.references or args.noise_check)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(MODELS)}")
    paths = {n: args.out / f"{n}.onnx" for n in names}
    references = [n for n in names if n in REFERENCES]

    if args.check:
        failed = 0
        for n in names:
            try:
                report(MODELS[n], verify(n, MODELS[n], paths[n]))
            except Exception as e:  # report every model, then fail
                print(f"{n}: FAILED: {e}", file=sys.stderr)
                failed += 1
        return 1 if failed else 0

    if args.noise_check:
        check_random()
        for n in names:
            if not paths[n].exists():
                ap.error(f"{paths[n]} does not exist; export it first")
            for line in noise_check(n, args.out):
                print(line)
                sys.stdout.flush()
        return 0

    digest, have = read_stamp(args.out)
    current = digest == script_hash()
    models_current = (current and set(names) <= have
                      and all(p.exists() for p in paths.values()))
    if args.if_stale or args.references:
        if models_current:
            print("models up to date")
        if args.if_stale:
            references = [n for n in references if not (
                current and f"{GOLDEN_DIR}/{n}" in have and golden_complete(args.out, n))]
            if models_current and not references:
                print("training references up to date")
                return 0

    torch, _, _ = _torch()
    torch.set_num_threads(min(4, os.cpu_count() or 1))
    args.out.mkdir(parents=True, exist_ok=True)
    if not models_current or not (args.if_stale or args.references):
        for n in names:
            report(MODELS[n], export(n, MODELS[n], paths[n]))
            sys.stdout.flush()
        write_stamp(args.out, names)
    if args.if_stale or args.references:
        for n in references:
            print(_reference_line(n, args.out, make_reference(n, args.out)))
            sys.stdout.flush()
            write_stamp(args.out, [f"{GOLDEN_DIR}/{n}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
