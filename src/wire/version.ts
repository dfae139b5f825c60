/**
 * Version of everything Shoal nodes say to each other. Nodes of different wire versions refuse each other
 * (loudly, on both sides) instead of half-understanding. Bump it with any incompatible change to a message,
 * event, command or snapshot schema.
 *
 * 2: the RPC tunnel's open frame and the model copy's read request may ask for a direct socket
 *    (router/direct-socket.ts), which version-1 strict schemas refuse.
 * 3: cluster settings in state and snapshots (SetSettings, SettingsChanged: master/state/settings.ts).
 * 4: resources telemetry carries GpuReading entries in `gpus` (index, vendor, compute, VRAM total and
 *    free, utilization, temperature, power: wire/telemetry.ts) instead of name/total/used.
 *    Also the `tracing` setting (master/state/settings.ts) and traced `/shoal/infer/1` requests: the run
 *    frame's `trace` context and the serving node's spans on the final frame (inference/protocol.ts).
 *    Also per-GPU placement: `vramBudgetBytes` in resources, and in instance specs `allowSpill` and per
 *    placement `gpuLayers` and `devices` (master/state/instances.ts).
 * 5: `/shoal/infer/1` event frames may carry the `queued` task event (a waiting request's position)
 *    and `usage.cachedPromptTokens` (wire/task.ts), which version-4 strict schemas refuse.
 * 6: tasks may carry images (user messages' and text prompts' `images`, wire/task.ts) and instances the
 *    `vision` capability (wire/capability.ts), which version-5 strict schemas refuse.
 * 7: the MovePart command and PartMoved event (a full part moved onto llama-server once its node has
 *    it: master/state/commands.ts), which version-6 logs and snapshots refuse. Also speech to text:
 *    `transcribe` tasks and `transcript` events on `/shoal/infer/1` (wire/task.ts), the
 *    `transcription` capability in place of the unused `speech` (wire/capability.ts) and the
 *    `whisper-cpu` backend tag in resources telemetry.
 */
export const WIRE_VERSION = 7;
