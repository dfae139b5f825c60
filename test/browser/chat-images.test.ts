import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { findEngine } from '../../src/doctor/engines.js';
import { TINY_VISION_MODEL_ID } from '../../src/models/generate/builtin.js';
import { ensureDashboardBuilt, launchBrowser, openDashboard, screenshot, type DashboardPage } from '../support/browser.js';
import { eventually } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { png } from '../support/images.js';

/**
 * Images in the dashboard's chat (tier 5, Debian's Chromium against a real node): with the built-in
 * vision model served by the real llama-server, PNGs picked with the file input, pasted into the
 * message box or dropped on the composer show there, can be removed, go out with the text and show
 * in the history, and an answer comes back; files the node would refuse are refused in the page
 * first; with the text-only shoal/tiny the control is off and says why, and the node's refusal of
 * the conversation's images is shown as the chat's other errors are. llama-server comes from the
 * engine cache `shoal doctor --fix` fills; without it the file skips.
 */

const binaryPath = await findEngine('llama-server');
const skip = binaryPath === null ? 'llama-server is not built: run `shoal doctor --fix`' : false;

const WAIT_MS = 30_000;
const CONTROL_HEADERS = { 'content-type': 'application/json', 'x-shoal-client': 'test' };
const TEXT_MODEL = 'shoal/tiny';


const PICTURE = { name: 'gradient.png', mimeType: 'image/png', buffer: png(48) };

async function pick(page: Page, ...files: { name: string; mimeType: string; buffer: Buffer }[]): Promise<void> {
  await page.locator('input[type="file"][aria-label="Image files"]').setInputFiles(files);
}

/**
 * Pastes (into the message box) or drops (on the composer) a PNG as the browser would hand it to the
 * page: a DataTransfer holding a File. The callback runs in the page; the root tsconfig has no DOM
 * types, so it is written as text.
 */
async function pasteOrDrop(page: Page, how: 'paste' | 'drop', name: string, bytes: Buffer): Promise<void> {
  await page.evaluate(`(() => {
    const bytes = Uint8Array.from(atob(${JSON.stringify(bytes.toString('base64'))}), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([bytes], ${JSON.stringify(name)}, { type: 'image/png' }));
    const event = ${JSON.stringify(how)} === 'paste'
      ? new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true })
      : new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true });
    document.querySelector(${JSON.stringify(how === 'paste' ? 'textarea[aria-label="Message"]' : 'form.composer')}).dispatchEvent(event);
  })()`);
}

/** Whether every thumbnail under `scope` decoded (a broken data URL renders 0 pixels wide). */
async function decoded(page: Page, selector: string): Promise<boolean> {
  return page.evaluate<boolean>(`[...document.querySelectorAll(${JSON.stringify(selector)})].every((img) => img.complete && img.naturalWidth === 48)`);
}

function assertClean(dash: DashboardPage, expected: RegExp[] = []): void {
  const problems = dash.problems.filter((p) => !expected.some((re) => re.test(p)));
  assert.deepEqual(problems, [], 'no console errors, page errors or failed requests');
}

