"""edge-char-ctc: a small conformer CTC acoustic model over parakeet-128 features.

Signature (NeMo/sherpa-onnx CTC): forward(audio_signal f32 [B, 128, T],
length i64 [B]) -> (logprobs f32 [B, T', V] log-softmaxed, encoded_lengths
i64 [B]), T' = (T - 1) // 2 + 1, encoded_lengths = (length - 1) // 2 + 1
(0 stays 0). One output frame per 20 ms of audio (input hop 10 ms, stride 2).

Architecture: Conv1d subsampling (128 -> d, kernel 5, stride 2; GELU; Conv1d
d -> d, kernel 3), a depthwise convolutional position embedding, then `layers`
macaron conformer blocks (half-step FFN, multi-head self-attention with a key
padding mask, GLU + depthwise conv module, half-step FFN, LayerNorm), and a
linear layer to the V = 29 symbols. LayerNorm everywhere (no BatchNorm), so a
padded batch and a single clip give the same outputs on the valid frames.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def valid_mask(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """[B, T] bool: frame index < length."""
    return torch.arange(t, device=lengths.device)[None, :] < lengths[:, None]


class FFN(nn.Module):
    def __init__(self, d, ff, p):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.l1 = nn.Linear(d, ff)
        self.l2 = nn.Linear(ff, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.l2(self.drop(F.silu(self.l1(self.norm(x))))))


class MHSA(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.heads = heads
        self.dk = d // heads
        self.scale = 1.0 / math.sqrt(d // heads)
        self.drop = nn.Dropout(p)

    def forward(self, x, mask):
        b, t = x.shape[0], x.shape[1]
        qkv = self.qkv(self.norm(x)).view(b, t, 3 * self.heads, self.dk).transpose(1, 2)
        q, k, v = qkv.chunk(3, dim=1)  # each [B, H, T, dk]
        scores = torch.matmul(q, k.transpose(-1, -2)).float() * self.scale
        scores = scores.masked_fill(~mask[:, None, None, :], -1e9)
        att = self.drop(scores.softmax(-1).to(v.dtype))
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, -1)
        return self.drop(self.out(y))


class ConvModule(nn.Module):
    def __init__(self, d, kernel, p):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pw1 = nn.Linear(d, 2 * d)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.norm2 = nn.LayerNorm(d)
        self.pw2 = nn.Linear(d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x, mask):
        y = F.glu(self.pw1(self.norm(x)), dim=-1)
        y = y.masked_fill(~mask[:, :, None], 0.0)
        y = self.dw(y.transpose(1, 2)).transpose(1, 2)
        y = self.pw2(F.silu(self.norm2(y)))
        return self.drop(y)


class Block(nn.Module):
    def __init__(self, d, ff, heads, kernel, p):
        super().__init__()
        self.ff1 = FFN(d, ff, p)
        self.att = MHSA(d, heads, p)
        self.conv = ConvModule(d, kernel, p)
        self.ff2 = FFN(d, ff, p)
        self.norm = nn.LayerNorm(d)

    def forward(self, x, mask):
        x = x + 0.5 * self.ff1(x)
        x = x + self.att(x, mask)
        x = x + self.conv(x, mask)
        x = x + 0.5 * self.ff2(x)
        return self.norm(x)


class CharCTC(nn.Module):
    def __init__(self, n_mels=128, vocab=29, d=176, ff=704, heads=4, layers=4, kernel=15, dropout=0.1):
        super().__init__()
        self.sub1 = nn.Conv1d(n_mels, d, 5, stride=2, padding=2)
        self.sub2 = nn.Conv1d(d, d, 3, padding=1)
        self.pos = nn.Conv1d(d, d, 31, padding=15, groups=d)
        self.blocks = nn.ModuleList(Block(d, ff, heads, kernel, dropout) for _ in range(layers))
        self.head = nn.Linear(d, vocab)
        self.drop = nn.Dropout(dropout)

    @staticmethod
    def output_lengths(length: torch.Tensor) -> torch.Tensor:
        return torch.where(length > 0, torch.div(length - 1, 2, rounding_mode="floor") + 1,
                           torch.zeros_like(length))

    def forward(self, audio_signal: torch.Tensor, length: torch.Tensor):
        """Log-probs f32 [B, T', V] and encoded lengths i64 [B]; see module doc."""
        in_mask = valid_mask(length, audio_signal.shape[2])
        x = audio_signal.masked_fill(~in_mask[:, None, :], 0.0)
        enc_len = self.output_lengths(length)
        x = F.gelu(self.sub1(x))
        mask = valid_mask(enc_len, x.shape[2])
        x = x.masked_fill(~mask[:, None, :], 0.0)
        x = F.gelu(self.sub2(x))
        x = x.masked_fill(~mask[:, None, :], 0.0)
        x = x + self.pos(x)
        x = self.drop(x.transpose(1, 2))  # [B, T', d]
        for blk in self.blocks:
            x = blk(x, mask)
        logits = self.head(x).float()
        return logits.log_softmax(-1), enc_len


def count_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def load_onnx_weights(net: CharCTC, path: str) -> CharCTC:
    """Fill net with the weights of its own ONNX export (export_onnx in
    train.py), so tools can run the committed model.onnx in torch where ONNX
    Runtime is not installed. Named initializers map by name; the TorchScript
    exporter stores each Linear weight transposed as an anonymous MatMul
    initializer, and may merge equal-valued initializers under one name, so
    Linear weights and LayerNorm parameters are matched to the layers in graph
    order (checked by shape). Raises ValueError when anything is left unmatched."""
    import onnx
    from onnx import numpy_helper

    g = onnx.load(path).graph
    init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    # merged initializers are re-exposed through Identity nodes
    for _ in range(len(g.node)):
        added = False
        for n in g.node:
            if n.op_type == "Identity" and n.input[0] in init and n.output[0] not in init:
                init[n.output[0]] = init[n.input[0]]
                added = True
        if not added:
            break
    sd = net.state_dict()
    new = {}
    for k in sd:
        if k in init:
            new[k] = torch.from_numpy(init[k].copy())
    # LayerNorm parameters by graph order too: the exporter merges initializers
    # of equal value (e.g. the ones/zeros of an untrained model) under one name.
    norms = [n for n, m in net.named_modules() if isinstance(m, nn.LayerNorm)]
    ln_nodes = [n for n in g.node if n.op_type == "LayerNormalization"]
    if len(ln_nodes) != len(norms):
        raise ValueError(f"{path}: {len(ln_nodes)} LayerNormalization nodes for {len(norms)} LayerNorm layers")
    for name, node in zip(norms, ln_nodes):
        new[name + ".weight"] = torch.from_numpy(init[node.input[1]].copy())
        new[name + ".bias"] = torch.from_numpy(init[node.input[2]].copy())
    linears = [n for n, m in net.named_modules() if isinstance(m, nn.Linear)]
    matmuls = [n.input[1] for n in g.node if n.op_type == "MatMul" and n.input[1] in init and n.input[1] not in sd]
    if len(matmuls) != len(linears):
        raise ValueError(f"{path}: {len(matmuls)} MatMul weights for {len(linears)} Linear layers")
    for name, w in zip(linears, matmuls):
        t = torch.from_numpy(init[w].T.copy())
        if t.shape != sd[name + ".weight"].shape:
            raise ValueError(f"{path}: {w} has shape {tuple(init[w].shape)}, {name}.weight wants the transpose of {tuple(sd[name + '.weight'].shape)}")
        new[name + ".weight"] = t
    missing = [k for k in sd if k not in new]
    if missing:
        raise ValueError(f"{path}: no weights for {missing}")
    net.load_state_dict(new)
    return net


def load_model(path: str) -> CharCTC:
    """CharCTC in eval mode from a state dict (.pt, written by train.py) or
    from its ONNX export (.onnx)."""
    net = CharCTC()
    if path.endswith(".onnx"):
        load_onnx_weights(net, path)
    else:
        net.load_state_dict(torch.load(path, map_location="cpu"))
    return net.eval()
