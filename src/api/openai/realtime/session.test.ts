import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ServerEvent, type ClientEvent, type RealtimeError } from './protocol.js';
import { DEFAULT_TURN_DETECTION, initialState, MAX_CONVERSATION_ITEMS, MAX_INPUT_BUFFER_S, MAX_SPOKEN_CHARS, step, takeSentences, type Action, type Input, type Settings, type State } from './session.js';
import { VAD_FRAME_SAMPLES } from './vad.js';

const settings = (over: Partial<Settings> = {}): Settings => ({
  type: 'realtime',
  model: 'shoal/tiny',
  instructions: 'Be brief.',
  modality: 'audio',
  maxOutputTokens: 'inf',
  inputRateHz: 24_000,
  transcription: { model: 'shoal/tiny-whisper', language: null, prompt: '' },
  turnDetection: { ...DEFAULT_TURN_DETECTION, prefixPaddingMs: 100, silenceDurationMs: 200 },
  voice: 'alloy',
  speed: 1,
  ...over,
});

/** Runs inputs in order, checking every event sent against the wire schema. */
class Harness {
  state: State;
  readonly actions: Action[] = [];

  constructor(s: Settings) {
    const start = initialState(s, 'test');
    this.state = start.state;
    this.record(start.actions);
  }

  private record(actions: Action[]): void {
    for (const action of actions) if (action.kind === 'send') ServerEvent.parse(action.event);
    this.actions.push(...actions);
  }

  feed(input: Input): Action[] {
    const next = step(this.state, input);
    this.state = next.state;
    this.record(next.actions);
    return next.actions;
  }

  client(event: ClientEvent): Action[] {
    return this.feed({ kind: 'client', event });
  }

  /** `pattern` as 20 ms frames of 16 kHz audio: x voiced, . silent. */
  audio(pattern: string): Action[] {
    const voiced = [...pattern].map((c) => c === 'x');
    return this.feed({ kind: 'audio', audio: new Int16Array(voiced.length * VAD_FRAME_SAMPLES).fill(7), voiced });
  }

  types(actions = this.actions): string[] {
    return actions.map((a) => (a.kind === 'send' ? a.event.type : `<${a.kind}>`));
  }
}

/** The error event among `actions`. */
function errorOf(actions: Action[]): RealtimeError {
  for (const action of actions) if (action.kind === 'send' && action.event.type === 'error') return action.event.error;
  assert.fail(`no error event in ${JSON.stringify(actions)}`);
}

const only = <K extends Action['kind']>(actions: Action[], kind: K): Extract<Action, { kind: K }>[] => actions.filter((a): a is Extract<Action, { kind: K }> => a.kind === kind);

