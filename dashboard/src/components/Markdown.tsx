// Renders the markdown tree of lib/markdown.ts as React elements: every string is a text node, so
// whatever a model writes is shown, never run.

import { Fragment, type ReactNode } from 'react';
import { parseMarkdown, type Block, type Inline } from '../lib/markdown.js';

function inlines(nodes: Inline[]): ReactNode[] {
  return nodes.map((node, i) => {
    switch (node.type) {
      case 'text':
        return <Fragment key={i}>{node.text}</Fragment>;
      case 'code':
        return <code key={i}>{node.text}</code>;
      case 'strong':
        return <strong key={i}>{inlines(node.children)}</strong>;
      case 'em':
        return <em key={i}>{inlines(node.children)}</em>;
      case 'link':
        return (
          <a key={i} href={node.href} target={node.href.startsWith('#') ? undefined : '_blank'} rel="noopener noreferrer nofollow">
            {inlines(node.children)}
          </a>
        );
      case 'break':
        return <br key={i} />;
    }
  });
}

function CodeBlock({ lang, text }: { lang: string; text: string }): ReactNode {
  const copy = (): void => void navigator.clipboard?.writeText(text).catch(() => undefined);
  return (
    <div className="code-block">
      <div className="code-head">
        <span>{lang || 'code'}</span>
        <button type="button" className="link" onClick={copy}>
          Copy
        </button>
      </div>
      <pre>
        <code>{text}</code>
      </pre>
    </div>
  );
}

function blocks(nodes: Block[], tight = false): ReactNode[] {
  return nodes.map((node, i) => {
    switch (node.type) {
      case 'paragraph':
        return tight ? <Fragment key={i}>{inlines(node.children)}</Fragment> : <p key={i}>{inlines(node.children)}</p>;
      case 'heading': {
        const Tag = `h${Math.min(6, node.level + 2)}` as 'h3';
        return <Tag key={i}>{inlines(node.children)}</Tag>;
      }
      case 'code':
        return <CodeBlock key={i} lang={node.lang} text={node.text} />;
      case 'list': {
        const items = node.items.map((item, j) => <li key={j}>{blocks(item, item.length === 1)}</li>);
        return node.ordered ? (
          <ol key={i} start={node.start}>
            {items}
          </ol>
        ) : (
          <ul key={i}>{items}</ul>
        );
      }
      case 'quote':
        return <blockquote key={i}>{blocks(node.children)}</blockquote>;
      case 'rule':
        return <hr key={i} />;
    }
  });
}

export function Markdown({ text }: { text: string }): ReactNode {
  return <div className="markdown">{blocks(parseMarkdown(text))}</div>;
}
