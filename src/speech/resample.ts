import assert from 'node:assert/strict';

/** Taps on each side of an output sample: 16 keeps the passband flat to ~10 kHz at 22.05 kHz in. */
const HALF_TAPS = 16;
/** The most polyphase filters a rate pair may need (up factor), so a table stays a few hundred KiB. */
const MAX_PHASES = 1000;

/**
 * A streaming windowed-sinc resampler for 16-bit mono PCM (polyphase: one Blackman-windowed sinc per
 * output phase, computed once). eSpeak NG speaks at 22 050 Hz; OpenAI's speech API answers at
 * 24 000 Hz, which `pcm` clients assume without a header. Feed chunks with `push`, then `flush`
 * once for the tail; the output is exactly `round(inputSamples * outRate / inRate)` samples long.
 */
export class Resampler {
  private readonly up: number;
  private readonly down: number;
  /** `phases[p]` weighs the 2*HALF_TAPS inputs around an output that falls p/up past an input sample. */
  private readonly phases: Float32Array[];
  /** Input samples not yet behind every future output's window, starting at absolute index `start`. */
  private pending = new Float32Array(0);
  private start = 0;
  private inputSamples = 0;
  private outputSamples = 0;

  constructor(inRate: number, outRate: number) {
    const divisor = gcd(inRate, outRate);
    this.up = outRate / divisor;
    this.down = inRate / divisor;
    assert(this.up <= MAX_PHASES, `resampling ${inRate} Hz to ${outRate} Hz needs too many filter phases`);
    // Upsampling keeps the input's band; downsampling cuts at the output's Nyquist frequency.
    const cutoff = Math.min(1, this.up / this.down);
    this.phases = Array.from({ length: this.up }, (_, p) => filter(p / this.up, cutoff));
  }

  push(input: Int16Array): Int16Array {
    this.append(Float32Array.from(input));
    this.inputSamples += input.length;
    return this.produce(false);
  }

  /** The tail: outputs whose window runs past the last input, which is taken as silence beyond. */
  flush(): Int16Array {
    this.append(new Float32Array(HALF_TAPS + 1));
    return this.produce(true);
  }

  private append(samples: Float32Array): void {
    const joined = new Float32Array(this.pending.length + samples.length);
    joined.set(this.pending);
    joined.set(samples, this.pending.length);
    this.pending = joined;
  }

  private produce(final: boolean): Int16Array {
    const end = this.start + this.pending.length;
    const target = Math.round((this.inputSamples * this.up) / this.down);
    const out: number[] = [];
    for (;;) {
      const position = this.outputSamples * this.down;
      const base = Math.floor(position / this.up);
      if (final ? this.outputSamples >= target : base + HALF_TAPS >= end) break;
      const weights = this.phases[position % this.up]!;
      let sum = 0;
      for (let tap = 0; tap < weights.length; tap++) {
        const index = base - HALF_TAPS + 1 + tap - this.start;
        if (index >= 0) sum += this.pending[index]! * weights[tap]!;
      }
      out.push(Math.max(-32768, Math.min(32767, Math.round(sum))));
      this.outputSamples++;
    }
    // Keep what the next output's window still reaches.
    const nextBase = Math.floor((this.outputSamples * this.down) / this.up);
    const keepFrom = Math.max(this.start, nextBase - HALF_TAPS + 1);
    this.pending = this.pending.slice(keepFrom - this.start);
    this.start = keepFrom;
    return Int16Array.from(out);
  }
}

/** The taps for an output `fraction` of an input interval past input sample 0, normalized to unit gain. */
function filter(fraction: number, cutoff: number): Float32Array {
  const taps = new Float32Array(2 * HALF_TAPS);
  let total = 0;
  for (let tap = 0; tap < taps.length; tap++) {
    const distance = tap - HALF_TAPS + 1 - fraction;
    const x = distance * cutoff;
    const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
    const w = (distance + HALF_TAPS) / (2 * HALF_TAPS);
    const blackman = 0.42 - 0.5 * Math.cos(2 * Math.PI * w) + 0.08 * Math.cos(4 * Math.PI * w);
    taps[tap] = sinc * blackman;
    total += taps[tap]!;
  }
  for (let tap = 0; tap < taps.length; tap++) taps[tap] = taps[tap]! / total;
  return taps;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}
