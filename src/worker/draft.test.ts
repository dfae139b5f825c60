import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ModelCard } from '../models/cards/card.js';
import { draftFor } from './draft.js';

// draftFor reads only the card's id and runtime section.
const card = (speculative?: object): Pick<ModelCard, 'id' | 'runtime'> => ({ id: 'target', runtime: { min_nodes: 1, ...(speculative ? { speculative } : {}) } }) as unknown as Pick<ModelCard, 'id' | 'runtime'>;

function recorder() {
  const lines: string[] = [];
  return { lines, log: { warn: (line: string) => lines.push(`warn: ${line}`), info: (line: string) => lines.push(`info: ${line}`) } };
}

test('draftFor: the card names a draft, whose file is found on this node with its token counts', async () => {
  const { log, lines } = recorder();
  const asked: string[] = [];
  const draft = await draftFor(card({ draft: 'small', draft_max: 8, draft_min: 2 }), async (id) => (asked.push(id), `/models/${id}.gguf`), new AbortController().signal, log);
  assert.deepEqual(draft, { modelPath: '/models/small.gguf', maxTokens: 8, minTokens: 2 });
  assert.deepEqual(asked, ['small']);
  assert.match(lines.join('\n'), /speculative decoding with the draft small/);
});

test('draftFor: no speculative section, or no card, loads no draft and asks for no file', async () => {
  const { log } = recorder();
  const never = async (): Promise<string> => assert.fail('no file is asked for');
  assert.equal(await draftFor(card(), never, new AbortController().signal, log), undefined);
  assert.equal(await draftFor(null, never, new AbortController().signal, log), undefined);
});

test('draftFor: a draft that cannot be had serves the model without it and says why; an abort still ends the launch', async () => {
  const { log, lines } = recorder();
  const missing = async (): Promise<string> => {
    throw new Error("no model card 'small'");
  };
  assert.equal(await draftFor(card({ draft: 'small' }), missing, new AbortController().signal, log), undefined);
  assert.match(lines.join('\n'), /warn: target serves without its draft small: no model card 'small'/);
  const stopping = new AbortController();
  stopping.abort();
  await assert.rejects(draftFor(card({ draft: 'small' }), missing, stopping.signal, log), /no model card/);
});
