// Verify a paylock forward with the official Standard Webhooks library.
//
// Usage: WEBHOOK_SECRET=whsec_... node verify.js ID TIMESTAMP SIGNATURE < body
// Exits 0 and prints "accepted" when the library accepts the message, 1 and
// "rejected" otherwise. In a server, pass the raw request body (a Buffer),
// never a re-serialised object, and the request's headers.
"use strict";
const { Webhook } = require("standardwebhooks");

const [id, timestamp, signature] = process.argv.slice(2);
const chunks = [];
process.stdin.on("data", (c) => chunks.push(c));
process.stdin.on("end", () => {
  const body = Buffer.concat(chunks);
  const wh = new Webhook(process.env.WEBHOOK_SECRET);
  try {
    wh.verify(body, {
      "webhook-id": id,
      "webhook-timestamp": timestamp,
      "webhook-signature": signature,
    });
  } catch (err) {
    console.log("rejected: " + err.message);
    process.exit(1);
  }
  console.log("accepted");
});
