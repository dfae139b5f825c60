import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_RESPONSE_TOKENS } from '../../../src/api/openai/realtime/protocol.js';
import { appendAudio, historyItems, MAX_HISTORY_ITEMS, MAX_REPLY_TOKENS, MAX_TURN_CHARS, MAX_VOICE_TURNS, readServerEvent, realtimeProtocols, realtimeUrl, reduceVoice, sessionUpdate, VOICE_START, voiceClosed, voiceOpened, type VoiceState } from './realtime.js';

const feed = (state: VoiceState, ...events: object[]): VoiceState => events.reduce<VoiceState>((s, e) => reduceVoice(s, readServerEvent(JSON.stringify(e))), state);

test('the socket URL is the page\'s origin and base path, ws or wss, with the model', () => {
  assert.equal(realtimeUrl('http://127.0.0.1:52600/#/chat', 'shoal/tiny'), 'ws://127.0.0.1:52600/v1/realtime?model=shoal%2Ftiny');
  assert.equal(realtimeUrl('https://home.example/shoal/?x=1#/chat', 'm'), 'wss://home.example/shoal/v1/realtime?model=m');
});

test('the API key goes as a subprotocol only when there is one', () => {
  assert.deepEqual(realtimeProtocols(null), []);
  assert.deepEqual(realtimeProtocols('sk-1'), ['realtime', 'openai-insecure-api-key.sk-1']);
});

test('client events: the session asks for PCM16 at 24 kHz both ways, server VAD, the voice and the transcription model', () => {
  const update = sessionUpdate({ voice: 'alloy', transcriptionModel: 'shoal/tiny-whisper', maxOutputTokens: 64 }) as { type: string; session: { type: string; audio: { input: Record<string, unknown>; output: Record<string, unknown> } } };
  assert.equal(update.type, 'session.update');
  assert.equal(update.session.type, 'realtime');
  assert.equal((update.session as unknown as { max_output_tokens: number }).max_output_tokens, 64, 'the chat\'s token limit');
  assert.deepEqual(update.session.audio.input.format, { type: 'audio/pcm', rate: 24_000 });
  assert.deepEqual(update.session.audio.input.turn_detection, { type: 'server_vad' });
  assert.deepEqual(update.session.audio.input.transcription, { model: 'shoal/tiny-whisper' });
  assert.deepEqual(update.session.audio.output, { format: { type: 'audio/pcm', rate: 24_000 }, voice: 'alloy' });
  const big = sessionUpdate({ voice: 'alloy', transcriptionModel: null, maxOutputTokens: 32_768 }) as { session: { max_output_tokens: number } };
  assert.equal(big.session.max_output_tokens, MAX_REPLY_TOKENS);
  assert.equal(MAX_REPLY_TOKENS, MAX_RESPONSE_TOKENS, 'the node\'s bound');
  const without = sessionUpdate({ voice: 'alloy', transcriptionModel: null, maxOutputTokens: 64 }) as { session: { audio: { input: Record<string, unknown> } } };
  assert.equal('transcription' in without.session.audio.input, false, 'no model: the node picks one');
  assert.deepEqual(appendAudio('AAAA'), { type: 'input_audio_buffer.append', audio: 'AAAA' });
});

test('the chat so far goes first as text items, failed and empty ones left out, the newest kept', () => {
  const items = historyItems([
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: '', error: 'runner crashed' },
    { role: 'assistant', content: 'hello' },
    { role: 'user', content: '   ' },
  ]);
  assert.deepEqual(items, [
    { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } },
    { type: 'conversation.item.create', item: { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hello' }] } },
  ]);
  const many = historyItems(Array.from({ length: MAX_HISTORY_ITEMS + 5 }, (_, i) => ({ role: 'user' as const, content: `m${i}` })));
  assert.equal(many.length, MAX_HISTORY_ITEMS);
  assert.deepEqual((many[0]!.item as { content: { text: string }[] }).content[0]!.text, 'm5');
});

test('a voice turn: the user speaks, is transcribed, the reply streams its text and ends', () => {
  let s = feed(voiceOpened(VOICE_START), { type: 'session.created', session: {} });
  assert.equal(s.connection, 'open');
  assert.equal(s.ready, true);
  s = feed(s, { type: 'input_audio_buffer.speech_started', item_id: 'item_1', audio_start_ms: 0 });
  assert.equal(s.userSpeaking, true);
  assert.deepEqual(s.turns, [{ key: 'item_1', role: 'user', text: '', final: false }], 'the user\'s turn shows while it is transcribed');
  s = feed(
    s,
    { type: 'input_audio_buffer.speech_stopped', item_id: 'item_1' },
    { type: 'input_audio_buffer.committed', item_id: 'item_1' },
    { type: 'response.created', response: { id: 'resp_1', status: 'in_progress' } },
    { type: 'conversation.item.input_audio_transcription.completed', item_id: 'item_1', transcript: 'hello there' },
    { type: 'response.output_audio_transcript.delta', response_id: 'resp_1', item_id: 'item_2', delta: 'Hi, ' },
    { type: 'response.output_audio.delta', response_id: 'resp_1', delta: 'AAAA' },
    { type: 'response.output_audio_transcript.delta', response_id: 'resp_1', item_id: 'item_2', delta: 'you.' },
  );
  assert.equal(s.userSpeaking, false);
  assert.equal(s.responding, true);
  assert.deepEqual(
    s.turns.map((t) => [t.role, t.text, t.final]),
    [
      ['user', 'hello there', true],
      ['assistant', 'Hi, you.', false],
    ],
    'the transcript lands in its turn even after the reply has started',
  );
  s = feed(s, { type: 'response.output_audio_transcript.done', response_id: 'resp_1', transcript: 'Hi, you.' }, { type: 'response.done', response: { id: 'resp_1', status: 'completed' } });
  assert.equal(s.responding, false);
  assert.deepEqual(s.turns[1], { key: 'resp_1', role: 'assistant', text: 'Hi, you.', final: true });
});