test('a detected turn is committed, transcribed and answered, the reply spoken sentence by sentence, in the GA event order', () => {
  const h = new Harness(settings());
  assert.deepEqual(h.types(), ['session.created']);
  const turn = h.audio(`${'.'.repeat(20)}${'x'.repeat(25)}${'.'.repeat(12)}`);
  assert.deepEqual(h.types(turn), ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'conversation.item.added', '<transcribe>']);
  const [transcribe] = only(turn, 'transcribe');
  // From 400 ms less 100 ms of padding to the end of 200 ms of silence after the voice.
  assert.equal(transcribe!.audio.length, (45 + 10 - 15) * VAD_FRAME_SAMPLES);
  assert.equal(transcribe!.model, 'shoal/tiny-whisper');

  const answered = h.feed({ kind: 'transcribed', itemId: transcribe!.itemId, text: ' What time is it? ', durationS: 0.8 });
  assert.deepEqual(h.types(answered), [
    'conversation.item.input_audio_transcription.completed',
    'conversation.item.done',
    'response.created',
    'response.output_item.added',
    'conversation.item.added',
    'response.content_part.added',
    '<respond>',
  ]);
  const [respond] = only(answered, 'respond');
  assert.deepEqual(respond!.chat.messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What time is it?' },
  ]);
  const id = respond!.responseId;
  const first = h.feed({ kind: 'response-text', responseId: id, delta: 'It is noon. Time' });
  assert.deepEqual(h.types(first), ['response.output_audio_transcript.delta', '<speak>']);
  assert.equal(only(first, 'speak')[0]!.text, 'It is noon.');
  const end = h.feed({ kind: 'response-end', responseId: id, incomplete: false, promptTokens: 10, completionTokens: 5 });
  assert.deepEqual(only(end, 'speak').map((a) => a.text), ['Time']);
  h.feed({ kind: 'response-audio', responseId: id, audio: 'AAAA' });
  assert.deepEqual(h.types(h.feed({ kind: 'spoken', responseId: id })), [], 'one sentence is still being spoken');
  const done = h.feed({ kind: 'spoken', responseId: id });
  assert.deepEqual(h.types(done), ['response.output_audio.done', 'response.output_audio_transcript.done', 'response.content_part.done', 'response.output_item.done', 'conversation.item.done', 'response.done']);
  const last = done.at(-1)!;
  assert.ok(last.kind === 'send' && last.event.type === 'response.done');
  const response = last.event.response;
  assert.equal(response.status, 'completed');
  assert.deepEqual(response.usage, { total_tokens: 15, input_tokens: 10, output_tokens: 5 });
  assert.equal(response.output[0]!.content[0]!.transcript, 'It is noon. Time');
  assert.equal(h.state.response, null);
  assert.equal(h.state.items.length, 2, 'the user turn and the reply stay in the conversation');
});

