import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_INPUT_CHARS } from '../../../src/speech/espeak-voice.js';
import { MAX_SPEECH_INPUT_CHARS, microphoneProblem, speechText, transcriptionModel, voiceModel } from './speech.js';

const CARDS = [
  { id: 'shoal/tiny', tasks: ['chat', 'completion'] },
  { id: 'shoal/tiny-whisper', tasks: ['transcription'] },
  { id: 'big/whisper', tasks: ['transcription'] },
];

test('the limit on spoken input is the node\'s', () => {
  assert.equal(MAX_SPEECH_INPUT_CHARS, MAX_INPUT_CHARS);
});

test('dictation uses a listed model whose card transcribes, and says what to do when there is none', () => {
  assert.deepEqual(transcriptionModel(['shoal/tiny', 'shoal/tiny-whisper', 'shoal/voice'], CARDS), { model: 'shoal/tiny-whisper', reason: null });
  const stopped = transcriptionModel(['shoal/tiny', 'shoal/voice'], CARDS);
  assert.equal(stopped.model, null);
  assert.match(stopped.reason ?? '', /no speech-to-text model is running: launch shoal\/tiny-whisper or big\/whisper on the Models page/);
  assert.match(transcriptionModel(['shoal/tiny'], [CARDS[0]!]).reason ?? '', /add a whisper model card on the Models page/);
  assert.match(transcriptionModel(['shoal/tiny-whisper'], null).reason ?? '', /model cards \(GET \/models\) are not readable/);
  assert.equal(transcriptionModel(null, CARDS).model, null);
});

test('the voice is shoal/voice when listed', () => {
  assert.deepEqual(voiceModel(['shoal/tiny', 'shoal/voice']), { model: 'shoal/voice', reason: null });
  assert.match(voiceModel(['shoal/tiny']).reason ?? '', /lists no voice/);
});

test('a reply is spoken without its markdown marks, code said to be there, cut to the limit', () => {
  assert.deepEqual(speechText('# Title\n\n**Bold** and _it_ with `x` and [a link](http://e).\n- one\n- two\n```js\nlet a;\n```\nEnd'), {
    text: 'Title Bold and it with x and a link. one two (code) End',
    cut: false,
  });
  assert.equal(speechText('snake_case_name stays').text, 'snake_case_name stays');
  const long = speechText('é'.repeat(MAX_INPUT_CHARS + 3));
  assert.equal(long.cut, true);
  assert.equal([...long.text].length, MAX_INPUT_CHARS);
});

test('microphone failures say what to do', () => {
  assert.match(microphoneProblem('NotAllowedError', ''), /allow it for this page/);
  assert.match(microphoneProblem('NotFoundError', ''), /no microphone was found/);
  assert.match(microphoneProblem('NotReadableError', ''), /in use by another program/);
  assert.match(microphoneProblem('insecure', ''), /https or on localhost/);
  assert.match(microphoneProblem('WeirdError', 'boom'), /WeirdError: boom/);
});
