// Chat with any model the cluster serves: the reply streams in (POST /v1/chat/completions with
// stream: true, read with fetch), Stop aborts it (the node cancels the generation when the connection
// closes), answers are rendered as markdown, and each shows its speed and time to first token. A
// vision model (its card says `capabilities.vision`, GET /models) also takes images: picked, pasted
// or dropped, checked against the node's limits here, and sent as OpenAI `image_url` data-URL parts.
// The conversation is kept in this browser (its images too, while the storage has room).
// Voice: the microphone button transcribes into the message box (components/Dictate.tsx), each answer
// can be spoken by the node's voice (POST /v1/audio/speech, played through Web Audio), and voice mode
// talks over WS /v1/realtime (components/VoiceMode.tsx), its turns joining the conversation.

import { useCallback, useEffect, useRef, useState, type ClipboardEvent, type DragEvent, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { api, getApiKey, inference, inferenceGet, readEvents, setApiKey } from '../api.js';
import { Player } from '../audio/devices.js';
import { Empty, ErrorBox } from '../components/Bits.js';
import { Dictate } from '../components/Dictate.js';
import { Markdown } from '../components/Markdown.js';
import { useVoiceMode, VoiceBar } from '../components/VoiceMode.js';
import { AnswerClock, chatModelIds, readChatChunk } from '../lib/chat.js';
import { formatDuration, formatNumber } from '../lib/format.js';
import { checkImageFile, dataUrlBytes, IMAGE_ACCEPT, imageBudget, imageSupport, messageContent, sniffDataUrl } from '../lib/images.js';
import type { VoiceTurn } from '../lib/realtime.js';
import { SPEECH_VOICE, speechText, transcriptionModel, voiceModel } from '../lib/speech.js';
import type { ModelListView, ModelView } from '../lib/types.js';
import { useLive } from '../live.js';

interface Message {
  role: 'user' | 'assistant';
  content: string;
  /** User only: the attached images, as data URLs. */
  images?: string[];
  /** User only: images this message had that the browser's storage had no room to keep. */
  imagesNotKept?: number;
  reasoning?: string;
  /** Assistant only. */
  model?: string;
  stats?: { tokens: number; tokensPerS: number | null; ttftMs: number | null };
  stopped?: boolean;
  finishReason?: string | null;
  error?: string;
  streaming?: boolean;
  /** Said in voice mode (the user's transcript, or the reply that was spoken). */
  voice?: boolean;
  /** A spoken reply the user talked over. */
  interrupted?: boolean;
}

interface Conversation {
  model: string;
  maxTokens: number;
  temperature: number;
  /** Speak each answer when it has arrived. */
  speakReplies?: boolean;
  messages: Message[];
}

const KEY = 'shoal.chat';
const DEFAULT: Conversation = { model: '', maxTokens: 512, temperature: 0.7, speakReplies: false, messages: [] };
/** Re-render a streaming answer at most this often: markdown is re-read on every render. */
const RENDER_EVERY_MS = 50;

function load(): Conversation {
  try {
    const raw = localStorage.getItem(KEY);
    if (!raw) return DEFAULT;
    const parsed = JSON.parse(raw) as Partial<Conversation>;
    return {
      ...DEFAULT,
      ...parsed,
      // An answer that was streaming when the page closed is over.
      messages: (parsed.messages ?? []).map((m) => (m.streaming ? { ...m, streaming: false, stopped: true } : m)),
    };
  } catch {
    return DEFAULT;
  }
}

/** The conversation without its images, which are what fills the storage. */
function withoutImages(conversation: Conversation): Conversation {
  return {
    ...conversation,
    messages: conversation.messages.map((m) => (m.images?.length ? { ...m, images: undefined, imagesNotKept: (m.imagesNotKept ?? 0) + m.images.length } : m)),
  };
}

function save(conversation: Conversation): void {
  try {
    localStorage.setItem(KEY, JSON.stringify(conversation));
    return;
  } catch {
    // Full (images are large) or disabled: try once more without the images.
  }
  try {
    localStorage.setItem(KEY, JSON.stringify(withoutImages(conversation)));
  } catch {
    // Disabled storage: the conversation lasts for this page.
  }
}

/** An image in the composer, waiting to be sent. */
interface Attachment {
  key: number;
  name: string;
  url: string;
}

function readDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(typeof reader.result === 'string' ? reader.result : '');
    reader.onerror = () => reject(reader.error ?? new Error('the file could not be read'));
    reader.readAsDataURL(file);
  });
}

