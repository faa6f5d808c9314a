#!/usr/bin/python3
"""Unit tests of the model scripts: /usr/bin/python3 -m unittest models/scripts/test_scripts.py
(needs numpy, scipy, torch, onnx; espeak-ng for the synthesis tests, skipped without it)."""

import os
import shutil
import struct
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunk_split  # noqa: E402
import features  # noqa: E402
import model as M  # noqa: E402
import synth  # noqa: E402
import textnorm  # noqa: E402
import train  # noqa: E402


class TextTest(unittest.TestCase):
    def test_number_words(self):
        for n, want in [(0, "zero"), (13, "thirteen"), (40, "forty"), (101, "one hundred one"),
                        (2026, "two thousand twenty six"), (1_000_001, "one million one"),
                        (999_999_999_999, "nine hundred ninety nine billion nine hundred ninety nine million "
                                          "nine hundred ninety nine thousand nine hundred ninety nine")]:
            self.assertEqual(textnorm.number_words(n), want, n)
        for bad in (-1, 10**12):
            with self.assertRaises(ValueError):
                textnorm.number_words(bad)

    def test_normalize(self):
        for text, want in [("In 1984, it's 3-D!", "in one thousand nine hundred eighty four it's three d"),
                           ("'Quoted' words' end", "quoted words end"),
                           ("1,250 people", "one thousand two hundred fifty people"),
                           ("Don\u2019t  STOP", "don't stop"),
                           ("caf\u00e9 na\u00efve", "caf na ve"),
                           ("", "")]:
            self.assertEqual(textnorm.normalize(text), want, text)

    def test_encode_decode(self):
        ids = textnorm.encode("it's ok")
        self.assertEqual(ids, [10, 21, 28, 20, 1, 16, 12])
        self.assertEqual(textnorm.decode(ids), "it's ok")
        self.assertEqual(textnorm.decode([0, 10, 0, 1, 1, 21]), "i  t")
        self.assertEqual(len(textnorm.tokens_txt().splitlines()), 29)

    def test_edit_distance(self):
        for a, b, d in [("kitten", "sitting", 3), ("", "abc", 3), ("abc", "abc", 0), (["a", "b"], ["b"], 1)]:
            self.assertEqual(textnorm.edit_distance(a, b), d)

    def test_score(self):
        r = train.score(["a b c", "d e"], ["a x c", "d e"])
        self.assertAlmostEqual(r["wer"], 1 / 5)
        self.assertAlmostEqual(r["cer"], 1 / 8)


def _wav(pcm, rate=22050, size=None):
    data = pcm.astype("<i2").tobytes()
    n = len(data) if size is None else size
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + \
        b"data" + struct.pack("<I", n) + data


class WavTest(unittest.TestCase):
    def test_parse(self):
        pcm = np.arange(-50, 50, dtype=np.int16)
        for size in (None, 0, 0xFFFFFFFF):
            got, rate = synth.parse_wav(_wav(pcm, size=size))
            np.testing.assert_array_equal(got, pcm)
            self.assertEqual(rate, 22050)

    def test_bad(self):
        for data in (b"", b"RIFF\0\0\0\0WAVX", _wav(np.zeros(4, np.int16))[:36]):
            with self.assertRaises(ValueError):
                synth.parse_wav(data)


def reference_features(x: np.ndarray) -> np.ndarray:
    """A second, loop-based numpy implementation of parakeet-128 (float64)."""
    n = len(x)
    y = np.concatenate([x[:1], x[1:] - 0.97 * x[:-1]]).astype(np.float64)
    y = np.pad(y, (256, 256))
    win = np.zeros(512)
    win[56:456] = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 399)
    frames = n // 160 + 1
    spec = np.stack([np.abs(np.fft.rfft(y[t * 160:t * 160 + 512] * win)) ** 2 for t in range(frames)], 1)
    mel = np.log(features.slaney_mel_filters().astype(np.float64) @ spec + 2.0**-24)
    valid = n // 160
    m = mel[:, :valid].mean(1, keepdims=True)
    s = mel[:, :valid].std(1, ddof=1, keepdims=True)
    out = (mel - m) / (s + 1e-5)
    out[:, valid:] = 0
    return out


