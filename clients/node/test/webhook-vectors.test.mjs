// The Standard Webhooks test vectors (clients/conformance/standard-webhooks-vectors.json): the
// fixed signing vector, and every verification case with its own clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { signWebhook, verifyWebhook, WebhookVerificationError } from '../src/index.js';

const vectors = JSON.parse(
  readFileSync(new URL('../../conformance/standard-webhooks-vectors.json', import.meta.url), 'utf8'));

test('the vectors file has cases', () => {
  assert.ok(vectors.sign.length >= 1);
  assert.ok(vectors.verify.length >= 10);
});

for (const vector of vectors.sign) {
  test(`sign: ${vector.msg_id}`, () => {
    const signature = signWebhook({
      secret: vector.secret, id: vector.msg_id, timestamp: vector.timestamp, payload: vector.payload,
    });
    assert.equal(signature, vector.signature);
  });
}

for (const vector of vectors.verify) {
  test(`verify: ${vector.name}`, () => {
    for (const payload of [vector.payload, Buffer.from(vector.payload, 'utf8')]) {
      const verify = () => verifyWebhook({
        secret: vector.secret, headers: vector.headers, payload,
        toleranceSeconds: vectors.tolerance_seconds, now: vector.now,
      });
      if (vector.valid) assert.deepEqual(verify(), JSON.parse(vector.payload));
      else assert.throws(verify, WebhookVerificationError);
    }
  });
}
