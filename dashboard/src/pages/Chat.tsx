// Chat with any model the cluster serves: the reply streams in (POST /v1/chat/completions with
// stream: true, read with fetch), Stop aborts it (the node cancels the generation when the connection
// closes), answers are rendered as markdown, and each shows its speed and time to first token. The
// conversation is kept in this browser.

import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { getApiKey, inference, inferenceGet, readEvents, setApiKey } from '../api.js';
import { Empty, ErrorBox } from '../components/Bits.js';
import { Markdown } from '../components/Markdown.js';
import { AnswerClock, readChatChunk } from '../lib/chat.js';
import { formatDuration, formatNumber } from '../lib/format.js';
import { useLive } from '../live.js';

interface Message {
  role: 'user' | 'assistant';
  content: string;
  reasoning?: string;
  /** Assistant only. */
  model?: string;
  stats?: { tokens: number; tokensPerS: number | null; ttftMs: number | null };
  stopped?: boolean;
  finishReason?: string | null;
  error?: string;
  streaming?: boolean;
}

interface Conversation {
  model: string;
  maxTokens: number;
  temperature: number;
  messages: Message[];
}

const KEY = 'shoal.chat';
const DEFAULT: Conversation = { model: '', maxTokens: 512, temperature: 0.7, messages: [] };
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

function save(conversation: Conversation): void {
  try {
    localStorage.setItem(KEY, JSON.stringify(conversation));
  } catch {
    // Full or disabled storage: the conversation lasts for this page.
  }
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

function Bubble({ message }: { message: Message }): ReactNode {
  return (
    <div className={`bubble bubble-${message.role}`} data-role={message.role} data-streaming={message.streaming || undefined}>
      {message.reasoning && (
        <details className="reasoning">
          <summary>Thinking</summary>
          <div className="pre-wrap">{message.reasoning}</div>
        </details>
      )}
      {message.role === 'assistant' ? <Markdown text={message.content} /> : <div className="pre-wrap">{message.content}</div>}
      {message.streaming && message.content === '' && <span className="typing" aria-label="waiting for the first token" />}
      {message.error && <ErrorBox title="The answer failed">{message.error}</ErrorBox>}
      {message.role === 'assistant' && !message.streaming && <AnswerMeta message={message} />}
    </div>
  );
}

export function ChatPage(): ReactNode {
  const { state } = useLive();
  const [conversation, setConversation] = useState<Conversation>(load);
  const [models, setModels] = useState<string[] | null>(null);
  const [modelsError, setModelsError] = useState<string | null>(null);
  const [input, setInput] = useState('');
  const [streaming, setStreaming] = useState(false);
  const [keyInput, setKeyInput] = useState(getApiKey() ?? '');
  const abortRef = useRef<AbortController | null>(null);
  const endRef = useRef<HTMLDivElement>(null);
  const instanceCount = (state?.instances.length ?? 0) + (state?.models.length ?? 0);
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
      const ids = res.data.map((m) => m.id);
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

  const patchLast = (patch: Partial<Message>): void =>
    setConversation((c) => {
      const messages = c.messages.slice();
      const last = messages[messages.length - 1];
      if (last) messages[messages.length - 1] = { ...last, ...patch };
      return { ...c, messages };
    });

  const send = async (): Promise<void> => {
    const text = input.trim();
    if (text === '' || streaming || conversation.model === '') return;
    const history: Message[] = [...conversation.messages.filter((m) => !m.error), { role: 'user', content: text }];
    setInput('');
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
          messages: history.map((m) => ({ role: m.role, content: m.content })),
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
    }
  };

  const setOption = (patch: Partial<Conversation>): void => setConversation((c) => ({ ...c, ...patch }));
  const unauthorized = modelsError !== null && /API key/i.test(modelsError);

  return (
    <div className="page chat-page">
      <div className="chat-bar">
        <label>
          Model
          <select aria-label="Model" value={conversation.model} onChange={(e) => setOption({ model: e.target.value })} disabled={streaming || !models?.length}>
            {(models ?? []).map((id) => (
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
        <button type="button" onClick={() => setConversation((c) => ({ ...c, messages: [] }))} disabled={streaming || conversation.messages.length === 0}>
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
      {models !== null && models.length === 0 && <Empty>No model is running: launch one on the Models page.</Empty>}
      <div className="messages" aria-live="polite">
        {conversation.messages.length === 0 && <Empty>Ask anything. Answers stream from the cluster; the conversation stays in this browser.</Empty>}
        {conversation.messages.map((m, i) => (
          <Bubble key={i} message={m} />
        ))}
        <div ref={endRef} />
      </div>
      <form
        className="composer"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <textarea
          aria-label="Message"
          placeholder="Message (Enter to send, Shift+Enter for a new line)"
          value={input}
          rows={2}
          onChange={(e) => setInput(e.target.value)}
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
          <button type="submit" className="primary" disabled={input.trim() === '' || conversation.model === ''}>
            Send
          </button>
        )}
      </form>
    </div>
  );
}