test('speech that starts during a reply cancels it (turn_detected); late reports of the cancelled reply are ignored', () => {
  const h = new Harness(settings());
  h.client({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  const [respond] = only(h.client({ type: 'response.create' }), 'respond');
  const interrupted = h.audio('xxx');
  assert.deepEqual(h.types(interrupted).slice(0, 3), ['input_audio_buffer.speech_started', '<cancel-response>', 'response.content_part.done']);
  const done = interrupted.at(-1)!;
  assert.ok(done.kind === 'send' && done.event.type === 'response.done');
  const response = done.event.response;
  assert.equal(response.status, 'cancelled');
  assert.deepEqual(response.status_details, { type: 'cancelled', reason: 'turn_detected' });
  assert.deepEqual(h.feed({ kind: 'response-text', responseId: respond!.responseId, delta: 'late' }), []);
});

test('one response at a time, cancel only what runs, and no responses in a transcription session', () => {
  const h = new Harness(settings({ turnDetection: null }));
  h.client({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  h.client({ type: 'response.create' });
  const second = h.client({ type: 'response.create', event_id: 'two' });
  assert.equal(errorOf(second).code, 'conversation_already_has_active_response');
  assert.equal(errorOf(second).event_id, 'two');
  const cancelled = h.client({ type: 'response.cancel' });
  assert.ok(cancelled.some((a) => a.kind === 'cancel-response'));
  const again = h.client({ type: 'response.cancel' });
  assert.equal(errorOf(again).code, 'response_cancel_not_active');

  const t = new Harness(settings({ type: 'transcription' }));
  assert.equal(errorOf(t.client({ type: 'response.create' })).type, 'invalid_request_error');
  // A transcription session's turns are transcribed and never answered.
  const turn = t.audio(`${'x'.repeat(10)}${'.'.repeat(11)}`);
  const [transcribe] = only(turn, 'transcribe');
  assert.deepEqual(only(t.feed({ kind: 'transcribed', itemId: transcribe!.itemId, text: 'hello', durationS: 0.4 }), 'respond'), []);
});

test('manual commits: too little audio is an error, a full buffer is cleared with an error, clear empties it', () => {
  const h = new Harness(settings({ turnDetection: null }));
  const empty = h.client({ type: 'input_audio_buffer.commit' });
  assert.equal(errorOf(empty).code, 'input_audio_buffer_commit_empty');
  assert.deepEqual(h.types(h.audio('xxxxxxxxxx')), [], 'no turn detection');
  const committed = h.client({ type: 'input_audio_buffer.commit' });
  assert.deepEqual(h.types(committed), ['input_audio_buffer.committed', 'conversation.item.added', '<transcribe>']);
  assert.equal(only(committed, 'transcribe')[0]!.audio.length, 10 * VAD_FRAME_SAMPLES);
  assert.deepEqual(only(committed, 'respond'), [], 'a manual turn waits for response.create');

  const full = h.feed({ kind: 'audio', audio: new Int16Array(MAX_INPUT_BUFFER_S * 16_000 + 1), voiced: [] });
  assert.equal(errorOf(full).code, 'input_audio_buffer_full');
  assert.equal(h.state.bufferSamples, 0);
  h.audio('xxxxxx');
  assert.deepEqual(h.types(h.client({ type: 'input_audio_buffer.clear' })), ['input_audio_buffer.cleared']);
  assert.equal(h.state.bufferSamples, 0);
});

test('between turns the buffer keeps only what prefix padding can reach; an endless turn is committed at the buffer limit', () => {
  const h = new Harness(settings());
  h.audio('.'.repeat(500));
  assert.ok(h.state.bufferSamples < 16_000, `kept ${h.state.bufferSamples} samples`);
  const long = h.feed({ kind: 'audio', audio: new Int16Array(MAX_INPUT_BUFFER_S * 16_000), voiced: new Array<boolean>((MAX_INPUT_BUFFER_S * 1000) / 20).fill(true) });
  assert.deepEqual(h.types(long).slice(0, 3), ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed']);
});

test('a failed transcription drops the reply it would have started; a session.update is answered with the whole session', () => {
  const h = new Harness(settings());
  const [transcribe] = only(h.audio(`${'x'.repeat(10)}${'.'.repeat(11)}`), 'transcribe');
  const failed = h.feed({ kind: 'transcription-failed', itemId: transcribe!.itemId, error: { type: 'invalid_request_error', code: 'model_not_found', message: 'no model', param: null } });
  assert.deepEqual(h.types(failed), ['conversation.item.input_audio_transcription.failed', 'conversation.item.done']);

  const updated = h.client({ type: 'session.update', session: { type: 'realtime', instructions: 'New.', audio: { input: { format: { type: 'audio/pcm', rate: 16_000 }, turn_detection: { type: 'server_vad', threshold: 0.9 } } } } });
  assert.deepEqual(h.types(updated), ['<configure-audio>', 'session.updated']);
  const event = updated[1]!;
  assert.ok(event.kind === 'send' && event.event.type === 'session.updated');
  const session = event.event.session;
  assert.ok(session.type === 'realtime');
  assert.equal(session.instructions, 'New.');
  assert.equal(session.audio.input.format.rate, 16_000);
  assert.equal(session.audio.input.turn_detection?.threshold, 0.9);
  assert.equal(session.audio.input.turn_detection?.silence_duration_ms, 200, 'fields not named keep their values');
});

test('the conversation keeps its last items only', () => {
  const h = new Harness(settings());
  for (let i = 0; i < MAX_CONVERSATION_ITEMS + 5; i++) h.client({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: `m${i}` }] } });
  assert.equal(h.state.items.length, MAX_CONVERSATION_ITEMS);
  assert.equal(h.state.items[0]!.text, 'm5');
});

test('reply text is cut into sentences for the voice, and a run-on at a space', () => {
  assert.deepEqual(takeSentences('One. Two! Three? "Four." Five'), { sentences: ['One.', 'Two!', 'Three?', '"Four."'], rest: 'Five' });
  assert.deepEqual(takeSentences('line one\nline two'), { sentences: ['line one'], rest: 'line two' });
  assert.deepEqual(takeSentences('3.14 is pi'), { sentences: [], rest: '3.14 is pi' });
  const runOn = 'word '.repeat(200);
  const { sentences, rest } = takeSentences(runOn);
  assert.ok(sentences.length >= 2 && sentences.every((s) => s.length <= MAX_SPOKEN_CHARS && !s.endsWith(' ')));
  assert.equal(sentences.join(' ').split(' ').length + rest.trim().split(' ').filter(Boolean).length, 200);
});
