// Pins down what OpenAI's published OpenAPI description requires of response bodies, by validating
// hand-written bodies (valid and deliberately broken) through test/support/openai-schema.ts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { assertOpenAIShape, openAISchemaNames, openAIShapeErrors } from './openai-schema.js';

const CREATED = 1741570283;

function chatCompletion(): Record<string, unknown> {
  return {
    id: 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG',
    object: 'chat.completion',
    created: CREATED,
    model: 'qwen2.5-7b-instruct-q4_k_m',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'The sky is blue because of Rayleigh scattering.', refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: {
      prompt_tokens: 21,
      completion_tokens: 11,
      total_tokens: 32,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: 0,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
      },
    },
    service_tier: 'default',
    system_fingerprint: 'fp_shoal_0.1.0',
  };
}

function chunk(choices: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'chatcmpl-123',
    object: 'chat.completion.chunk',
    created: CREATED,
    model: 'qwen2.5-7b-instruct-q4_k_m',
    system_fingerprint: 'fp_shoal_0.1.0',
    choices,
    ...extra,
  };
}

function completion(): Record<string, unknown> {
  return {
    id: 'cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7',
    object: 'text_completion',
    created: CREATED,
    model: 'qwen2.5-7b-instruct-q4_k_m',
    system_fingerprint: 'fp_shoal_0.1.0',
    choices: [{ text: '\n\nThis is indeed a test', index: 0, logprobs: null, finish_reason: 'length' }],
    usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
  };
}

const errorBody = {
  error: { message: 'The model `nope` does not exist', type: 'invalid_request_error', param: null, code: null },
};

