/* global AudioWorkletProcessor, registerProcessor */
// The microphone's samples, off the audio thread: the first channel of each 128-frame render quantum,
// batched so the page gets about 20 messages a second instead of 375. Plain JavaScript: Vite copies
// this file as it is (the page's CSP loads worklets only from the node, never from a blob: URL).

const BATCH = 2048;

class CaptureProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.buffer = new Float32Array(BATCH);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) {
      let at = 0;
      while (at < channel.length) {
        const n = Math.min(channel.length - at, BATCH - this.filled);
        this.buffer.set(channel.subarray(at, at + n), this.filled);
        this.filled += n;
        at += n;
        if (this.filled === BATCH) {
          this.port.postMessage(this.buffer, [this.buffer.buffer]);
          this.buffer = new Float32Array(BATCH);
          this.filled = 0;
        }
      }
    }
    return true;
  }
}

registerProcessor('shoal-capture', CaptureProcessor);