test('talking over a reply marks it interrupted; a cancelled or failed response says so', () => {
  let s = feed(
    voiceOpened(VOICE_START),
    { type: 'response.created', response: { id: 'r1' } },
    { type: 'response.output_audio_transcript.delta', response_id: 'r1', delta: 'Long answer' },
    { type: 'input_audio_buffer.speech_started', item_id: 'u2' },
  );
  assert.deepEqual(s.turns[0], { key: 'r1', role: 'assistant', text: 'Long answer', final: true, interrupted: true });
  s = feed(s, { type: 'response.done', response: { id: 'r1', status: 'cancelled', status_details: { reason: 'turn_detected' } } });
  assert.equal(s.turns[0]!.interrupted, true);
  // Deltas of a reply already cut do not grow it.
  s = feed(s, { type: 'response.output_audio_transcript.delta', response_id: 'r1', delta: ' more' });
  assert.equal(s.turns[0]!.text, 'Long answer');
  s = feed(s, { type: 'response.created', response: { id: 'r2' } }, { type: 'response.done', response: { id: 'r2', status: 'failed', status_details: { error: { message: 'the model is not running' } } } });
  assert.equal(s.turns.find((t) => t.key === 'r2')?.error, 'the model is not running');
  s = feed(s, { type: 'response.created', response: { id: 'r3' } }, { type: 'response.done', response: { id: 'r3', status: 'incomplete', status_details: { type: 'incomplete', reason: 'max_output_tokens' } } });
  assert.deepEqual(s.turns.find((t) => t.key === 'r3'), { key: 'r3', role: 'assistant', text: '', final: true, cutAtLimit: true }, 'the token limit is no error');
  s = feed(s, { type: 'conversation.item.input_audio_transcription.failed', item_id: 'u2', error: { message: 'whisper is busy' } });
  assert.deepEqual(s.turns.find((t) => t.key === 'u2'), { key: 'u2', role: 'user', text: '', final: true, error: 'whisper is busy' });
});

test('errors, unknown and malformed events, events without ids', () => {
  let s = feed(VOICE_START, { type: 'error', error: { type: 'invalid_request_error', message: 'bad audio' } });
  assert.equal(s.error, 'bad audio');
  const same = feed(s, { type: 'rate_limits.updated' }, { type: 'conversation.item.added', item: {} });
  assert.equal(same, s, 'unknown events change nothing');
  assert.match(reduceVoice(s, readServerEvent('{nope')).error ?? '', /not JSON/);
  assert.match(reduceVoice(s, readServerEvent('{"x":1}')).error ?? '', /without a type/);
  s = feed(VOICE_START, { type: 'response.output_text.delta', delta: 'a' }, { type: 'response.output_text.delta', delta: 'b' }, { type: 'response.output_text.done', text: 'ab!' });
  assert.deepEqual(
    s.turns.map((t) => [t.role, t.text]),
    [['assistant', 'ab!']],
    'text replies without a response id build one turn',
  );
});

test('turns and their text are bounded', () => {
  let s = VOICE_START;
  for (let i = 0; i < MAX_VOICE_TURNS + 10; i++) s = feed(s, { type: 'conversation.item.input_audio_transcription.completed', item_id: `i${i}`, transcript: `turn ${i}` });
  assert.equal(s.turns.length, MAX_VOICE_TURNS);
  assert.equal(s.turns[0]!.text, 'turn 10', 'the oldest go first');
  s = feed(VOICE_START, { type: 'response.created', response: { id: 'r' } });
  for (let i = 0; i < 5; i++) s = feed(s, { type: 'response.output_audio_transcript.delta', response_id: 'r', delta: 'x'.repeat(MAX_TURN_CHARS / 2) });
  assert.equal(s.turns[0]!.text.length, MAX_TURN_CHARS);
});

test('a close: asked for is quiet; a lost or refused connection says what to check', () => {
  const open = feed(voiceOpened(VOICE_START), { type: 'response.created', response: { id: 'r' } }, { type: 'response.output_audio_transcript.delta', response_id: 'r', delta: 'Hi' });
  const asked = voiceClosed(open, { code: 1000, reason: '', byUser: true });
  assert.equal(asked.connection, 'closed');
  assert.equal(asked.error, null);
  assert.deepEqual(asked.turns[0], { key: 'r', role: 'assistant', text: 'Hi', final: true, interrupted: true });
  assert.match(voiceClosed(open, { code: 1006, reason: '', byUser: false }).error ?? '', /connection to the node was lost/);
  assert.match(voiceClosed(open, { code: 1008, reason: 'too many sessions', byUser: false }).error ?? '', /code 1008: too many sessions/);
  const withError = { ...open, error: 'bad audio' };
  assert.equal(voiceClosed(withError, { code: 1011, reason: '', byUser: false }).error, 'bad audio', 'the server\'s own error is kept');
});