function Thumbnails({ images, label }: { images: string[]; label: string }): ReactNode {
  return (
    <div className="thumbs">
      {images.map((url, i) => (
        <img key={i} className="thumb" src={url} alt={`${label} ${i + 1}`} data-thumb />
      ))}
    </div>
  );
}

function AnswerMeta({ message }: { message: Message }): ReactNode {
  const parts: string[] = [];
  if (message.model) parts.push(message.model);
  if (message.stats) {
    parts.push(`${message.stats.tokens} tokens`);
    if (message.stats.tokensPerS !== null) parts.push(`${formatNumber(message.stats.tokensPerS)} tokens/s`);
    if (message.stats.ttftMs !== null) parts.push(`first token ${formatDuration(message.stats.ttftMs)}`);
  }
  if (message.stopped) parts.push('stopped');
  else if (message.finishReason === 'length') parts.push('cut at the token limit');
  return (
    <div className="answer-meta" data-answer-meta>
      {parts.join(' · ')}
    </div>
  );
}

/** Where speaking one answer stands: asking the voice, playing (with the audio's length), or failed. */
type Speaking = { index: number; phase: 'loading' } | { index: number; phase: 'playing'; durationS: number } | { index: number; phase: 'failed'; error: string };

interface SpeakControl {
  state: Speaking | null;
  /** Null when the node has a voice; otherwise why answers cannot be spoken. */
  unavailable: string | null;
  speak(index: number): void;
  stop(): void;
}

function SpeakButton({ index, control }: { index: number; control: SpeakControl }): ReactNode {
  const mine = control.state?.index === index ? control.state : null;
  if (mine && mine.phase !== 'failed') {
    return (
      <button type="button" className="speak-button" onClick={control.stop} aria-label="Stop speaking" data-speaking={mine.phase} data-audio-duration={mine.phase === 'playing' ? mine.durationS.toFixed(3) : undefined}>
        ■ {mine.phase === 'loading' ? 'Speaking…' : 'Stop'}
      </button>
    );
  }
  return (
    <>
      <span className="attach" title={control.unavailable ?? 'Read this answer aloud'}>
        <button type="button" className="speak-button" onClick={() => control.speak(index)} disabled={control.unavailable !== null} aria-label="Speak this answer" title={control.unavailable ?? 'Read this answer aloud'} data-speak>
          ▶ Speak
        </button>
      </span>
      {mine?.phase === 'failed' && (
        <span className="attach-error" role="alert" data-speak-error>
          {mine.error}
        </span>
      )}
    </>
  );
}

function Bubble({ message, index, speak }: { message: Message; index: number; speak: SpeakControl | null }): ReactNode {
  return (
    <div className={`bubble bubble-${message.role}`} data-role={message.role} data-streaming={message.streaming || undefined} data-voice={message.voice || undefined}>
      {message.reasoning && (
        <details className="reasoning">
          <summary>Thinking</summary>
          <div className="pre-wrap">{message.reasoning}</div>
        </details>
      )}
      {message.images && message.images.length > 0 && <Thumbnails images={message.images} label="Attached image" />}
      {message.imagesNotKept ? (
        <div className="answer-meta" data-images-not-kept>
          {message.imagesNotKept === 1 ? '1 image' : `${message.imagesNotKept} images`} not kept: the browser's storage had no room
        </div>
      ) : null}
      {message.role === 'assistant' ? <Markdown text={message.content} /> : message.content !== '' && <div className="pre-wrap">{message.content}</div>}
      {message.streaming && <span className="typing" data-typing aria-label={message.content === '' ? 'waiting for the first token' : 'the answer is still coming'} />}
      {message.error && <ErrorBox title="The answer failed">{message.error}</ErrorBox>}
      {message.role === 'assistant' && !message.streaming && (
        <div className="answer-foot">
          <AnswerMeta message={message} />
          {speak && message.content.trim() !== '' && <SpeakButton index={index} control={speak} />}
        </div>
      )}
    </div>
  );
}

