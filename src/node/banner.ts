// The lines a node prints once it serves: what a new user needs to go on (where the dashboard and the
// API are, what model answers), before the details that follow in the log.

import { defaultDashboardDir, isDashboardBuilt } from '../dashboard/static.js';
import { BUILTIN_MODEL_IDS } from '../models/builtin-store.js';

export interface BannerFacts {
  /** The node's API URL, as a client on this machine reaches it (no trailing slash). */
  url: string;
  headless: boolean;
  modelId: string;
  /** What serves the default model (`llama_server`, `llama_cpp`), and why that one. */
  engine: string;
  engineReason: string;
}

/** One log line each, so that readable and JSON logs both keep them whole. */
export function bannerLines(facts: BannerFacts, dashboardBuilt = isDashboardBuilt(defaultDashboardDir())): string[] {
  const dashboard = facts.headless ? 'off (--headless)' : dashboardBuilt ? `${facts.url}/` : "not built ('npm run build' builds it)";
  const lines = [
    `dashboard: ${dashboard}`,
    `API base URL: ${facts.url}/v1 for OpenAI clients; ${facts.url} for Anthropic and Ollama clients`,
    `default model ${facts.modelId} serves through ${facts.engine}: ${facts.engineReason}`,
  ];
  if (BUILTIN_MODEL_IDS.includes(facts.modelId)) {
    lines.push(
      `${facts.modelId} is a built-in model with random weights: its output is random by design. ` +
        "Serve a real model with --default-model <file.gguf>, or add and launch one from the hub ('shoal models --help').",
    );
  }
  return lines;
}
