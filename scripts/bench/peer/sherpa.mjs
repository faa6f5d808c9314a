// sherpa.mjs MODEL_DIR THREADS REPEATS WAV...: sherpa-onnx's offline NeMo CTC
// recogniser (npm sherpa-onnx-node) on each WAV, loaded once and warmed up,
// each file decoded REPEATS times; prints one JSON line a file:
// {"file", "ms": [per repeat], "cpu_ms": [user + system, per repeat], "text"}. Audio longer than 30 s is decoded in
// consecutive 30 s pieces (sherpa-onnx encodes a NeMo CTC input whole, and
// its attention over a 10-minute input does not fit in memory), their texts
// joined. Run by scripts/bench/peer.
import { createRequire } from 'node:module';
const require = createRequire(process.cwd() + '/');
const sherpa = require('sherpa-onnx-node');

const [dir, threads, repeats, ...files] = process.argv.slice(2);
const rec = new sherpa.OfflineRecognizer({
  featConfig: { sampleRate: 16000, featureDim: 128 },
  modelConfig: {
    nemoCtc: { model: `${dir}/model.onnx` },
    tokens: `${dir}/tokens.txt`,
    numThreads: Number(threads),
    provider: 'cpu',
    debug: 0,
  },
});
const decode = (wave) => {
  const piece = 30 * wave.sampleRate;
  const texts = [];
  for (let i = 0; i < wave.samples.length; i += piece) {
    const s = rec.createStream();
    s.acceptWaveform({ samples: wave.samples.subarray(i, i + piece), sampleRate: wave.sampleRate });
    rec.decode(s);
    texts.push(rec.getResult(s).text.trim());
  }
  return texts.join(' ');
};
for (const f of files) {
  const wave = sherpa.readWave(f);
  decode(wave); // warm-up
  const ms = [];
  const cpu = [];
  let text = '';
  for (let i = 0; i < Number(repeats); i++) {
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    text = decode(wave);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1e3);
  }
  console.log(JSON.stringify({ file: f, ms, cpu_ms: cpu, text: text.trim().toLowerCase() }));
}
