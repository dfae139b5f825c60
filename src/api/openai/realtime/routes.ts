// `GET /v1/realtime`, the OpenAI realtime API's WebSocket (docs/API.md, Realtime), inside the OpenAI
// family's plugin: its API key check and error shape answer a refused upgrade before it happens.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebsocketPluginOptions } from '@fastify/websocket';
import { ShoalError } from '../../../common/errors.js';
import { checkRequestHost } from '../../control/request-origin.js';
import type { Dispatcher } from '../../dispatch.js';
import type { SpeechControl } from '../../speech-port.js';
import { REALTIME_PCM_RATE_HZ } from './protocol.js';
import { DEFAULT_TURN_DETECTION, type Settings } from './session.js';
import { defaultTranscriptionModel, MAX_FRAME_BYTES, RealtimeConnection } from './socket.js';
import { loadFvad } from './vad.js';

export const REALTIME_PATH = '/v1/realtime';
/** Realtime sessions one node holds at once; the next upgrade is a 429 until one closes. */
export const MAX_REALTIME_SESSIONS = 8;
/** The voice a session speaks with until it names one: OpenAI's default. */
const DEFAULT_VOICE = 'alloy';

/**
 * For @fastify/websocket, registered once at the server's root. A browser that offers subprotocols
 * fails the socket unless one is chosen: `realtime` where offered (OpenAI's browser client offers it
 * beside its key), else the first.
 */
export const REALTIME_WEBSOCKET_OPTIONS: WebsocketPluginOptions = {
  options: {
    maxPayload: MAX_FRAME_BYTES,
    handleProtocols: (protocols) => (protocols.has('realtime') ? 'realtime' : ([...protocols][0] ?? false)),
  },
};

const Query = (query: unknown): { model: string | null; intent: string | null } => {
  const q = (query ?? {}) as Record<string, unknown>;
  const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value.slice(0, 200) : null);
  return { model: text(q.model), intent: text(q.intent) };
};

/** The session a connection starts with: a transcription session for a speech-to-text model or `intent=transcription`, else a voice loop with `model`. */
function initialSettings(request: FastifyRequest, dispatcher: Dispatcher): Settings {
  const { model, intent } = Query(request.query);
  const models = dispatcher.models();
  const listed = models.find((m) => m.id === model);
  const transcribes = listed?.capabilities.includes('transcription') === true;
  const transcriptionModel = transcribes ? model : defaultTranscriptionModel(dispatcher);
  return {
    type: transcribes || intent === 'transcription' ? 'transcription' : 'realtime',
    model: (transcribes ? null : model) ?? models.find((m) => m.capabilities.includes('chat'))?.id ?? '',
    instructions: '',
    modality: 'audio',
    maxOutputTokens: 'inf',
    inputRateHz: REALTIME_PCM_RATE_HZ,
    transcription: { model: transcriptionModel, language: null, prompt: '' },
    turnDetection: DEFAULT_TURN_DETECTION,
    voice: DEFAULT_VOICE,
    speed: 1,
  };
}

export async function realtimeRoutes(app: FastifyInstance, options: { dispatcher: Dispatcher; speech: SpeechControl }): Promise<void> {
  const fvad = await loadFvad();
  let open = 0;
  app.route({
    method: 'GET',
    url: REALTIME_PATH,
    // The Origin check is the CORS hook's (src/api/cors.ts), which runs for upgrades too: browsers apply no CORS to WebSockets.
    onRequest: async (request) => {
      checkRequestHost(request, `${REALTIME_PATH}`);
      if (open >= MAX_REALTIME_SESSIONS) {
        throw new ShoalError('QUEUE_FULL', `this node holds ${MAX_REALTIME_SESSIONS} realtime sessions already: close one, or connect to another node`);
      }
    },
    handler: async () => {
      throw new ShoalError('BAD_REQUEST', `${REALTIME_PATH} is a WebSocket: connect with 'Upgrade: websocket' (the openai client's OpenAIRealtimeWS)`);
    },
    wsHandler: (socket, request) => {
      // Upgrades that passed the check together: the ones past the limit close at once.
      if (open >= MAX_REALTIME_SESSIONS) {
        socket.close(1013, `this node holds ${MAX_REALTIME_SESSIONS} realtime sessions already`);
        return;
      }
      open += 1;
      const settings = initialSettings(request, options.dispatcher);
      new RealtimeConnection(socket, { dispatcher: options.dispatcher, speech: options.speech, fvad, log: request.log }, settings, () => (open -= 1));
    },
  });
}
