// The memory knobs a card's `runtime` and a launch share, as plain lists with no imports, so the
// dashboard can offer them without bundling the card schema.

/** KV cache element types a card or a launch may ask for; quantized ones need flash attention for V (llama.cpp). */
export const CARD_KV_CACHE_TYPES = ['f16', 'q8_0', 'q4_0'] as const;
export type CardKvCacheType = (typeof CARD_KV_CACHE_TYPES)[number];
/** `auto` lets llama.cpp decide (on for CPU, CUDA and Metal backends). */
export const FLASH_ATTENTION_MODES = ['auto', 'on', 'off'] as const;
export type FlashAttentionMode = (typeof FLASH_ATTENTION_MODES)[number];