/** Deep copy with `mutate` applied, so each negative case starts from a valid body. */
function broken<T>(body: T, mutate: (copy: T) => void): T {
  const copy = structuredClone(body);
  mutate(copy);
  return copy;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test bodies are poked at freely
type Loose = any;

function assertRejected(schemaName: string, body: unknown, expected: RegExp): void {
  assert.throws(
    () => assertOpenAIShape(schemaName, body),
    (err: unknown) => {
      assert.ok(err instanceof assert.AssertionError, 'throws an AssertionError');
      assert.match(err.message, new RegExp(`does not match OpenAI schema ${schemaName}`));
      assert.match(err.message, expected);
      assert.match(err.message, /\nbody:\n/);
      return true;
    },
  );
}

describe('openAISchemaNames', () => {
  it('lists the extracted response schemas', () => {
    const names = openAISchemaNames();
    for (const name of [
      'CreateChatCompletionResponse',
      'CreateChatCompletionStreamResponse',
      'CreateCompletionResponse',
      'CreateEmbeddingResponse',
      'ListModelsResponse',
      'Model',
      'ErrorResponse',
      'Error',
      'CompletionUsage',
      'ChatCompletionResponseMessage',
      'ChatCompletionStreamResponseDelta',
      'Response',
      'ResponseStreamEvent',
    ]) {
      assert.ok(names.includes(name), `fixture has ${name}`);
    }
    assert.deepEqual(names, [...names].sort());
  });

  it('refuses a schema name the fixture does not hold', () => {
    assert.throws(() => assertOpenAIShape('NoSuchSchema', {}), /unknown OpenAI schema "NoSuchSchema"/);
  });
});

describe('chat completion (CreateChatCompletionResponse)', () => {
  it('accepts a realistic response', () => {
    assertOpenAIShape('CreateChatCompletionResponse', chatCompletion());
  });

  it('accepts the minimum: id, object, created, model, choices[{index, message{role, content, refusal}, logprobs, finish_reason}]', () => {
    assertOpenAIShape('CreateChatCompletionResponse', {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: CREATED,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi', refusal: null }, logprobs: null, finish_reason: 'stop' }],
    });
  });

  it('accepts a tool call with null content and finish_reason tool_calls', () => {
    const body = broken(chatCompletion() as Loose, (b) => {
      b.choices[0].message = {
        role: 'assistant',
        content: null,
        refusal: null,
        tool_calls: [{ id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
      };
      b.choices[0].finish_reason = 'tool_calls';
    });
    assertOpenAIShape('CreateChatCompletionResponse', body);
  });

  it('accepts logprobs {content, refusal} with token entries', () => {
    const body = broken(chatCompletion() as Loose, (b) => {
      b.choices[0].logprobs = {
        content: [{ token: 'The', logprob: -0.01, bytes: [84, 104, 101], top_logprobs: [{ token: 'The', logprob: -0.01, bytes: null }] }],
        refusal: null,
      };
    });
    assertOpenAIShape('CreateChatCompletionResponse', body);
  });

  it('accepts extra, non-OpenAI fields (no additionalProperties: false)', () => {
    assertOpenAIShape('CreateChatCompletionResponse', { ...chatCompletion(), shoal: { node: 'a' } });
  });

  it('rejects a body missing id', () => {
    assertRejected('CreateChatCompletionResponse', broken(chatCompletion() as Loose, (b) => delete b.id), /\(root\) must have required property 'id'/);
  });

  it('rejects object: "wrong"', () => {
    assertRejected(
      'CreateChatCompletionResponse',
      { ...chatCompletion(), object: 'wrong' },
      /\/object must be equal to one of the allowed values \["chat\.completion"\]/,
    );
  });

  it('rejects a string where a number belongs (created, usage.prompt_tokens)', () => {
    assertRejected('CreateChatCompletionResponse', { ...chatCompletion(), created: '1741570283' }, /\/created must be integer/);
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => (b.usage.prompt_tokens = '21')),
      /\/usage\/prompt_tokens must be integer/,
    );
  });

  it('rejects a non-integer created (fractional seconds)', () => {
    assertRejected('CreateChatCompletionResponse', { ...chatCompletion(), created: 1741570283.5 }, /\/created must be integer/);
  });

  it('requires choices[].logprobs (null allowed) and choices[].finish_reason (null NOT allowed)', () => {
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => delete b.choices[0].logprobs),
      /\/choices\/0 must have required property 'logprobs'/,
    );
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => (b.choices[0].finish_reason = null)),
      /\/choices\/0\/finish_reason must be string/,
    );
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => (b.choices[0].finish_reason = 'eos')),
      /\/choices\/0\/finish_reason must be equal to one of the allowed values \["stop","length","tool_calls","content_filter","function_call"\]/,
    );
  });

  it('requires message.refusal and message.content (both may be null)', () => {
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => delete b.choices[0].message.refusal),
      /\/choices\/0\/message must have required property 'refusal'/,
    );
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => delete b.choices[0].message.content),
      /\/choices\/0\/message must have required property 'content'/,
    );
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => (b.choices[0].message.role = 'user')),
      /\/choices\/0\/message\/role must be equal to one of the allowed values \["assistant"\]/,
    );
  });

  it('makes system_fingerprint, usage, service_tier optional, but system_fingerprint may not be null', () => {
    const body = chatCompletion();
    delete body.system_fingerprint;
    delete body.usage;
    delete body.service_tier;
    assertOpenAIShape('CreateChatCompletionResponse', body);
    assertOpenAIShape('CreateChatCompletionResponse', { ...chatCompletion(), service_tier: null });
    assertRejected('CreateChatCompletionResponse', { ...chatCompletion(), system_fingerprint: null }, /\/system_fingerprint must be string/);
  });

  it('requires usage.{prompt,completion,total}_tokens when usage is present', () => {
    assertRejected(
      'CreateChatCompletionResponse',
      broken(chatCompletion() as Loose, (b) => delete b.usage.total_tokens),
      /\/usage must have required property 'total_tokens'/,
    );
  });
});

