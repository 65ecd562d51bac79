#!/usr/bin/env node
// ONNX Runtime's CPU latency on one model: model_latency.py's second baseline.
//
// Usage: NODE_PATH=ORT_DIR/node_modules node ort_latency.js MODEL.onnx INPUT.npy THREADS ITERATIONS [OUTPUT.npy]
//
// Binds INPUT.npy (float32, C order) to the model's first input, runs one untimed warm-up and
// ITERATIONS timed runs on a session with THREADS intra- and inter-op threads, all graph
// optimisations and the CPU execution provider only, and prints
//   ort latency_ms median=M min=M max=M iterations=N version=V
// OUTPUT.npy receives the first output of the last run (float32), for model_latency.py to compare
// with PyTorch's. ONNX Runtime is not a dependency of the library: it comes from the npm package
// onnxruntime-node, installed outside the repository (benchmarks/README.md).
'use strict';

const fs = require('fs');
const ort = require('onnxruntime-node');

// A .npy file is a magic string, a version, a header length, a Python dict literal and the raw
// data. Only what numpy.save writes for a C-order float32 array is accepted.
function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${path}: unreadable header ${header}`);
  if (descr[1] !== '<f4') throw new Error(`${path}: dtype ${descr[1]}, expected float32 ('<f4')`);
  if (fortran[1] !== 'False') throw new Error(`${path}: Fortran order is not supported`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const offset = start + headerLen;
  // Copied out: the data need not sit at a 4-byte-aligned offset of the file's buffer.
  const data = new Float32Array(count);
  new Uint8Array(data.buffer).set(buf.subarray(offset, offset + 4 * count));
  return { dims, data };
}

function writeNpy(path, dims, data) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  // Version 1.0: magic + 2 version bytes + 2 length bytes + header, padded with spaces to a
  // multiple of 64 and ended by a newline.
  const unpadded = 10 + header.length + 1;
  header += ' '.repeat((64 - (unpadded % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const [modelPath, inputPath, threadsArg, iterationsArg, outputPath] = process.argv.slice(2);
  if (!modelPath || !inputPath || !threadsArg || !iterationsArg) {
    console.error('usage: node ort_latency.js MODEL.onnx INPUT.npy THREADS ITERATIONS [OUTPUT.npy]');
    process.exit(2);
  }
  const threads = Number(threadsArg);
  const iterations = Number(iterationsArg);
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads,
    interOpNumThreads: threads,
    graphOptimizationLevel: 'all',
    executionProviders: ['cpu'],
  });
  const input = readNpy(inputPath);
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', input.data, input.dims) };
  let results = await session.run(feeds); // warm-up: first-run allocations and caches
  const times = [];
  for (let i = 0; i < iterations; ++i) {
    const t0 = process.hrtime.bigint();
    results = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const mid = times.length >> 1;
  const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
  const version = (ort.env.versions && ort.env.versions.common) || 'unknown';
  console.log(`ort latency_ms median=${median.toFixed(3)} min=${times[0].toFixed(3)} ` +
              `max=${times[times.length - 1].toFixed(3)} iterations=${iterations} version=${version}`);
  if (outputPath) {
    const out = results[session.outputNames[0]];
    if (out.type !== 'float32') throw new Error(`first output is ${out.type}, only float32 is written`);
    writeNpy(outputPath, out.dims, out.data);
  }
}

main().catch((err) => {
  console.error(`ort_latency: ${err.message || err}`);
  process.exit(1);
});
