// The part of @echogarden/fvad-wasm (libfvad, WebRTC's voice activity detector, compiled to
// WebAssembly by Emscripten and shipped without types) that vad.ts uses.
declare module '@echogarden/fvad-wasm' {
  export interface FvadModule {
    /** A detector (mode 0, 8 kHz until set), or 0 when out of memory. */
    _fvad_new(): number;
    _fvad_free(instance: number): void;
    _fvad_reset(instance: number): void;
    /** Aggressiveness 0 (least) to 3 (most); 0 on success. */
    _fvad_set_mode(instance: number, mode: number): number;
    /** 8000, 16000, 32000 or 48000; 0 on success. */
    _fvad_set_sample_rate(instance: number, rate: number): number;
    /** One 10, 20 or 30 ms frame of 16-bit samples: 1 voice, 0 none, -1 a bad frame length. */
    _fvad_process(instance: number, frame: number, length: number): number;
    _malloc(bytes: number): number;
    _free(pointer: number): void;
    /** The heap as 16-bit words; replaced when the heap grows, so read it at each use. */
    HEAP16: Int16Array;
  }
  const init: (options?: Record<string, unknown>) => Promise<FvadModule>;
  export default init;
}
