// Voice mode: a conversation by voice over `WS /v1/realtime` (docs/API.md). The microphone streams as
// PCM16 at 24 kHz; the node's voice activity detection decides when the user has spoken, transcribes,
// asks the chat model and speaks the reply, whose audio chunks are queued back to back here. The turns
// show as chat messages while the session runs and join the conversation when they are final.

import { useCallback, useEffect, useReducer, useRef, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { getApiKey } from '../api.js';
import { MicrophoneError, openMicrophone, Player, type Microphone } from '../audio/devices.js';
import { REALTIME_SAMPLE_RATE, StreamResampler, base64ToBytes, bytesToBase64, floatToPcm16, pcm16Bytes, pcm16BytesToFloat } from '../lib/audio.js';
import { SPEECH_VOICE } from '../lib/speech.js';
import { appendAudio, historyItems, readServerEvent, realtimeProtocols, realtimeUrl, reduceVoice, sessionUpdate, VOICE_START, voiceClosed, voiceOpened, type ServerEvent, type VoiceState } from '../lib/realtime.js';

type Action = { kind: 'event'; event: ServerEvent } | { kind: 'opened' } | { kind: 'closed'; code: number; reason: string; byUser: boolean } | { kind: 'reset' } | { kind: 'problem'; message: string };

function reducer(state: VoiceState, action: Action): VoiceState {
  switch (action.kind) {
    case 'event':
      return reduceVoice(state, action.event);
    case 'opened':
      return voiceOpened(state);
    case 'closed':
      return voiceClosed(state, action);
    case 'reset':
      return VOICE_START;
    case 'problem':
      return { ...state, error: action.message };
  }
}

/**
 * Unsent microphone audio the page lets the socket hold (docs/LIMITS.md): 2 s of PCM16 at 24 kHz as
 * base64. Past it chunks are dropped, not queued, so a stalled connection cannot grow the page.
 */
export const MAX_SOCKET_BUFFERED_BYTES = 128 * 1024;

export interface VoiceSession {
  state: VoiceState;
  active: boolean;
  start(): void;
  stop(): void;
}

export function useVoiceMode(options: { model: string; transcriptionModel: string | null; maxOutputTokens: number; history: readonly { role: 'user' | 'assistant'; content: string; error?: string }[] }): VoiceSession {
  const [state, dispatch] = useReducer(reducer, { ...VOICE_START, connection: 'closed' });
  const socket = useRef<WebSocket | null>(null);
  const mic = useRef<Microphone | null>(null);
  const player = useRef<Player | null>(null);
  const stopping = useRef(false);
  // Read when the socket opens, not a reason to rebuild start().
  const history = useRef(options.history);
  history.current = options.history;

  const teardown = useCallback(() => {
    mic.current?.stop();
    mic.current = null;
    player.current?.close();
    player.current = null;
    const ws = socket.current;
    socket.current = null;
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000, 'voice mode off');
  }, []);

  useEffect(() => teardown, [teardown]);

  const stop = useCallback(() => {
    stopping.current = true;
    teardown();
    dispatch({ kind: 'closed', code: 1000, reason: '', byUser: true });
  }, [teardown]);

  const start = useCallback(() => {
    if (socket.current) return;
    stopping.current = false;
    dispatch({ kind: 'reset' });
    const ws = new WebSocket(realtimeUrl(window.location.href, options.model), realtimeProtocols(getApiKey()));
    socket.current = ws;
    const out = new Player();
    player.current = out;
    let resampler: StreamResampler | null = null;
    ws.onopen = () => {
      dispatch({ kind: 'opened' });
      ws.send(JSON.stringify(sessionUpdate({ voice: SPEECH_VOICE, transcriptionModel: options.transcriptionModel, maxOutputTokens: options.maxOutputTokens })));
      for (const item of historyItems(history.current)) ws.send(JSON.stringify(item));
      void openMicrophone((chunk, rate) => {
        if (ws.readyState !== WebSocket.OPEN || ws.bufferedAmount > MAX_SOCKET_BUFFERED_BYTES) return;
        resampler ??= new StreamResampler(rate, REALTIME_SAMPLE_RATE);
        const pcm = resampler.push(chunk);
        if (pcm.length > 0) ws.send(JSON.stringify(appendAudio(bytesToBase64(pcm16Bytes(floatToPcm16(pcm))))));
      }).then(
        (opened) => {
          if (socket.current !== ws) opened.stop();
          else mic.current = opened;
        },
        (error: unknown) => {
          dispatch({ kind: 'problem', message: error instanceof MicrophoneError ? error.message : `the microphone could not be opened: ${errorMessage(error)}` });
          stopping.current = true;
          teardown();
          dispatch({ kind: 'closed', code: 1000, reason: '', byUser: true });
        },
      );
    };
    ws.onmessage = (message: MessageEvent) => {
      if (typeof message.data !== 'string') return;
      const event = readServerEvent(message.data);
      if (event.type === 'reply_audio') {
        try {
          out.playSamples(pcm16BytesToFloat(base64ToBytes(event.audio)), REALTIME_SAMPLE_RATE);
        } catch {
          dispatch({ kind: 'problem', message: 'the node sent reply audio that is not base64 PCM16' });
        }
        return;
      }
      // The user talking over a reply: what is queued of it stops at once.
      if (event.type === 'speech_started') out.stop();
      dispatch({ kind: 'event', event });
    };
    ws.onclose = (close: CloseEvent) => {
      const byUser = stopping.current;
      if (socket.current === ws) teardown();
      dispatch({ kind: 'closed', code: close.code, reason: close.reason, byUser });
    };
  }, [options.model, options.transcriptionModel, options.maxOutputTokens, teardown]);

  return { state, active: state.connection !== 'closed', start, stop };
}

const CONNECTION_WORDS: Record<VoiceState['connection'], string> = { connecting: 'connecting…', open: 'connected', closed: 'off' };

/** The voice-mode bar: the on/off control, the connection, and who is talking. */
export function VoiceBar({ session, disabled, reason }: { session: VoiceSession; disabled: boolean; reason: string | null }): ReactNode {
  const { state, active } = session;
  const activity = !active ? null : !state.ready ? 'starting…' : state.userSpeaking ? 'hearing you' : state.responding ? 'replying' : 'listening';
  return (
    <div className="voice-bar" data-voice-mode={state.connection}>
      {active ? (
        <button type="button" className="danger" onClick={session.stop} aria-label="Stop voice mode">
          ■ Voice mode
        </button>
      ) : (
        <span className="attach" title={reason ?? 'Talk with the model: it hears you and answers aloud'}>
          <button type="button" onClick={session.start} disabled={disabled} aria-label="Start voice mode" title={reason ?? 'Talk with the model: it hears you and answers aloud'}>
            Voice mode
          </button>
        </span>
      )}
      <span className="voice-status" data-voice-connection={state.connection}>
        {CONNECTION_WORDS[state.connection]}
        {activity && (
          <>
            {' · '}
            <span data-voice-activity={activity}>{activity}</span>
          </>
        )}
      </span>
      {state.error && (
        <span className="attach-error" role="alert" data-voice-error>
          {state.error}
        </span>
      )}
    </div>
  );
}