describe('chat completion chunk (CreateChatCompletionStreamResponse)', () => {
  it('accepts the first (role) chunk, content chunks and the finish chunk', () => {
    assertOpenAIShape(
      'CreateChatCompletionStreamResponse',
      chunk([{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }]),
    );
    assertOpenAIShape('CreateChatCompletionStreamResponse', chunk([{ index: 0, delta: { content: 'Hello' }, finish_reason: null }]));
    assertOpenAIShape('CreateChatCompletionStreamResponse', chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]));
  });

  it('accepts usage: null on ordinary chunks and a final usage-only chunk with choices: []', () => {
    assertOpenAIShape(
      'CreateChatCompletionStreamResponse',
      chunk([{ index: 0, delta: { content: 'Hi' }, finish_reason: null }], { usage: null }),
    );
    assertOpenAIShape(
      'CreateChatCompletionStreamResponse',
      chunk([], { usage: { prompt_tokens: 21, completion_tokens: 11, total_tokens: 32 } }),
    );
  });

  it('accepts streamed tool-call deltas (only index is required per tool call)', () => {
    assertOpenAIShape(
      'CreateChatCompletionStreamResponse',
      chunk([
        {
          index: 0,
          delta: {
            role: 'assistant',
            content: null,
            tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '' } }],
          },
          finish_reason: null,
        },
      ]),
    );
    assertOpenAIShape(
      'CreateChatCompletionStreamResponse',
      chunk([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city"' } }] }, finish_reason: null }]),
    );
  });

  it('requires delta, index and finish_reason (null allowed) on every choice', () => {
    assertRejected(
      'CreateChatCompletionStreamResponse',
      chunk([{ index: 0, delta: { content: 'x' } }]),
      /\/choices\/0 must have required property 'finish_reason'/,
    );
    assertRejected(
      'CreateChatCompletionStreamResponse',
      chunk([{ index: 0, finish_reason: null }]),
      /\/choices\/0 must have required property 'delta'/,
    );
    assertRejected(
      'CreateChatCompletionStreamResponse',
      chunk([{ index: 0, delta: {}, finish_reason: 'eos' }]),
      /\/choices\/0\/finish_reason must be equal to one of the allowed values/,
    );
  });

  it('rejects a chunk missing id, with object "chat.completion", or with a string index', () => {
    assertRejected(
      'CreateChatCompletionStreamResponse',
      broken(chunk([]) as Loose, (b) => delete b.id),
      /\(root\) must have required property 'id'/,
    );
    assertRejected(
      'CreateChatCompletionStreamResponse',
      { ...chunk([]), object: 'chat.completion' },
      /\/object must be equal to one of the allowed values \["chat\.completion\.chunk"\]/,
    );
    assertRejected(
      'CreateChatCompletionStreamResponse',
      chunk([{ index: '0', delta: {}, finish_reason: null }]),
      /\/choices\/0\/index must be integer/,
    );
  });

  it('rejects a usage-only chunk whose usage lacks total_tokens', () => {
    assertRejected(
      'CreateChatCompletionStreamResponse',
      chunk([], { usage: { prompt_tokens: 1, completion_tokens: 1 } }),
      /\/usage must have required property 'total_tokens'/,
    );
  });
});

describe('completion (CreateCompletionResponse)', () => {
  it('accepts a realistic response', () => {
    assertOpenAIShape('CreateCompletionResponse', completion());
  });

  it('requires choices[].logprobs (null allowed) and rejects finish_reason null or tool_calls', () => {
    assertRejected(
      'CreateCompletionResponse',
      broken(completion() as Loose, (b) => delete b.choices[0].logprobs),
      /\/choices\/0 must have required property 'logprobs'/,
    );
    // The spec has no separate schema for streamed /v1/completions chunks: they reuse this one, which
    // forbids the `finish_reason: null` that intermediate chunks carry.
    assertRejected(
      'CreateCompletionResponse',
      broken(completion() as Loose, (b) => (b.choices[0].finish_reason = null)),
      /\/choices\/0\/finish_reason must be string/,
    );
    assertRejected(
      'CreateCompletionResponse',
      broken(completion() as Loose, (b) => (b.choices[0].finish_reason = 'tool_calls')),
      /\/choices\/0\/finish_reason must be equal to one of the allowed values \["stop","length","content_filter"\]/,
    );
  });

  it('rejects object "chat.completion" and a missing text', () => {
    assertRejected(
      'CreateCompletionResponse',
      { ...completion(), object: 'chat.completion' },
      /\/object must be equal to one of the allowed values \["text_completion"\]/,
    );
    assertRejected(
      'CreateCompletionResponse',
      broken(completion() as Loose, (b) => delete b.choices[0].text),
      /\/choices\/0 must have required property 'text'/,
    );
  });
});

