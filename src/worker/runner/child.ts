import '../../polyfill.js';
import { ShoalError, toShoalError, errorMessage } from '../../common/errors.js';
import { ToRunner, type FromRunner, type RequestId } from './protocol.js';
import { LlamaCppEngine } from './llama-cpp-engine.js';

/**
 * Runner child process: hosts one model instance so that a crashed or hung engine never takes the
 * node down. Speaks `protocol.ts` over the IPC channel and exits when its parent goes away.
 */

/** Typed by the protocol; the node validates every message on receipt. */
function send(message: FromRunner): void {
  process.send?.(message);
}

if (!process.send) {
  console.error('the runner is started by `shoal run`, not by hand');
  process.exit(2);
}

// The parent holds the other end of the IPC channel; losing it means the parent died.
process.on('disconnect', () => process.exit(0));

let engine: LlamaCppEngine | null = null;
const inFlight = new Map<RequestId, AbortController>();
let shuttingDown = false;

async function load(message: Extract<ToRunner, { type: 'load' }>): Promise<void> {
  try {
    engine = await LlamaCppEngine.load(message.config, (level, text) => send({ type: 'log', level, message: text }));
    send({ type: 'ready', ...engine.info });
  } catch (error) {
    send({ type: 'fatal', message: errorMessage(error) });
    process.exit(1);
  }
}

async function run(message: Extract<ToRunner, { type: 'run' }>): Promise<void> {
  const controller = new AbortController();
  inFlight.set(message.id, controller);
  try {
    if (!engine) throw new ShoalError('MODEL_LOADING', 'the model is still loading');
    if (message.task.kind === 'transcribe') throw new ShoalError('CAPABILITY_MISSING', 'the in-process engine serves text models, not speech to text: send audio to a speech-to-text model');
    await engine.run(message.task, controller.signal, (event) => send({ type: 'event', id: message.id, event }));
  } catch (error) {
    const failure = toShoalError(error);
    send({ type: 'failed', id: message.id, code: failure.code, message: failure.message, param: failure.param });
  } finally {
    inFlight.delete(message.id);
  }
}

async function shutdown(): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  for (const controller of inFlight.values()) controller.abort();
  if (engine) await engine[Symbol.asyncDispose]();
  process.exit(0);
}

process.on('message', (raw: unknown) => {
  const parsed = ToRunner.safeParse(raw);
  if (!parsed.success) {
    // The node validates before sending, so this is a version mismatch or a bug: say so, and never
    // leave a request or a load waiting for an answer that will not come.
    const detail = `malformed message from node: ${parsed.error.message}`;
    const id = (raw as { id?: unknown } | null)?.id;
    if ((raw as { type?: unknown } | null)?.type === 'load') send({ type: 'fatal', message: detail });
    else if (typeof id === 'string' && id !== '' && id.length <= 64) send({ type: 'failed', id: id as RequestId, code: 'INTERNAL', message: detail });
    else send({ type: 'log', level: 'error', message: detail });
    return;
  }
  const message = parsed.data;
  switch (message.type) {
    case 'load':
      void load(message);
      break;
    case 'run':
      void run(message);
      break;
    case 'cancel':
      inFlight.get(message.id)?.abort();
      break;
    case 'shutdown':
      void shutdown();
      break;
  }
});
