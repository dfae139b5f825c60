// Which of the node's models the chat page's voice features use, what they say when there is none, and
// the text a reply is spoken from.

import { VOICE_MODEL_ID } from './chat.js';

/** What the page knows of a model's card (GET /models): enough to tell a speech-to-text model. */
export interface TaskHint {
  id: string;
  tasks: readonly string[];
}

/** The voice answers are spoken in (one of OpenAI's names, which the node maps to eSpeak NG voices). */
export const SPEECH_VOICE = 'alloy';

/** The node's limit on `input` of /v1/audio/speech (MAX_INPUT_CHARS, docs/LIMITS.md), in code points. */
export const MAX_SPEECH_INPUT_CHARS = 4096;

export type ModelPick = { model: string; reason: null } | { model: null; reason: string };

/**
 * The model to transcribe with: one listed in /v1/models (so it runs somewhere in the cluster) whose
 * card's tasks include `transcription`. Cards the page cannot read (no control access) leave it
 * unknown rather than guessed from names.
 */
export function transcriptionModel(listed: readonly string[] | null, cards: readonly TaskHint[] | null): ModelPick {
  if (listed === null) return { model: null, reason: 'the node\'s model list (GET /v1/models) has not been read yet' };
  if (cards === null) return { model: null, reason: 'cannot tell which model transcribes: the node\'s model cards (GET /models) are not readable from this page' };
  const transcribes = new Set(cards.filter((c) => c.tasks.includes('transcription')).map((c) => c.id));
  const model = listed.find((id) => transcribes.has(id));
  if (model !== undefined) return { model, reason: null };
  const known = cards.filter((c) => transcribes.has(c.id)).map((c) => c.id);
  return {
    model: null,
    reason:
      known.length > 0
        ? `no speech-to-text model is running: launch ${known.join(' or ')} on the Models page`
        : 'no speech-to-text model is running: add a whisper model card on the Models page and launch it',
  };
}

/** The voice to speak with: the node's built-in voice when it lists it. */
export function voiceModel(listed: readonly string[] | null): ModelPick {
  if (listed === null) return { model: null, reason: 'the node\'s model list (GET /v1/models) has not been read yet' };
  if (listed.includes(VOICE_MODEL_ID)) return { model: VOICE_MODEL_ID, reason: null };
  return { model: null, reason: `this node lists no voice (${VOICE_MODEL_ID}) in GET /v1/models: it cannot speak` };
}

/**
 * What a reply is spoken from: its markdown's marks dropped (a voice reading "asterisk" helps no one),
 * code blocks said to be there rather than read out, and cut to the node's input limit.
 */
export function speechText(markdown: string): { text: string; cut: boolean } {
  const plain = markdown
    .replace(/```[\s\S]*?(```|$)/g, ' (code) ')
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/^\s{0,3}(#{1,6}|>|[-*+]|\d+[.)])\s+/gm, '')
    .replace(/(\*\*|\*|~~)(?=\S)([\s\S]*?\S)\1/g, '$2')
    // Underscores mark emphasis only at word edges: snake_case names keep theirs.
    .replace(/(^|[^\w])(__|_)(?=\S)([\s\S]*?\S)\2(?!\w)/g, '$1$3')
    .replace(/\s+/g, ' ')
    .trim();
  const points = [...plain];
  if (points.length <= MAX_SPEECH_INPUT_CHARS) return { text: plain, cut: false };
  return { text: points.slice(0, MAX_SPEECH_INPUT_CHARS).join(''), cut: true };
}

/** The words for a microphone that could not be opened (getUserMedia's DOMException names). */
export function microphoneProblem(name: string, message: string): string {
  switch (name) {
    case 'NotAllowedError':
    case 'SecurityError':
      return 'the browser was not allowed to use the microphone: allow it for this page (the icon at the left of the address bar) and try again';
    case 'NotFoundError':
    case 'OverconstrainedError':
      return 'no microphone was found: plug one in (or pick one in the browser\'s settings) and try again';
    case 'NotReadableError':
    case 'AbortError':
      return 'the microphone is in use by another program or could not be started: close that program and try again';
    case 'insecure':
      return 'the browser offers the microphone only to pages on https or on localhost: open the dashboard at http://localhost:<port> or over https';
    default:
      return `the microphone could not be opened (${name}: ${message})`;
  }
}
