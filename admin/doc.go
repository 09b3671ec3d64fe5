// Package admin is paylock's admin listener (PAYLOCK_ADMIN_ADDR): the tools
// operators use beside the webhook pipeline (package handler), which never
// serves them.
//
// What it guarantees:
//
//   - Every path is behind a token, whatever it is, unknown paths
//     included: the bearer header Authorization: Bearer <token> (tools;
//     compared in constant time with Config.Token and every named
//     Config.Tokens), or a browser session cookie set by POST /admin/login
//     once the token is typed in (see session.go: HttpOnly, SameSite=Strict,
//     a MAC keyed by the token, nothing stored server-side). Only
//     /admin/login and /admin/logout answer without one. A refusal is 401
//     problem+json (problem.ErrAdminToken), or the login page to a
//     browser's page load. The name of the token a request came in with is
//     its identity (Identity), recorded with every review resolution. A
//     listener without any token (allowed by paylock on a loopback address
//     only) lets everyone in as Anonymous.
//   - A request authenticated by the session cookie with an unsafe method
//     (POST, PUT, PATCH, DELETE) must come from this origin (Sec-Fetch-Site
//     or Origin), else 403 (problem.ErrAdminCrossOrigin); the console's
//     forms also carry a per-session CSRF token. The bearer header needs
//     neither: another site cannot set it.
//   - What it serves, each only when its Config field is set (every
//     route in routes.go and docs/admin-api.md): the JSON API under
//     APIBase, /admin/api/v1 (payments: Config.Payments; deliveries:
//     Config.Deliveries; the review queue: Config.Review; disbursements:
//     Config.Disbursements), every answer JSON and every error
//     problem+json; the console's server-rendered pages under /admin/
//     (Config.Console: /admin/payments, /admin/deliveries, /admin/review,
//     /admin/disbursements), HTML only to a browser (Accept prefers
//     text/html), the API's JSON to anyone else; River UI under
//     /admin/river/ (RiverUI, passed in Config.Mounts) and any other
//     mount, behind the same token.
//   - The paths of the previous release answer for one more: old pages
//     redirect 308 to the new ones, old JSON paths answer with
//     Deprecation: true and a Link to their successor.
//
// Every error answer goes through package problem (problem.Write), the one
// place that chooses a status. What it reads and does comes through the
// small interfaces declared here (Disbursements, ReviewStore,
// ConsoleStore), satisfied by *store.Disbursements, *review.Queue, and
// *store.Payments with *store.Outbox.
package admin
