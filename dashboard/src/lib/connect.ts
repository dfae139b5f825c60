// What the dashboard's "Connect a client" panel shows: the node's base URLs as seen from this page and
// the same chat request as curl, Python (openai) and JavaScript (openai) code, with the key where the
// node asks for one. Pure, so the snippets are tested without a browser.

export interface ConnectFacts {
  /** The page's origin (`window.location.origin`): the node serves the dashboard and the API on one port. */
  origin: string;
  apiKeyRequired: boolean;
  /** A model the node serves, for the examples. */
  model: string;
}

export interface ClientSnippet {
  id: 'curl' | 'python' | 'javascript';
  label: string;
  code: string;
}

/** The environment variable the snippets read a key from, so none is pasted into code. */
export const KEY_VARIABLE = 'SHOAL_API_KEY';

/** The base URL OpenAI clients take (`baseURL` / `base_url`). */
export function openAiBaseUrl(origin: string): string {
  return `${origin.replace(/\/+$/, '')}/v1`;
}

/** True when the page was opened on this machine's loopback, whose address other machines cannot use. */
export function isLoopbackOrigin(origin: string): boolean {
  let host: string;
  try {
    host = new URL(origin).hostname;
  } catch {
    return false;
  }
  return host === 'localhost' || host === '[::1]' || host === '::1' || /^127\./.test(host);
}

export function clientSnippets(facts: ConnectFacts): ClientSnippet[] {
  const base = openAiBaseUrl(facts.origin);
  const model = JSON.stringify(facts.model);
  const question = 'Hello!';
  const curlKey = facts.apiKeyRequired ? ` \\\n  -H "Authorization: Bearer $${KEY_VARIABLE}"` : '';
  const body = JSON.stringify({ model: facts.model, messages: [{ role: 'user', content: question }] });
  return [
    {
      id: 'curl',
      label: 'curl',
      code: `curl ${base}/chat/completions \\\n  -H 'content-type: application/json'${curlKey} \\\n  -d '${body}'`,
    },
    {
      id: 'python',
      label: 'Python',
      code: [
        '# pip install openai',
        ...(facts.apiKeyRequired ? ['import os'] : []),
        'from openai import OpenAI',
        '',
        // The client insists on a key even where the node needs none.
        `client = OpenAI(base_url=${JSON.stringify(base)}, api_key=${facts.apiKeyRequired ? `os.environ[${JSON.stringify(KEY_VARIABLE)}]` : '"none"'})`,
        `reply = client.chat.completions.create(model=${model}, messages=[{"role": "user", "content": ${JSON.stringify(question)}}])`,
        'print(reply.choices[0].message.content)',
      ].join('\n'),
    },
    {
      id: 'javascript',
      label: 'JavaScript',
      code: [
        '// npm install openai',
        "import OpenAI from 'openai';",
        '',
        `const client = new OpenAI({ baseURL: ${JSON.stringify(base)}, apiKey: ${facts.apiKeyRequired ? `process.env.${KEY_VARIABLE}` : "'none'"} });`,
        `const reply = await client.chat.completions.create({ model: ${model}, messages: [{ role: 'user', content: ${JSON.stringify(question)} }] });`,
        'console.log(reply.choices[0].message.content);',
      ].join('\n'),
    },
  ];
}