class FeatureTest(unittest.TestCase):
    def test_against_numpy_reference(self):
        rng = np.random.default_rng(1)
        clips = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (16000, 12345, 4000)]
        clips[1] += (0.5 * np.sin(2 * np.pi * 440 * np.arange(12345) / 16000)).astype(np.float32)
        wave = torch.zeros(3, 16000)
        for i, c in enumerate(clips):
            wave[i, :len(c)] = torch.from_numpy(c)
        f, fl = features.Parakeet128()(wave, torch.tensor([len(c) for c in clips]))
        self.assertEqual(tuple(f.shape), (3, 128, 101))
        self.assertEqual(fl.tolist(), [100, 77, 25])
        for i, c in enumerate(clips):
            ref = reference_features(c)
            got = f[i, :, :ref.shape[1]].numpy()
            self.assertLess(np.abs(got - ref).max(), 5e-4, i)
            self.assertTrue((f[i, :, ref.shape[1]:] == 0).all())

    def test_mel_filters(self):
        fb = features.slaney_mel_filters()
        self.assertEqual(fb.shape, (128, 257))
        self.assertTrue((fb >= 0).all())
        # Slaney norm: each triangle has area 1 in Hz (2 / bandwidth peak), so
        # sum over bins * bin width (31.25 Hz) is close to 1 for wide filters.
        self.assertAlmostEqual(float(fb[-1].sum() * 31.25), 1.0, delta=0.05)


class ModelTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.net = M.CharCTC().eval()

    def test_lengths(self):
        for n, want in [(0, 0), (1, 1), (2, 1), (3, 2), (301, 151)]:
            self.assertEqual(int(M.CharCTC.output_lengths(torch.tensor([n]))[0]), want, n)

    def test_padding_invariance(self):
        x = torch.randn(2, 128, 240)
        lens = torch.tensor([240, 150])
        with torch.no_grad():
            lp, ol = self.net(x, lens)
            one, ol1 = self.net(x[1:, :, :150], lens[1:])
        self.assertEqual(ol.tolist(), [120, 75])
        self.assertLess(float((lp[1, :75] - one[0]).abs().max()), 1e-4)
        self.assertTrue(torch.allclose(lp.exp().sum(-1), torch.ones(2, 120), atol=1e-4))

    def test_onnx_roundtrip(self):
        d = tempfile.mkdtemp()
        try:
            path = os.path.join(d, "m.onnx")
            size = train.export_onnx(self.net, path)
            self.assertLess(size, 15_000_000)
            back = M.load_model(path)
            for k, v in self.net.state_dict().items():
                self.assertTrue(torch.equal(v, back.state_dict()[k]), k)
        finally:
            shutil.rmtree(d)

    def test_greedy(self):
        lp = torch.full((1, 6, 29), -10.0)
        for t, c in enumerate([0, 10, 10, 0, 10, 1]):
            lp[0, t, c] = 0
        self.assertEqual(train.greedy(lp, torch.tensor([6])), [[10, 10, 1]])
        self.assertEqual(train.greedy(lp, torch.tensor([3])), [[10]])


@unittest.skipUnless(shutil.which(synth.ESPEAK), "espeak-ng not installed")
class ChunkSplitTest(unittest.TestCase):
    """chunk_split.rewrite: torch.chunk's run-time Slices become one Split."""

    def test_rewrite_exported_chunk(self):
        import onnx

        class Chunk(torch.nn.Module):
            def forward(self, x):
                y = x.view(x.shape[0], x.shape[1], 6, 4).transpose(1, 2)
                a, b, c = y.chunk(3, dim=1)
                return a * 2 + b - c

        path = os.path.join(tempfile.mkdtemp(), "chunk.onnx")
        torch.onnx.export(Chunk(), (torch.randn(2, 5, 24),), path, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "b", 1: "t"}}, opset_version=17)
        m = onnx.load(path)
        if not any(n.op_type == "Slice" for n in m.graph.node):
            self.skipTest("this torch exports chunk without Slice")
        self.assertEqual(chunk_split.rewrite(m), 1)
        onnx.checker.check_model(m)
        ops = [n.op_type for n in m.graph.node]
        self.assertNotIn("Slice", ops)
        split = [n for n in m.graph.node if n.op_type == "Split"]
        self.assertEqual(len(split), 1)
        self.assertEqual(len(split[0].output), 3)
        self.assertEqual(split[0].attribute[0].i, 1)
        self.assertEqual(chunk_split.rewrite(m), 0)

    def test_bundled_model_has_no_chunk_slices(self):
        import onnx

        m = onnx.load(os.path.join(os.path.dirname(__file__), "..", "default", "model.onnx"))
        self.assertEqual(chunk_split.rewrite(m), 0)
        self.assertNotIn("Slice", [n.op_type for n in m.graph.node])


class SynthTest(unittest.TestCase):
    def test_espeak(self):
        pcm = synth.espeak("hello world", "en-us", "f2", 175, 50)
        self.assertGreater(len(pcm), synth.NATIVE_RATE // 2)
        self.assertGreater(int(np.abs(pcm).max()), 1000)

    def test_job_seeded(self):
        a = synth.job((7, "one two"))
        b = synth.job((7, "one two"))
        self.assertEqual(a[1], b[1])
        np.testing.assert_array_equal(a[2], b[2])


if __name__ == "__main__":
    unittest.main()