/** A voice-mode turn as the chat shows it while the session runs. */
function turnMessage(turn: VoiceTurn, model: string): Message {
  return {
    role: turn.role,
    content: turn.text,
    voice: true,
    ...(turn.role === 'assistant' ? { model } : {}),
    ...(turn.interrupted ? { interrupted: true, stopped: true } : {}),
    ...(turn.cutAtLimit ? { finishReason: 'length' } : {}),
    ...(turn.error ? { error: turn.error } : {}),
    ...(!turn.final ? { streaming: true } : {}),
  };
}

/**
 * The node's model cards, from the control route's model list: which models are built-in (random
 * weights, generated by the node) and which read images. Read only once the page has the node's
 * state, which says the control routes let it in; null until then or when the list cannot be read.
 */
function useModelCards(controlAccess: boolean, refresh: number): ModelView[] | null {
  const [cards, setCards] = useState<ModelView[] | null>(null);
  useEffect(() => {
    if (!controlAccess) return;
    let live = true;
    api<ModelListView>('GET', 'models').then(
      (list) => live && setCards(list.models),
      () => undefined, // No notice is better than an error box about a hint; images stay off.
    );
    return () => {
      live = false;
    };
  }, [controlAccess, refresh]);
  return cards;
}

export function ChatPage(): ReactNode {
  const { state } = useLive();
  const [conversation, setConversation] = useState<Conversation>(load);
  const [models, setModels] = useState<string[] | null>(null);
  /** Every id /v1/models lists (the voice and speech-to-text models too). */
  const [listed, setListed] = useState<string[] | null>(null);
  const [modelsError, setModelsError] = useState<string | null>(null);
  const [input, setInput] = useState('');
  const [streaming, setStreaming] = useState(false);
  const [keyInput, setKeyInput] = useState(getApiKey() ?? '');
  const abortRef = useRef<AbortController | null>(null);
  const endRef = useRef<HTMLDivElement>(null);
  const instanceCount = (state?.instances.length ?? 0) + (state?.models.length ?? 0);
  const cards = useModelCards(state !== null, instanceCount);
  const builtins = new Set((cards ?? []).filter((m) => m.origin === 'builtin').map((m) => m.id));
  const [attachments, setAttachments] = useState<Attachment[]>([]);
  const [attachError, setAttachError] = useState<string | null>(null);
  const [dragging, setDragging] = useState(false);
  const fileRef = useRef<HTMLInputElement>(null);
  const nextKey = useRef(0);
  const images = imageSupport(conversation.model, cards);
  const chatIds = models === null ? null : chatModelIds(models, cards);
  useEffect(() => {
    // A model the cards show does not chat (read after the list) gives way to the first that does.
    if (chatIds !== null && chatIds.length > 0 && !chatIds.includes(conversation.model)) setConversation((c) => ({ ...c, model: chatIds[0]! }));
  }, [chatIds, conversation.model]);
  // A model is ready when any of its runners is (cluster instances, or this node's own runners).
  const readiness = new Map<string, boolean>();
  for (const m of state?.models ?? []) readiness.set(m.modelId, readiness.get(m.modelId) === true || m.state === 'ready');
  for (const i of state?.instances ?? []) readiness.set(i.modelId, readiness.get(i.modelId) === true || i.runners.some((r) => r.state === 'ready'));

  useEffect(() => {
    save(conversation);
  }, [conversation]);
  useEffect(() => {
    // Newer Chromium returns a promise here: an effect must not return it.
    void endRef.current?.scrollIntoView({ block: 'end' });
  }, [conversation.messages]);
  useEffect(
    () => () => {
      abortRef.current?.abort();
    },
    [],
  );

  const loadModels = useCallback(async () => {
    try {
      const res = await inferenceGet<{ data: { id: string }[] }>('v1/models');
      // The voice never chats; models whose cards say they do not are dropped below, once the cards are read.
      const all = res.data.map((m) => m.id);
      const ids = chatModelIds(all, null);
      setListed(all);
      setModels(ids);
      setModelsError(null);
      setConversation((c) => (ids.length > 0 && !ids.includes(c.model) ? { ...c, model: ids[0]! } : c));
    } catch (e) {
      setModelsError(errorMessage(e));
    }
  }, []);
  useEffect(() => {
    void loadModels();
  }, [loadModels, instanceCount]);

  // Voice: dictation's model, the voice, speaking answers, voice mode.
  const stt = transcriptionModel(listed, cards);
  const voice = voiceModel(listed);
  const [voiceProblem, setVoiceProblem] = useState<string | null>(null);
  const [speaking, setSpeaking] = useState<Speaking | null>(null);
  const speakAbort = useRef<AbortController | null>(null);
  const player = useRef<Player | null>(null);
  const stopSpeaking = useCallback((): void => {
    speakAbort.current?.abort();
    speakAbort.current = null;
    player.current?.stop();
    setSpeaking((s) => (s?.phase === 'failed' ? s : null));
  }, []);
  useEffect(
    () => () => {
      speakAbort.current?.abort();
      player.current?.close();
    },
    [],
  );
  const speakText = async (index: number, markdown: string): Promise<void> => {
    stopSpeaking();
    if (voice.model === null) {
      setSpeaking({ index, phase: 'failed', error: voice.reason });
      return;
    }
    const { text } = speechText(markdown);
    if (text === '') return;
    const controller = new AbortController();
    speakAbort.current = controller;
    setSpeaking({ index, phase: 'loading' });
    try {
      const res = await inference('v1/audio/speech', { model: voice.model, voice: SPEECH_VOICE, input: text, response_format: 'wav' }, controller.signal);
      const bytes = await res.arrayBuffer();
      if (controller.signal.aborted) return;
      player.current ??= new Player(() => setSpeaking((s) => (s?.phase === 'playing' ? null : s)));
      const durationS = await player.current.playFile(bytes);
      if (!controller.signal.aborted) setSpeaking({ index, phase: 'playing', durationS });
    } catch (e) {
      if (!controller.signal.aborted) setSpeaking({ index, phase: 'failed', error: `the answer could not be spoken: ${errorMessage(e)}` });
    } finally {
      if (speakAbort.current === controller) speakAbort.current = null;
    }
  };
  const speakControl: SpeakControl = {
    state: speaking,
    unavailable: voice.model === null && listed !== null ? voice.reason : null,
    speak: (index) => void speakText(index, conversation.messages[index]?.content ?? ''),
    stop: stopSpeaking,
  };
  const voiceMode = useVoiceMode({ model: conversation.model, transcriptionModel: stt.model, maxOutputTokens: conversation.maxTokens, history: conversation.messages });
  const voiceTurns = !voiceMode.active ? [] : voiceMode.state.turns.filter((t) => t.text !== '' || !t.final || t.error);
  // Final turns join the conversation when the session ends, in the order they were said.
  const endedTurns = useRef<VoiceTurn[]>([]);
  endedTurns.current = voiceMode.state.turns;
  useEffect(() => {
    if (voiceMode.active) return;
    const turns = endedTurns.current.filter((t) => t.text !== '');
    if (turns.length === 0) return;
    setConversation((c) => ({ ...c, messages: [...c.messages, ...turns.map((t) => ({ ...turnMessage(t, c.model), streaming: false }))] }));
    endedTurns.current = [];
  }, [voiceMode.active]);
  const voiceReason = conversation.model === '' ? 'Pick a model first' : voice.model === null ? voice.reason : stt.model === null ? `Voice mode needs a speech-to-text model: ${stt.reason}` : null;

  const patchLast = (patch: Partial<Message>): void =>
    setConversation((c) => {
      const messages = c.messages.slice();
      const last = messages[messages.length - 1];
      if (last) messages[messages.length - 1] = { ...last, ...patch };
      return { ...c, messages };
    });

  /** The images the next request carries so far: the conversation's and those attached. */
  const carried = (): string[] => [...conversation.messages.filter((m) => !m.error).flatMap((m) => m.images ?? []), ...attachments.map((a) => a.url)];

  const attach = async (files: File[]): Promise<void> => {
    if (files.length === 0) return;
    if (!images.enabled) {
      setAttachError(images.reason);
      return;
    }
    const budget = imageBudget(carried());
    const added: Attachment[] = [];
    const problems: string[] = [];
    for (const file of files) {
      const problem = checkImageFile(file, budget);
      if (problem) {
        problems.push(problem);
        continue;
      }
      let url: string;
      try {
        url = await readDataUrl(file);
      } catch (e) {
        problems.push(`'${file.name}' could not be read: ${errorMessage(e)}`);
        continue;
      }
      if (sniffDataUrl(url) === null) {
        problems.push(`${file.name === '' ? 'the pasted image' : `'${file.name}'`} is not PNG, JPEG, GIF or WEBP data, whatever its name says`);
        continue;
      }
      budget.count += 1;
      budget.bytes += dataUrlBytes(url);
      added.push({ key: nextKey.current++, name: file.name, url });
    }
    setAttachments((a) => [...a, ...added]);
    setAttachError(problems.length > 0 ? problems.join('; ') : null);
  };

  const fileList = (list: FileList | null | undefined): File[] => [...(list ?? [])];

  const onPaste = (e: ClipboardEvent<HTMLTextAreaElement>): void => {
    const files = [...e.clipboardData.items].filter((item) => item.kind === 'file' && item.type.startsWith('image/')).map((item) => item.getAsFile()).filter((f): f is File => f !== null);
    if (files.length === 0) return; // Text: the textarea takes it.
    e.preventDefault();
    void attach(files);
  };

  const onDrop = (e: DragEvent<HTMLFormElement>): void => {
    setDragging(false);
    if (![...e.dataTransfer.types].includes('Files')) return;
    e.preventDefault();
    void attach(fileList(e.dataTransfer.files));
  };

  const send = async (): Promise<void> => {
    const text = input.trim();
    if ((text === '' && attachments.length === 0) || streaming || voiceMode.active || conversation.model === '') return;
    if (attachments.length > 0 && !images.enabled) {
      setAttachError(`${images.reason}: remove the images or pick a vision model`);
      return;
    }
    const sent = attachments.map((a) => a.url);
    const history: Message[] = [...conversation.messages.filter((m) => !m.error), { role: 'user', content: text, ...(sent.length > 0 ? { images: sent } : {}) }];
    setInput('');
    setAttachments([]);
    setAttachError(null);
    setConversation((c) => ({ ...c, messages: [...history, { role: 'assistant', content: '', model: c.model, streaming: true }] }));
    setStreaming(true);
    const controller = new AbortController();
    abortRef.current = controller;
    const clock = new AnswerClock(performance.now());
    let content = '';
    let reasoning = '';
    let finishReason: string | null = null;
    let lastRender = 0;
    let failure: string | undefined;
    try {
      const res = await inference(
        'v1/chat/completions',
        {
          model: conversation.model,
          messages: history.map((m) => ({ role: m.role, content: m.role === 'user' ? messageContent(m.content, m.images) : m.content })),
          stream: true,
          stream_options: { include_usage: true },
          max_tokens: conversation.maxTokens,
          temperature: conversation.temperature,
        },
        controller.signal,
      );
      await readEvents(
        res,
        (event) => {
          const chunk = readChatChunk(event.data);
          if (chunk.error) throw new Error(chunk.error);
          if (chunk.content !== '' || chunk.reasoning !== '') clock.token(performance.now());
          if (chunk.completionTokens !== null) clock.usage(chunk.completionTokens);
          if (chunk.finishReason) finishReason = chunk.finishReason;
          content += chunk.content;
          reasoning += chunk.reasoning;
          const now = performance.now();
          if (now - lastRender >= RENDER_EVERY_MS) {
            lastRender = now;
            patchLast({ content, reasoning: reasoning || undefined });
          }
        },
        controller.signal,
      );
    } catch (e) {
      if (!controller.signal.aborted) failure = errorMessage(e);
    } finally {
      abortRef.current = null;
      setStreaming(false);
      patchLast({ content, reasoning: reasoning || undefined, streaming: false, stopped: controller.signal.aborted, finishReason, stats: clock.stats(), error: failure });
      if (conversation.speakReplies && failure === undefined && !controller.signal.aborted && content.trim() !== '') void speakText(history.length, content);
    }
  };

  const setOption = (patch: Partial<Conversation>): void => setConversation((c) => ({ ...c, ...patch }));
  const unauthorized = modelsError !== null && /API key/i.test(modelsError);

  return (
    <div className="page chat-page">
      <div className="chat-bar">
        <label>
          Model
          <select aria-label="Model" value={conversation.model} onChange={(e) => setOption({ model: e.target.value })} disabled={streaming || voiceMode.active || !chatIds?.length}>
            {(chatIds ?? []).map((id) => (
              <option key={id} value={id}>
                {id}
                {readiness.get(id) === false ? ' (starting)' : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          Max tokens
          <input type="number" min={1} max={32768} value={conversation.maxTokens} onChange={(e) => setOption({ maxTokens: Math.max(1, Number(e.target.value) || 1) })} aria-label="Max tokens" />
        </label>
        <label>
          Temperature
          <input type="number" min={0} max={2} step={0.1} value={conversation.temperature} onChange={(e) => setOption({ temperature: Math.min(2, Math.max(0, Number(e.target.value) || 0)) })} aria-label="Temperature" />
        </label>
        <label className="check" title={voice.model === null ? voice.reason : 'Read each answer aloud when it has arrived'}>
          <input type="checkbox" aria-label="Speak replies" checked={conversation.speakReplies === true} disabled={voice.model === null} onChange={(e) => setOption({ speakReplies: e.target.checked })} />
          Speak replies
        </label>
        <button
          type="button"
          onClick={() => {
            stopSpeaking();
            setSpeaking(null);
            setConversation((c) => ({ ...c, messages: [] }));
            setAttachError(null);
          }}
          disabled={streaming || voiceMode.active || conversation.messages.length === 0}
        >
          New chat
        </button>
      </div>
      {modelsError && (
        <ErrorBox title={unauthorized ? 'This node needs an API key' : 'Cannot list the models'}>
          <p>{modelsError}</p>
          {unauthorized && (
            <form
              className="inline-form"
              onSubmit={(e) => {
                e.preventDefault();
                setApiKey(keyInput);
                void loadModels();
              }}
            >
              <input type="password" aria-label="API key" value={keyInput} onChange={(e) => setKeyInput(e.target.value)} placeholder="API key" />
              <button type="submit">Use key</button>
            </form>
          )}
        </ErrorBox>
      )}
      {builtins.has(conversation.model) && (
        <p className="model-notice" role="note" data-random-model={conversation.model}>
          <strong>{conversation.model}</strong> is a built-in test model with random weights: its answers are gibberish by design. For real answers, add a model on the{' '}
          <a href="#/models">Models page</a> and launch it.
        </p>
      )}
      {chatIds !== null && chatIds.length === 0 && <Empty>No model is running: launch one on the Models page.</Empty>}
      <div className="messages" aria-live="polite">
        {conversation.messages.length === 0 && voiceTurns.length === 0 && <Empty>Ask anything. Answers stream from the cluster; the conversation stays in this browser.</Empty>}
        {conversation.messages.map((m, i) => (
          <Bubble key={i} message={m} index={i} speak={m.role === 'assistant' ? speakControl : null} />
        ))}
        {voiceTurns.map((t) => (
          <Bubble key={`voice-${t.role}-${t.key}`} message={turnMessage(t, conversation.model)} index={-1} speak={null} />
        ))}
        <div ref={endRef} />
      </div>
      <div className="composer-area">
        <VoiceBar session={voiceMode} disabled={voiceReason !== null || streaming} reason={voiceReason} />
        {voiceProblem && (
          <p className="attach-error" role="alert" data-dictate-error>
            {voiceProblem}
          </p>
        )}
        {(attachments.length > 0 || attachError) && (
          <div className="attachments" data-attachments>
            {attachments.map((a, i) => (
              <figure key={a.key} className="attachment" data-attachment>
                <img className="thumb" src={a.url} alt={`Image to send ${i + 1}${a.name ? `: ${a.name}` : ''}`} data-thumb />
                <button type="button" className="attachment-remove" aria-label={`Remove ${a.name || `image ${i + 1}`}`} title="Remove" onClick={() => setAttachments((list) => list.filter((x) => x.key !== a.key))}>
                  ×
                </button>
              </figure>
            ))}
            {attachError && (
              <p className="attach-error" role="alert" data-attach-error>
                {attachError}
              </p>
            )}
          </div>
        )}
        <form
          className={`composer${dragging ? ' composer-drop' : ''}`}
          onSubmit={(e) => {
            e.preventDefault();
            void send();
          }}
          onDragOver={(e) => {
            if (![...e.dataTransfer.types].includes('Files')) return;
            e.preventDefault();
            e.dataTransfer.dropEffect = images.enabled ? 'copy' : 'none';
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={onDrop}
        >
          <span className="attach" title={images.reason}>
            <button type="button" aria-label="Attach image" title={images.reason} disabled={!images.enabled || streaming} onClick={() => fileRef.current?.click()} data-attach>
              + Image
            </button>
            <input
              ref={fileRef}
              type="file"
              accept={IMAGE_ACCEPT}
              multiple
              hidden
              disabled={!images.enabled}
              aria-label="Image files"
              onChange={(e) => {
                const files = fileList(e.target.files);
                e.target.value = '';
                void attach(files);
              }}
            />
          </span>
          <Dictate
            model={stt}
            disabled={streaming || voiceMode.active}
            onProblem={setVoiceProblem}
            onText={(text) => {
              if (text === '') {
                setVoiceProblem(`${stt.model ?? 'the model'} heard no words in the recording: speak closer to the microphone, or longer`);
                return;
              }
              setInput((current) => (current.trim() === '' ? text : `${current.replace(/\s+$/, '')} ${text}`));
            }}
          />
          <textarea
            aria-label="Message"
            placeholder={images.enabled ? 'Message (Enter to send, Shift+Enter for a new line; paste or drop images)' : 'Message (Enter to send, Shift+Enter for a new line)'}
            value={input}
            rows={2}
            onChange={(e) => setInput(e.target.value)}
            onPaste={onPaste}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
                e.preventDefault();
                void send();
              }
            }}
          />
          {streaming ? (
            <button type="button" className="danger" onClick={() => abortRef.current?.abort()}>
              Stop
            </button>
          ) : (
            <button type="submit" className="primary" title={voiceMode.active ? 'Voice mode is on: stop it to send typed messages' : undefined} disabled={(input.trim() === '' && attachments.length === 0) || conversation.model === '' || voiceMode.active}>
              Send
            </button>
          )}
        </form>
      </div>
    </div>
  );
}