describe('images in the dashboard chat', { skip, timeout: 300_000 }, () => {
  let browser: Browser;
  let node: TestNode;

  before(async () => {
    ensureDashboardBuilt();
    [browser, node] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'vision'] })]);
    const placed = await fetch(`${node.url}/place_instance`, { method: 'POST', headers: CONTROL_HEADERS, body: JSON.stringify({ model: TINY_VISION_MODEL_ID }) });
    assert.equal(placed.status, 201, await placed.clone().text());
    const { instance } = (await placed.json()) as { instance: { instanceId: string } };
    await eventually('the vision instance to be ready', 90_000, async () => {
      const state = (await (await fetch(`${node.url}/state`)).json()) as { instances?: { instanceId: string; runners: { state: string }[] }[] };
      return state.instances?.find((i) => i.instanceId === instance.instanceId)?.runners.some((r) => r.state === 'ready') ? true : undefined;
    });
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
  });

  test('a picked PNG shows in the composer and the history, and the vision model answers', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/chat' });
    const { page } = dash;
    const model = page.locator('select[aria-label="Model"]');
    await model.locator(`option[value="${TINY_VISION_MODEL_ID}"]`).waitFor({ state: 'attached', timeout: WAIT_MS });
    await model.selectOption(TINY_VISION_MODEL_ID);
    const attach = page.locator('[data-attach]');
    await page.locator('[data-attach]:not([disabled])').waitFor({ timeout: WAIT_MS });
    assert.match((await attach.getAttribute('title')) ?? '', /Attach images/);

    // Picked, shown, removed, picked again.
    await pick(page, PICTURE);
    await page.locator('[data-attachment] img[data-thumb]').waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('[data-attachment]').count(), 1);
    await page.getByRole('button', { name: 'Remove gradient.png' }).click();
    assert.equal(await page.locator('[data-attachment]').count(), 0, 'the remove button takes it out');
    await pick(page, PICTURE);
    await page.locator('[data-attachment] img[data-thumb]').waitFor({ timeout: WAIT_MS });
    assert.ok(await decoded(page, '[data-attachment] img'), 'the composer thumbnail shows the picture');

    // Pasted into the message box and dropped on the composer.
    await pasteOrDrop(page, 'paste', 'image.png', PICTURE.buffer);
    await page.locator('[data-attachment]').nth(1).waitFor({ timeout: WAIT_MS });
    await pasteOrDrop(page, 'drop', 'dropped.png', PICTURE.buffer);
    await page.locator('[data-attachment]').nth(2).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.getByLabel('Message').inputValue(), '', 'a pasted image is not pasted as text');
    await page.getByRole('button', { name: 'Remove dropped.png' }).click();

    // What the node would refuse is refused here first, with the reason; the good image stays.
    await pick(page, { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello') });
    assert.match(await page.locator('[data-attach-error]').innerText(), /'notes\.txt' is text\/plain: only PNG, JPEG, GIF or WEBP/);
    await pick(page, { name: 'fake.png', mimeType: 'image/png', buffer: Buffer.from('this is not a png at all') });
    assert.match(await page.locator('[data-attach-error]').innerText(), /'fake\.png' is not PNG, JPEG, GIF or WEBP data/);
    await pick(page, { name: 'huge.png', mimeType: 'image/png', buffer: Buffer.concat([PICTURE.buffer, Buffer.alloc(8 * 1024 * 1024)]) });
    assert.match(await page.locator('[data-attach-error]').innerText(), /'huge\.png' is 8\.0 MiB, over the 8\.0 MiB limit per image/);
    assert.equal(await page.locator('[data-attachment]').count(), 2, 'only the good images are attached');

    await page.getByLabel('Max tokens').fill('8');
    await page.getByLabel('Message').fill('What is in this picture?');
    await page.getByLabel('Message').press('Enter');
    assert.equal(await page.locator('[data-attachment]').count(), 0, 'sending empties the composer');
    const question = page.locator('.bubble-user').first();
    await question.locator('img[data-thumb]').first().waitFor({ timeout: WAIT_MS });
    assert.match(await question.innerText(), /What is in this picture\?/);
    assert.equal(await question.locator('img[data-thumb]').count(), 2, 'both images are in the history');
    assert.ok(await decoded(page, '.bubble-user img[data-thumb]'), 'the history thumbnail shows the picture');
    const answer = page.locator('.bubble-assistant').first();
    await answer.locator('[data-answer-meta]').waitFor({ timeout: 60_000 });
    assert.equal(await answer.locator('.error-box, [role="alert"]').count(), 0, `no error: ${await answer.innerText()}`);
    assert.match(await answer.locator('[data-answer-meta]').innerText(), new RegExp(`${TINY_VISION_MODEL_ID} · [1-9]\\d* tokens`), 'an answer arrived');
    await screenshot(page, 'chat-image');

    // The image is kept with the conversation.
    await page.reload();
    await page.locator('.bubble-user img[data-thumb]').first().waitFor({ timeout: WAIT_MS });
    assert.ok(await decoded(page, '.bubble-user img[data-thumb]'));

    // A text-only model: the control is off and says why; the node's refusal of the history's image is shown.
    await model.locator(`option[value="${TEXT_MODEL}"]`).waitFor({ state: 'attached', timeout: WAIT_MS });
    await model.selectOption(TEXT_MODEL);
    await page.locator('[data-attach][disabled]').waitFor({ timeout: WAIT_MS });
    assert.match((await attach.getAttribute('title')) ?? '', /shoal\/tiny is not a vision model/);
    assert.equal(await page.locator('input[type="file"][aria-label="Image files"]').isDisabled(), true);
    await page.getByLabel('Message').fill('And now?');
    await page.getByLabel('Message').press('Enter');
    const refused = page.locator('.bubble-assistant').nth(1);
    await refused.locator('[data-answer-meta]').waitFor({ timeout: WAIT_MS });
    assert.match(await refused.innerText(), /The answer failed[\s\S]*image/i);
    assertClean(dash, [/HTTP 400: POST .*\/v1\/chat\/completions/, /status of 400/]);
  });
});
