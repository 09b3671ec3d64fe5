// Drives headless Chromium through paylock's admin login and River UI, and
// saves the screenshots. Run by scripts/ui-check.sh (which installs
// playwright-core into a temp dir and sets the variables below).
//
//   UI_CHECK_CHROMIUM  the Chromium binary
//   UI_CHECK_PROFILE   an empty profile directory (--user-data-dir)
//   UI_CHECK_ADMIN     the admin listener's base URL
//   UI_CHECK_TOKEN     PAYLOCK_ADMIN_TOKEN
//   UI_CHECK_OUT       where to write river-ui.png and river-ui-discarded.png
//   UI_CHECK_RETRYABLE the kind of a retryable job to wait for (the first page)
//   UI_CHECK_DISCARDED the kind of the discarded job to wait for
//   UI_CHECK_PAYMENT   a recorded payment's transaction id (source "payments") with a forward job
//   UI_CHECK_EVENT     its event id
'use strict';
const { chromium } = require('playwright-core');
const path = require('path');

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};

(async () => {
  const admin = env('UI_CHECK_ADMIN');
  const out = env('UI_CHECK_OUT');
  const context = await chromium.launchPersistentContext(env('UI_CHECK_PROFILE'), {
    executablePath: env('UI_CHECK_CHROMIUM'),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1440, height: 900 },
  });
  try {
    const page = context.pages()[0] || await context.newPage();

    // Without a session the page is refused.
    let res = await page.goto(`${admin}/admin/river/`);
    if (res.status() !== 401) throw new Error(`GET /admin/river/ without a session: ${res.status()}, want 401`);
    console.log('ui-check: /admin/river/ without a session: 401');

    // A wrong token is refused, the right one opens River UI.
    await page.goto(`${admin}/admin/login?next=/admin/river/jobs%3Fstate%3Dretryable`);
    await page.fill('#token', 'not-the-admin-token');
    res = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]).then(([r]) => r);
    if (res.status() !== 401) throw new Error(`login with a wrong token: ${res.status()}, want 401`);
    console.log('ui-check: login with a wrong token: 401');
    await page.fill('#token', env('UI_CHECK_TOKEN'));
    await Promise.all([page.waitForURL(`${admin}/admin/river/**`), page.click('button[type=submit]')]);
    const cookie = (await context.cookies(admin)).find((c) => c.name === 'paylock_admin_session');
    if (!cookie || !cookie.httpOnly || cookie.sameSite !== 'Strict') {
      throw new Error(`session cookie: ${JSON.stringify(cookie && { httpOnly: cookie.httpOnly, sameSite: cookie.sameSite })}`);
    }
    console.log(`ui-check: logged in: cookie HttpOnly=${cookie.httpOnly} SameSite=${cookie.sameSite} Secure=${cookie.secure}`);

    // River UI is a single-page app: wait for its job list to render rows.
    await page.getByText(env('UI_CHECK_RETRYABLE'), { exact: true }).first().waitFor({ timeout: 30000 });
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: path.join(out, 'river-ui.png') });
    console.log(`ui-check: job list rendered (${page.url()}): wrote ${path.join(out, 'river-ui.png')}`);

    await page.goto(`${admin}/admin/river/jobs?state=discarded`);
    await page.getByText(env('UI_CHECK_DISCARDED'), { exact: true }).first().waitFor({ timeout: 30000 });
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: path.join(out, 'river-ui-discarded.png') });
    console.log(`ui-check: discarded jobs rendered: wrote ${path.join(out, 'river-ui-discarded.png')}`);

    // River UI's actions are POSTs from the page with the cookie: the
    // browser's own Origin/Sec-Fetch-Site must pass the same-origin check.
    const retried = await page.evaluate(async () => {
      const list = await (await fetch('/admin/river/api/jobs?state=discarded')).json();
      const ids = list.data.map((j) => j.id);
      const res = await fetch('/admin/river/api/jobs/retry', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ids }),
      });
      const after = await (await fetch('/admin/river/api/jobs?state=discarded')).json();
      return { status: res.status, ids, left: after.data.length };
    });
    if (retried.status !== 200 || retried.ids.length === 0 || retried.left !== 0) {
      throw new Error(`retry from the page: ${JSON.stringify(retried)}`);
    }
    console.log(`ui-check: retried discarded job(s) ${retried.ids.join(', ')} from the page with the session cookie: ${retried.status}`);

    // The console: no JavaScript, plain forms, the same session.
    const txID = env('UI_CHECK_PAYMENT');
    await page.goto(`${admin}/admin/payments`);
    await page.fill('input[name=event_id]', env('UI_CHECK_EVENT'));
    res = await Promise.all([page.waitForNavigation(), page.click('form.search button[type=submit]')]).then(([r]) => r);
    if (res.status() !== 200) throw new Error(`console search: ${res.status()}`);
    const rows = await page.locator('tbody tr').count();
    if (rows !== 1 || !(await page.getByRole('link', { name: txID }).isVisible())) {
      throw new Error(`console search by event id: ${rows} rows, want the one payment ${txID}`);
    }
    // Then all of the source's payments, for the screenshot.
    await page.goto(`${admin}/admin/payments?source=payments&since=1h`);
    if ((await page.locator('tbody tr').count()) < 2) throw new Error('console search by source: fewer than 2 rows');
    await page.screenshot({ path: path.join(out, 'console-search.png'), fullPage: true });
    console.log(`ui-check: console search found ${txID} by its event id: wrote ${path.join(out, 'console-search.png')}`);

    // The hostile body is shown as text, never run.
    await page.goto(`${admin}/admin/payments/payments/pi_uicheck_2`);
    if (!(await page.locator('pre.body').innerText()).includes('<script>alert(1)</script>')) {
      throw new Error('the hostile payment body is not shown as text');
    }
    if ((await page.locator('script').count()) !== 0) throw new Error('the console page holds a <script> element');

    await page.goto(`${admin}/admin/payments/payments/${txID}`);
    // Wait until the forward job has failed at least once against the
    // unreachable receiver, so that the page shows a real last error.
    for (let i = 0; i < 40; i++) {
      if ((await page.locator('td.err').first().innerText()).trim() !== '–') break;
      await page.waitForTimeout(250);
      await page.reload();
    }
    const jobLink = page.locator('a[href^="/admin/river/jobs/"]').first();
    if (!(await jobLink.isVisible())) throw new Error('the payment page shows no forward job');
    await page.screenshot({ path: path.join(out, 'console-payment.png'), fullPage: true });
    console.log(`ui-check: payment page with its forward job (${await jobLink.innerText()}): wrote ${path.join(out, 'console-payment.png')}`);

    // Replay through the form: the session's CSRF token is in it.
    res = await Promise.all([page.waitForNavigation(), page.click('button:has-text("Replay the forward")')]).then(([r]) => r);
    if (res.status() !== 200 || !/replay=/.test(page.url())) throw new Error(`replay form: ${res.status()} ${page.url()}`);
    console.log(`ui-check: replayed the forward from the form: ${await page.locator('.notice').innerText()}`);
    // Without the token the same POST is refused.
    // (Same origin and the session cookie, as a forged form would have.)
    const forged = await page.request.post(`${admin}/admin/payments/payments/${txID}/replay`, {
      headers: { Origin: admin, 'Sec-Fetch-Site': 'same-origin' }, form: { note: 'no token' }, maxRedirects: 0,
    });
    if (forged.status() !== 403 || !(await forged.text()).includes('did not come from this console')) {
      throw new Error(`replay POST without the CSRF token: ${forged.status()}, want 403`);
    }
    console.log('ui-check: the replay POST without the CSRF token: 403');

    // The review queue: the list, one item, its resolve form. The old
    // path still leads there (308).
    res = await page.goto(`${admin}/admin/review-queue`);
    if (res.status() !== 200 || new URL(page.url()).pathname !== '/admin/review') {
      throw new Error(`the old review queue path: ${res.status()} at ${page.url()}, want /admin/review`);
    }
    const items = await page.locator('tbody tr').count();
    if (items < 2) throw new Error(`review queue: ${items} items, want the 2 mismatches`);
    await page.screenshot({ path: path.join(out, 'console-review.png'), fullPage: true });
    console.log(`ui-check: review queue with ${items} items: wrote ${path.join(out, 'console-review.png')}`);
    await Promise.all([page.waitForNavigation(), page.locator('tbody tr a').first().click()]);
    await page.selectOption('select[name=action]', 'acknowledge');
    await page.fill('textarea[name=note]', 'Redelivery with a stale amount; the recorded payment stands.');
    res = await Promise.all([page.waitForNavigation(), page.click('form.resolve button[type=submit]')]).then(([r]) => r);
    const notice = page.locator('.notice');
    if (res.status() !== 200 || !(await notice.isVisible()) || !(await notice.innerText()).startsWith('Resolved: acknowledge')) {
      throw new Error(`resolve form: ${res.status()} ${page.url()}`);
    }
    await page.screenshot({ path: path.join(out, 'console-review-resolved.png'), fullPage: true });
    console.log(`ui-check: resolved ${page.url()} from the form (${await notice.innerText()}): wrote ${path.join(out, 'console-review-resolved.png')}`);
    await page.goto(`${admin}/admin/review`);
    const left = await page.locator('tbody tr').count();
    if (left !== items - 1) throw new Error(`review queue after the resolution: ${left} items, want ${items - 1}`);

    // The disbursements of the approved loans.
    res = await page.goto(`${admin}/admin/disbursements`);
    const loans = await page.locator('tbody tr').count();
    if (res.status() !== 200 || loans < 3) throw new Error(`disbursements page: ${res.status()}, ${loans} rows, want the 3 loans`);
    await page.screenshot({ path: path.join(out, 'console-disbursements.png'), fullPage: true });
    console.log(`ui-check: disbursements page with ${loans} rows: wrote ${path.join(out, 'console-disbursements.png')}`);

    // The orders the payments name, once the deriver (on the leader, every
    // 200ms) has derived them: ORD-1042 paid, ORD-1043 underpaid.
    const want = { 'ORD-1042': 'paid', 'ORD-1043': 'underpaid' };
    let states = {};
    for (let i = 0; i < 60; i++) {
      res = await page.goto(`${admin}/admin/orders`);
      if (res.status() !== 200) throw new Error(`orders page: ${res.status()}`);
      states = {};
      for (const row of await page.locator('tbody tr').all()) {
        states[(await row.locator('td code').innerText()).trim()] = (await row.locator('span.state').innerText()).trim();
      }
      if (Object.keys(want).every((id) => states[id] === want[id])) break;
      await page.waitForTimeout(250);
    }
    if (!Object.keys(want).every((id) => states[id] === want[id])) {
      throw new Error(`orders page: ${JSON.stringify(states)}, want ${JSON.stringify(want)}`);
    }
    await page.screenshot({ path: path.join(out, 'console-orders.png'), fullPage: true });
    console.log(`ui-check: orders page ${JSON.stringify(states)}: wrote ${path.join(out, 'console-orders.png')}`);
    res = await page.goto(`${admin}/admin/orders/ORD-1042`);
    if (res.status() !== 200 || !(await page.getByRole('link', { name: txID }).first().isVisible())) {
      throw new Error(`order page: ${res.status()}, no link to its payment ${txID}`);
    }
    await page.screenshot({ path: path.join(out, 'console-order.png'), fullPage: true });
    console.log(`ui-check: order page ORD-1042 with its payment: wrote ${path.join(out, 'console-order.png')}`);

    // The forward destinations: the unreachable receiver, parked by the
    // breaker once 10 attempts in a row failed, then resumed from its form.
    let state = '';
    for (let i = 0; i < 80 && state !== 'parked'; i++) {
      if (i > 0) await page.waitForTimeout(250);
      res = await page.goto(`${admin}/admin/destinations`);
      if (res.status() !== 200) throw new Error(`destinations page: ${res.status()}`);
      const row = page.locator('tbody tr', { has: page.locator('code', { hasText: /^default$/ }) });
      state = (await row.locator('span.state').innerText()).trim();
    }
    if (state !== 'parked') throw new Error(`destinations page: default is ${state}, want parked`);
    await page.screenshot({ path: path.join(out, 'console-destinations.png'), fullPage: true });
    console.log(`ui-check: destinations page, default parked: wrote ${path.join(out, 'console-destinations.png')}`);
    [res] = await Promise.all([
      page.waitForNavigation(),
      page.getByRole('button', { name: 'Resume' }).first().click(),
    ]);
    const resumed = page.getByRole('status');
    if (res.status() !== 200 || !(await resumed.innerText()).includes('Destination default resumed')) {
      throw new Error(`resume form: ${res.status()} ${page.url()}`);
    }
    console.log(`ui-check: resumed default from its form (${await resumed.innerText()})`);
  } finally {
    await context.close();
  }
})().catch((err) => {
  console.error(`ui-check: ${err.message}`);
  process.exit(1);
});
