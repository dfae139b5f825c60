// The part of @echogarden/espeak-ng-emscripten (eSpeak NG compiled to WebAssembly, shipped without
// types) that src/speech/speech-worker.ts uses.
declare module '@echogarden/espeak-ng-emscripten' {
  export interface EspeakVoiceEntry {
    name: string;
    identifier: string;
    languages: { priority: number; name: string }[];
  }
  export interface ESpeakNGWorker {
    readonly samplerate: number;
    list_voices(): EspeakVoiceEntry[];
    /** espeak_SetVoiceByName: `language` or `language+variant`; 0 on success. */
    set_voice(name: string): number;
    set_rate(wordsPerMinute: number): void;
    /** Calls back with each chunk of 16-bit samples as it is synthesized; returning true aborts. */
    synthesize(text: string, callback: (samples: Int16Array, events: unknown[]) => boolean): void;
  }
  export interface EspeakModule {
    eSpeakNGWorker: new () => ESpeakNGWorker;
    FS: { readdir(path: string): string[] };
  }
  const init: () => Promise<EspeakModule>;
  export default init;
}