describe('error (ErrorResponse)', () => {
  it('accepts { error: { message, type, param: null, code: null } } and string param/code', () => {
    assertOpenAIShape('ErrorResponse', errorBody);
    assertOpenAIShape('ErrorResponse', {
      error: { message: 'bad', type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
    });
  });

  it('requires param and code to be present (null, not omitted) and strings when set', () => {
    assertRejected(
      'ErrorResponse',
      { error: { message: 'bad', type: 'invalid_request_error', code: null } },
      /\/error must have required property 'param'/,
    );
    assertRejected(
      'ErrorResponse',
      { error: { message: 'bad', type: 'invalid_request_error', param: null } },
      /\/error must have required property 'code'/,
    );
    assertRejected(
      'ErrorResponse',
      { error: { message: 'bad', type: 'server_error', param: null, code: 500 } },
      /\/error\/code must be string/,
    );
  });

  it('rejects a bare error object and a missing message', () => {
    assertRejected('ErrorResponse', errorBody.error, /\(root\) must have required property 'error'/);
    assertRejected(
      'ErrorResponse',
      { error: { type: 'invalid_request_error', param: null, code: null } },
      /\/error must have required property 'message'/,
    );
  });
});

describe('models (ListModelsResponse, Model)', () => {
  const model = { id: 'qwen2.5-7b-instruct-q4_k_m', object: 'model', created: CREATED, owned_by: 'shoal' };

  it('accepts a model list and a single model', () => {
    assertOpenAIShape('ListModelsResponse', { object: 'list', data: [model, { ...model, id: 'llama-3.1-8b' }] });
    assertOpenAIShape('ListModelsResponse', { object: 'list', data: [] });
    assertOpenAIShape('Model', model);
  });

  it('requires id, object "model", integer created and owned_by', () => {
    const { owned_by: _owned, ...noOwner } = model;
    assertRejected('Model', noOwner, /\(root\) must have required property 'owned_by'/);
    assertRejected('Model', { ...model, object: 'models' }, /\/object must be equal to one of the allowed values \["model"\]/);
    assertRejected('Model', { ...model, created: 'yesterday' }, /\/created must be integer/);
    assertRejected('ListModelsResponse', { object: 'list', data: [noOwner] }, /\/data\/0 must have required property 'owned_by'/);
    assertRejected('ListModelsResponse', { object: 'wrong', data: [] }, /\/object must be equal to one of the allowed values \["list"\]/);
  });
});

describe('embeddings (CreateEmbeddingResponse)', () => {
  it('accepts a float embedding list', () => {
    assertOpenAIShape('CreateEmbeddingResponse', {
      object: 'list',
      model: 'nomic-embed-text',
      data: [{ object: 'embedding', index: 0, embedding: [0.0023, -0.0093, 0.0157] }],
      usage: { prompt_tokens: 8, total_tokens: 8 },
    });
  });

  it('rejects a base64 (string) embedding: the spec only describes number arrays', () => {
    assert.notDeepEqual(
      openAIShapeErrors('CreateEmbeddingResponse', {
        object: 'list',
        model: 'nomic-embed-text',
        data: [{ object: 'embedding', index: 0, embedding: 'AAAAAA==' }],
        usage: { prompt_tokens: 8, total_tokens: 8 },
      }),
      [],
    );
  });
});

describe('responses API (Response, ResponseStreamEvent)', () => {
  const response = {
    id: 'resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b',
    object: 'response',
    created_at: 1741476542,
    status: 'completed',
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: 'qwen2.5-7b-instruct-q4_k_m',
    output: [
      {
        type: 'message',
        id: 'msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hello there.', annotations: [], logprobs: [] }],
      },
    ],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: {
      input_tokens: 36,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: 4,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 40,
    },
    user: 'u',
    metadata: {},
  };

  it('accepts a completed response and its stream events', () => {
    assertOpenAIShape('Response', response);
    // `usage` may be omitted but not null (ResponseUsage is not nullable).
    const { usage: _usage, ...inProgress } = response;
    assertOpenAIShape('ResponseStreamEvent', {
      type: 'response.created',
      sequence_number: 0,
      response: { ...inProgress, status: 'in_progress', output: [] },
    });
    assert.notDeepEqual(openAIShapeErrors('Response', { ...response, usage: null }), []);
    assertOpenAIShape('ResponseStreamEvent', {
      type: 'response.output_text.delta',
      item_id: 'msg_1',
      output_index: 0,
      content_index: 0,
      delta: 'Hel',
      sequence_number: 3,
      logprobs: [],
    });
    assertOpenAIShape('ResponseStreamEvent', { type: 'response.completed', sequence_number: 9, response });
  });

  it('rejects a response missing tool_choice and an event of unknown type', () => {
    const { tool_choice: _choice, ...noToolChoice } = response;
    assertRejected('Response', noToolChoice, /must have required property 'tool_choice'/);
    assert.notDeepEqual(openAIShapeErrors('ResponseStreamEvent', { type: 'response.output_text.delta', sequence_number: 1 }), []);
  });
});
