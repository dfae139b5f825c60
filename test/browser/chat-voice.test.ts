import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page, WebSocket as PageSocket } from 'playwright-core';
import { TINY_MODEL_ID, TINY_WHISPER_MODEL_ID } from '../../src/models/generate/builtin.js';
import { ensureDashboardBuilt, launchBrowser, openDashboard, screenshot, type DashboardPage } from '../support/browser.js';
import { eventually } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { wavHeader } from '../support/audio.js';

/**
 * Voice in the dashboard's chat (tier 5, Debian's Chromium against a real node). The browser's
 * microphone is Chromium's fake capture device playing a WAV of real speech, which the node's own voice
 * (shoal/voice) said first. With the generated whisper model (random weights: its words are noise, but
 * the real whisper.cpp binding runs them) dictation uploads the recording and puts the transcript in the
 * message box, and says what to do while no speech-to-text model runs; each answer can be spoken (the
 * voice's WAV decoded by Web Audio), and "Speak replies" speaks new answers by itself; voice mode talks
 * to WS /v1/realtime, shows the user's transcript and the reply as messages, plays the reply's audio and
 * joins the turns to the conversation when it stops.
 */

const WAIT_MS = 30_000;
const CONTROL_HEADERS = { 'content-type': 'application/json', 'x-shoal-client': 'test' };
const SENTENCE = 'Hello there. Please tell me a short story about the sea.';

/** The WAV, then silence: the node's voice activity detection hears the turn end (the fake device plays the file once per capture, then silence). */
function withSilence(wav: Buffer, seconds: number): Buffer {
  const rate = wav.readUInt32LE(24);
  const dataAt = wav.indexOf('data', 12, 'latin1');
  assert.ok(dataAt > 0 && wav.readUInt16LE(34) === 16 && wav.readUInt16LE(22) === 1, 'the voice answers 16-bit mono WAV');
  const pcm = wav.subarray(dataAt + 8, dataAt + 8 + wav.readUInt32LE(dataAt + 4));
  const silence = Buffer.alloc(Math.round(rate * seconds) * 2);
  return Buffer.concat([wavHeader(rate, pcm.length + silence.length), pcm, silence]);
}

function assertClean(dash: DashboardPage, expected: RegExp[] = []): void {
  const problems = dash.problems.filter((p) => !expected.some((re) => re.test(p)));
  assert.deepEqual(problems, [], 'no console errors, page errors or failed requests');
}

async function ask(page: Page, text: string, nth: number): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByLabel('Message').press('Enter');
  await page.locator('.bubble-assistant [data-answer-meta]').nth(nth).waitFor({ timeout: 60_000 });
}

