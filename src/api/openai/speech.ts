import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { ShoalError, toShoalError } from '../../common/errors.js';
import type { Dispatcher } from '../dispatch.js';
import type { AudioFormat, SpeechChunk, SpeechControl } from '../speech-port.js';
import { clientAbortSignal, SSE_HEADERS, writeSseData } from '../stream.js';
import { parseBody } from '../validation.js';
import { toOpenAIError } from './errors.js';
import { SpeechRequestBody } from './schemas.js';

const CONTENT_TYPES: Readonly<Record<AudioFormat, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

/**
 * `POST /v1/audio/speech`, inside the OpenAI family's plugin (its API key check and error shape).
 * The audio goes out as it is encoded: raw bytes by default (`stream_format: "audio"`), or
 * `speech.audio.delta` events with base64 audio and a final `speech.audio.done` (`"sse"`).
 */
export function speechRoutes(app: FastifyInstance, speech: SpeechControl, dispatcher: Dispatcher): void {
  app.post('/v1/audio/speech', async (request, reply) => {
    const body = parseBody(SpeechRequestBody, request.body);
    if (body.model !== speech.modelId) {
      if (dispatcher.models().some((m) => m.id === body.model)) {
        throw new ShoalError('CAPABILITY_MISSING', `model '${body.model}' is a text model: text to speech is served by '${speech.modelId}'`, { param: 'model' });
      }
      throw new ShoalError('MODEL_NOT_FOUND', `model '${body.model}' does not exist on this cluster: text to speech is served by '${speech.modelId}'`, { param: 'model' });
    }
    const characters = [...body.input].length;
    if (characters > speech.maxInputChars) {
      throw new ShoalError('BAD_REQUEST', `'input' has ${characters} characters, more than the ${speech.maxInputChars} one request may have: split the text`, { param: 'input' });
    }
    const format = body.response_format ?? 'mp3';
    const signal = clientAbortSignal(request, reply);
    const chunks = await speech.synthesize({ text: body.input, voice: body.voice, speed: body.speed ?? 1, format }, signal);
    if (body.stream_format !== 'sse') {
      // A failure after the headers went out ends the response early; the client sees a cut stream.
      return reply.type(CONTENT_TYPES[format]).send(Readable.from(bytesOf(chunks)));
    }
    reply.hijack();
    reply.raw.writeHead(200, SSE_HEADERS);
    try {
      for await (const chunk of chunks) writeSseData(reply, { type: 'speech.audio.delta', audio: Buffer.from(chunk.bytes).toString('base64') });
      writeSseData(reply, { type: 'speech.audio.done' });
    } catch (error) {
      const failure = toShoalError(error);
      if (failure.code !== 'CANCELLED') {
        reply.log.warn({ code: failure.code }, `speech stream failed: ${failure.message}`);
        writeSseData(reply, toOpenAIError(failure).body);
      }
    } finally {
      reply.raw.end();
    }
  });
}

async function* bytesOf(chunks: AsyncIterable<SpeechChunk>): AsyncGenerator<Buffer> {
  for await (const chunk of chunks) yield Buffer.from(chunk.bytes.buffer, chunk.bytes.byteOffset, chunk.bytes.byteLength);
}
