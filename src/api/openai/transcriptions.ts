// OpenAI's speech to text: `POST /v1/audio/transcriptions` and `/v1/audio/translations`, multipart
// uploads as the official clients send them. The upload is decoded here (a bad file is a 400 before
// anything travels), then the transcription goes to a node serving the model like any task.

import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ShoalError, errorMessage } from '../../common/errors.js';
import { encodeTaskAudio } from '../../wire/audio.js';
import { MAX_AUDIO_SECONDS, MAX_TRANSCRIBE_PROMPT_CHARS, type TranscribeTask } from '../../wire/task.js';
import type { AudioDecoder } from '../audio-port.js';
import { collectAnswer } from '../collect.js';
import type { Dispatcher } from '../dispatch.js';
import { clientAbortSignal, QUEUE_POSITION_HEADER, startTask } from '../stream.js';
import { parseBody } from '../validation.js';
import { formatTranscript, TRANSCRIPT_FORMATS } from './transcript-format.js';

/** Bytes of one uploaded audio file: OpenAI's own limit. */
export const MAX_AUDIO_UPLOAD_BYTES = 25 * 1024 * 1024;
/** Form fields besides the file, and the characters of each (the prompt is the longest). */
const MAX_FORM_FIELDS = 16;
const MAX_FORM_FIELD_BYTES = 4 * MAX_TRANSCRIBE_PROMPT_CHARS;

const Granularity = z.enum(['segment', 'word']);
const Common = {
  model: z.string({ error: 'name the speech-to-text model: model' }).min(1).max(200),
  prompt: z.string().max(MAX_TRANSCRIBE_PROMPT_CHARS).optional(),
  response_format: z.enum(TRANSCRIPT_FORMATS).optional(),
  temperature: z.coerce.number().min(0).max(1).optional(),
};
const TranscriptionForm = z.strictObject({
  ...Common,
  language: z
    .string()
    .regex(/^[a-z]{2,3}$/, 'an ISO-639-1 language code, such as en or de')
    .optional(),
  'timestamp_granularities[]': z.array(Granularity).max(2).optional(),
  /** Accepted, no effect: whisper reads the file in its own 30 s windows. */
  chunking_strategy: z.string().max(1000).optional(),
  /** Accepted, no effect: no log probabilities are computed. */
  'include[]': z.array(z.enum(['logprobs'])).max(1).optional(),
  stream: z.enum(['false'], { error: 'streamed transcription is not supported: leave stream unset or false' }).optional(),
});
const TranslationForm = z.strictObject(Common);

/** Reads the multipart body: the one file (capped) and the text fields, `name[]` fields as lists. */
async function readForm(request: FastifyRequest): Promise<{ file: Buffer | null; fields: Record<string, string | string[]> }> {
  if (!request.isMultipart()) {
    throw new ShoalError('BAD_REQUEST', 'send the audio as multipart/form-data with a `file` part and a `model` field, as the OpenAI clients do');
  }
  let file: Buffer | null = null;
  const fields: Record<string, string | string[]> = {};
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file') throw new ShoalError('UNSUPPORTED_PARAMETER', `unsupported file part '${part.fieldname}': the audio goes in \`file\``, { param: part.fieldname });
        if (file !== null) throw new ShoalError('BAD_REQUEST', 'send one audio file per request', { param: 'file' });
        file = await part.toBuffer();
        continue;
      }
      const value = typeof part.value === 'string' ? part.value : String(part.value);
      if (part.fieldname.endsWith('[]')) fields[part.fieldname] = [...((fields[part.fieldname] as string[] | undefined) ?? []), value];
      else fields[part.fieldname] = value;
    }
  } catch (error) {
    if (error instanceof ShoalError) throw error;
    const code = (error as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE') throw new ShoalError('PAYLOAD_TOO_LARGE', `the audio file is larger than ${MAX_AUDIO_UPLOAD_BYTES / (1024 * 1024)} MiB: send a shorter or more compressed recording`, { param: 'file', cause: error });
    if (code === 'FST_FIELDS_LIMIT' || code === 'FST_PARTS_LIMIT' || code === 'FST_FILES_LIMIT') throw new ShoalError('BAD_REQUEST', `too many form fields: send \`file\`, \`model\` and at most ${MAX_FORM_FIELDS} options`, { cause: error });
    throw new ShoalError('BAD_REQUEST', `the multipart body could not be read: ${errorMessage(error)}`, { cause: error });
  }
  return { file, fields };
}

export function transcriptionRoutes(app: FastifyInstance, dispatcher: Dispatcher, audio: AudioDecoder): void {
  // In its own scope: only these routes take multipart bodies.
  void app.register(async (scope) => {
    await scope.register(multipart, {
      limits: { fileSize: MAX_AUDIO_UPLOAD_BYTES, files: 1, fields: MAX_FORM_FIELDS, fieldSize: MAX_FORM_FIELD_BYTES, parts: MAX_FORM_FIELDS + 1, headerPairs: 64 },
    });
    for (const translate of [false, true]) {
      scope.post(translate ? '/v1/audio/translations' : '/v1/audio/transcriptions', async (request, reply) => {
        const { file, fields } = await readForm(request);
        const form = translate ? { ...parseBody(TranslationForm, fields), language: undefined, 'timestamp_granularities[]': undefined } : parseBody(TranscriptionForm, fields);
        if (file === null) throw new ShoalError('BAD_REQUEST', 'the audio is missing: send it as the `file` part', { param: 'file' });
        const format = form.response_format ?? 'json';
        const granularities = form['timestamp_granularities[]'] ?? [];
        if (granularities.includes('word') && format !== 'verbose_json') {
          throw new ShoalError('BAD_REQUEST', 'word timestamps come with response_format verbose_json', { param: 'timestamp_granularities[]' });
        }
        const signal = clientAbortSignal(request, reply);
        let decoded;
        try {
          decoded = await audio.decode(file, { maxSeconds: MAX_AUDIO_SECONDS, signal });
        } catch (error) {
          throw error instanceof ShoalError && error.param === null ? new ShoalError(error.code, error.message, { param: 'file', cause: error.cause }) : error;
        }
        const task: TranscribeTask = {
          kind: 'transcribe',
          model: form.model,
          audio: encodeTaskAudio(decoded.samples),
          language: form.language ?? null,
          prompt: form.prompt ?? null,
          translate,
          wordTimestamps: granularities.includes('word'),
          temperature: form.temperature ?? 0,
        };
        const started = await startTask(dispatcher, task, signal);
        reply.header(QUEUE_POSITION_HEADER, started.queuedAt);
        const answer = await collectAnswer(started.events, false);
        if (answer.transcript === null) throw new ShoalError('INTERNAL', 'the transcription ended without its transcript');
        const { type: _type, ...transcript } = answer.transcript;
        const body = formatTranscript(transcript, format, { granularities, task: translate ? 'translate' : 'transcribe' });
        await reply.type(body.contentType).send(body.body);
      });
    }
  });
}
