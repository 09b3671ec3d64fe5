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
  } finally {
    await context.close();
  }
})().catch((err) => {
  console.error(`ui-check: ${err.message}`);
  process.exit(1);
});
