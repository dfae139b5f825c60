import { generateRandomModel, parseModelSpec } from '/work/main/dist/src/models/generate/random-model.js';
import { readGgufFacts } from '/work/main/dist/src/models/cards/gguf-facts.js';
import { gguf } from '/work/main/node_modules/@huggingface/gguf/dist/index.mjs';
import { readFile, writeFile } from 'node:fs/promises';
const spec = parseModelSpec({ name: 'fuzz', seed: 1, vocabSize: 408, embeddingLength: 32, blockCount: 1, headCount: 2, headCountKv: 1, feedForwardLength: 32, contextLength: 256, ropeFreqBase: 10000, rmsEps: 1e-5, tensorType: 'f32' });
await generateRandomModel(spec, '/tmp/fz.gguf');
const model = await readFile('/tmp/fz.gguf');
const hb = Number((await gguf('/tmp/fz.gguf', { allowLocalFile: true })).tensorDataOffset);
const b = Buffer.from(model);
const at = 2012504276 % hb; console.log('at', at, 'orig', b[at], 'at354', b[354]);
b[at] ^= 1; b[354] = 0;
await writeFile('/tmp/fz-so.gguf', b);
const t = Date.now();
try { await readGgufFacts('/tmp/fz-so.gguf'); console.log('ok'); } catch (e) { console.log(e.name, e.message.slice(0, 200)); console.log(e.stack.split('\n').slice(0, 12).join('\n')); }
console.log('ms', Date.now() - t, 'rss', process.memoryUsage().rss >> 20);