describe('voice in the dashboard chat', { timeout: 300_000 }, () => {
  let browser: Browser;
  let node: TestNode;
  let dir: string;
  let whisper: Promise<void> | null = null;
  /** Once per node: the first test checks the page before it, and each test may run alone. */
  const placeWhisper = (): Promise<void> =>
    (whisper ??= (async () => {
      const placed = await fetch(`${node.url}/place_instance`, { method: 'POST', headers: CONTROL_HEADERS, body: JSON.stringify({ model: TINY_WHISPER_MODEL_ID }) });
      assert.equal(placed.status, 201, await placed.clone().text());
    })());

  before(async () => {
    ensureDashboardBuilt();
    node = await startTestNode({ args: ['--name', 'voice'] });
    const spoken = await fetch(`${node.url}/v1/audio/speech`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/voice', voice: 'alloy', input: SENTENCE, response_format: 'wav' }) });
    assert.equal(spoken.status, 200, await spoken.clone().text());
    dir = await mkdtemp(join(tmpdir(), 'shoal-voice-'));
    const wavPath = join(dir, 'speech.wav');
    await writeFile(wavPath, withSilence(Buffer.from(await spoken.arrayBuffer()), 1.5));
    browser = await launchBrowser(['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wavPath}%noloop`, '--autoplay-policy=no-user-gesture-required']);
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('dictation says what to do without a speech-to-text model, then transcribes the microphone into the message box', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/chat' });
    const { page } = dash;
    await page.locator(`select[aria-label="Model"] option[value="${TINY_MODEL_ID}"]`).waitFor({ state: 'attached', timeout: WAIT_MS });
    const record = page.getByRole('button', { name: 'Dictate', exact: true });
    await eventually('the page to read the model cards', WAIT_MS, async () => ((await record.getAttribute('title'))?.includes('launch shoal/tiny-whisper') ? true : undefined));
    await record.click();
    assert.match(await page.locator('[data-dictate-error]').innerText(), /no speech-to-text model is running: launch shoal\/tiny-whisper on the Models page/);
    assert.match((await page.getByRole('button', { name: 'Start voice mode' }).getAttribute('title')) ?? '', /Voice mode needs a speech-to-text model/);

    await placeWhisper();
    await eventually('the page to see the whisper model', 60_000, async () => ((await record.getAttribute('title'))?.includes(`transcribe it with ${TINY_WHISPER_MODEL_ID}`) ? true : undefined));

    await record.click();
    const stop = page.getByRole('button', { name: 'Stop dictation' });
    await stop.waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('[data-dictate-error]').count(), 0, 'starting clears the old problem');
    await page.locator('[data-recording="3"]').waitFor({ timeout: WAIT_MS });
    assert.match(await stop.innerText(), /3 s/, 'the elapsed seconds show');
    const transcribed = page.waitForResponse((r) => r.url().endsWith('/v1/audio/transcriptions'), { timeout: 60_000 });
    await stop.click();
    const response = await transcribed;
    assert.equal(response.status(), 200);
    assert.match((await response.request().headerValue('content-type')) ?? '', /^multipart\/form-data; boundary=/);
    const { text } = (await response.json()) as { text: string };
    await record.waitFor({ timeout: WAIT_MS });
    if (text.trim() === '') assert.match(await page.locator('[data-dictate-error]').innerText(), /heard no words/);
    else assert.equal(await page.getByLabel('Message').inputValue(), text.trim(), 'the transcript is in the message box');
    await screenshot(page, 'chat-dictation');
    assertClean(dash);
  });

  test('an answer is spoken on request, and "Speak replies" speaks new answers', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/chat' });
    const { page } = dash;
    await page.locator(`select[aria-label="Model"] option[value="${TINY_MODEL_ID}"]`).waitFor({ state: 'attached', timeout: WAIT_MS });
    await page.getByLabel('Max tokens').fill('12');
    await ask(page, 'Say something.', 0);
    const answer = page.locator('.bubble-assistant').first();
    const spoken = page.waitForResponse((r) => r.url().endsWith('/v1/audio/speech'), { timeout: WAIT_MS });
    await answer.getByRole('button', { name: 'Speak this answer' }).click();
    const response = await spoken;
    assert.equal(response.status(), 200);
    assert.equal(response.headers()['content-type'], 'audio/wav');
    const sent = JSON.parse(response.request().postData() ?? '{}') as { model: string; input: string };
    assert.equal(sent.model, 'shoal/voice');
    assert.ok(sent.input.length > 0);
    // Playing: the decoded audio's length shows on the stop button until it ends.
    const duration = await page.waitForFunction(`document.querySelector('[data-speaking="playing"]')?.getAttribute('data-audio-duration') ?? null`, null, { timeout: WAIT_MS, polling: 20 });
    assert.ok(Number(await duration.jsonValue()) > 0.1, `the reply's audio lasts ${String(await duration.jsonValue())} s`);
    await page.getByRole('button', { name: 'Stop speaking' }).click();
    await answer.getByRole('button', { name: 'Speak this answer' }).waitFor({ timeout: WAIT_MS });

    await page.getByLabel('Speak replies').check();
    const auto = page.waitForResponse((r) => r.url().endsWith('/v1/audio/speech'), { timeout: 60_000 });
    await ask(page, 'And again.', 1);
    assert.equal((await auto).status(), 200, 'the new answer is spoken by itself');
    await page.locator('.bubble-assistant').nth(1).locator('[data-speaking]').waitFor({ timeout: WAIT_MS });
    await page.getByLabel('Speak replies').uncheck();
    assertClean(dash);
  });

  test('voice mode: the microphone goes to /v1/realtime, the turns show as messages, the reply is heard, and they join the conversation', async () => {
    await placeWhisper();
    await using dash = await openDashboard(browser, node.url, { hash: '#/chat' });
    const { page } = dash;
    let socket: PageSocket | null = null;
    const received: string[] = [];
    let audioSent = 0;
    const sent: string[] = [];
    page.on('websocket', (ws) => {
      if (!ws.url().includes('/v1/realtime')) return;
      socket = ws;
      ws.on('framereceived', (frame) => {
        if (typeof frame.payload === 'string') received.push((JSON.parse(frame.payload) as { type: string }).type);
      });
      ws.on('framesent', (frame) => {
        if (typeof frame.payload !== 'string') return;
        const type = (JSON.parse(frame.payload) as { type: string }).type;
        if (type === 'input_audio_buffer.append') audioSent += 1;
        else sent.push(frame.payload);
      });
    });
    await page.locator(`select[aria-label="Model"] option[value="${TINY_MODEL_ID}"]`).waitFor({ state: 'attached', timeout: WAIT_MS });
    await page.getByLabel('Max tokens').fill('16');
    // A typed exchange first: voice mode carries the conversation on.
    await ask(page, 'Hello.', 0);
    const start = page.locator('button[aria-label="Start voice mode"]:not([disabled])');
    await start.waitFor({ timeout: 60_000 });
    await start.click();
    await page.locator('[data-voice-connection="open"]').waitFor({ timeout: WAIT_MS });
    assert.ok((socket as PageSocket | null)?.url().endsWith(`/v1/realtime?model=${encodeURIComponent(TINY_MODEL_ID)}`), 'the socket names the chat model');
    await page.locator('[data-voice-activity="listening"], [data-voice-activity="hearing you"], [data-voice-activity="replying"]').first().waitFor({ timeout: WAIT_MS });

    // The fake microphone says the sentence: the node hears it, transcribes it and answers aloud.
    await page.locator('.bubble-user[data-voice]').first().waitFor({ timeout: 60_000 });
    await eventually('a spoken reply', 120_000, async () => {
      if (received.includes('response.output_audio.delta') && received.includes('response.done')) return true;
      throw new Error(`events so far: ${[...new Set(received)].join(', ')}; ${audioSent} appends sent`);
    });
    assert.ok(audioSent > 10, `the microphone streamed (${audioSent} appends)`);
    const history = sent.map((p) => JSON.parse(p) as { type: string; item?: { role: string } }).filter((e) => e.type === 'conversation.item.create');
    assert.deepEqual(history.map((e) => e.item?.role), ['user', 'assistant'], 'the typed exchange went first');
    assert.equal(received.includes('error'), false, 'the node took every event');
    assert.ok(received.includes('input_audio_buffer.speech_started'), `the node heard speech: ${[...new Set(received)].join(', ')}`);
    assert.ok(received.includes('conversation.item.input_audio_transcription.completed'), 'the turn was transcribed');
    const reply = page.locator('.bubble-assistant[data-voice]').first();
    await reply.waitFor({ timeout: WAIT_MS });
    await screenshot(page, 'chat-voice-mode');

    await page.getByRole('button', { name: 'Stop voice mode' }).click();
    await page.locator('[data-voice-connection="closed"]').waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('[data-voice-error]').count(), 0, 'stopping is not an error');
    // The final turns stay, now as the conversation's messages, kept over a reload.
    await page.locator('.bubble-user[data-voice]').first().waitFor({ timeout: WAIT_MS });
    const userText = await page.locator('.bubble-user[data-voice]').first().innerText();
    assert.ok(userText.trim().length > 0, 'the user turn has its transcript');
    await page.reload();
    await page.locator('.bubble[data-voice]').first().waitFor({ timeout: WAIT_MS });
    assertClean(dash);
  });
});
