// A modal dialog, and a button that asks for confirmation before it acts.

import { useEffect, useRef, useState, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { useNotify } from './Notice.js';

export function Modal({ title, children, onClose, actions }: { title: string; children: ReactNode; onClose: () => void; actions: ReactNode }): ReactNode {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const onKey = (e: KeyboardEvent): void => {
      if (e.key === 'Escape') onClose();
    };
    window.addEventListener('keydown', onKey);
    ref.current?.querySelector<HTMLElement>('input, textarea, select, button.primary, button.danger')?.focus();
    return () => window.removeEventListener('keydown', onKey);
  }, [onClose]);
  return (
    <div className="modal-backdrop" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div className="modal" role="dialog" aria-modal="true" aria-label={title} ref={ref}>
        <h2>{title}</h2>
        <div className="modal-body">{children}</div>
        <div className="modal-actions">{actions}</div>
      </div>
    </div>
  );
}

/** Runs `action` with a busy state; its failure becomes an error notice. Resolves true on success. */
export function useAction(): [boolean, (action: () => Promise<unknown>, done?: string) => Promise<boolean>] {
  const [busy, setBusy] = useState(false);
  const notify = useNotify();
  const run = async (action: () => Promise<unknown>, done?: string): Promise<boolean> => {
    setBusy(true);
    try {
      await action();
      if (done) notify('ok', done);
      return true;
    } catch (error) {
      notify('error', errorMessage(error));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return [busy, run];
}

export function ActionButton({ children, action, done, className, title, disabled }: { children: ReactNode; action: () => Promise<unknown>; done?: string; className?: string; title?: string; disabled?: boolean }): ReactNode {
  const [busy, run] = useAction();
  return (
    <button type="button" className={className} title={title} disabled={busy || disabled} aria-busy={busy} onClick={() => void run(action, done)}>
      {children}
    </button>
  );
}

export function ConfirmButton({
  children,
  title,
  question,
  confirm,
  action,
  done,
  className = 'danger',
}: {
  children: ReactNode;
  title: string;
  question: ReactNode;
  confirm: string;
  action: () => Promise<unknown>;
  done?: string;
  className?: string;
}): ReactNode {
  const [open, setOpen] = useState(false);
  const [busy, run] = useAction();
  return (
    <>
      <button type="button" className={className} onClick={() => setOpen(true)} disabled={busy}>
        {children}
      </button>
      {open && (
        <Modal
          title={title}
          onClose={() => setOpen(false)}
          actions={
            <>
              <button type="button" onClick={() => setOpen(false)}>
                Cancel
              </button>
              <button
                type="button"
                className="danger"
                disabled={busy}
                onClick={() =>
                  void run(action, done).then((ok) => {
                    if (ok) setOpen(false);
                  })
                }
              >
                {confirm}
              </button>
            </>
          }
        >
          {question}
        </Modal>
      )}
    </>
  );
}
