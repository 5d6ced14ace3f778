// Replays every scenario of clients/conformance/scenarios against the scripted server
// (clients/conformance/README.md): the client is configured from the scenario's `client` and
// `api_key`, makes its `call`, and must report its `expect`; the server's report must be ok.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { Payd, PaydError } from '../src/index.js';

const conformance = new URL('../../conformance/', import.meta.url);
const scenarioDir = new URL('scenarios/', conformance);
const scenarios = readdirSync(scenarioDir).filter((f) => f.endsWith('.json')).sort()
  .map((file) => JSON.parse(readFileSync(new URL(file, scenarioDir), 'utf8')));

let server;
let baseUrl;

before(async () => {
  server = spawn('python3', [new URL('server.py', conformance).pathname, '--port', '0'],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: server.stdout });
  const [first] = await Promise.race([
    new Promise((resolve) => lines.once('line', (line) => resolve([line]))),
    new Promise((_, reject) => server.once('exit', (code) => reject(new Error(`server.py exited ${code}`)))),
  ]);
  baseUrl = `http://127.0.0.1:${JSON.parse(first).port}`;
});

after(() => server?.kill());

async function control(method, path) {
  const response = await fetch(`${baseUrl}/_conformance/${path}`, { method });
  assert.equal(response.status, 200, `${method} ${path}`);
  return response.json();
}

// The scenario's call, through the client's own API.
async function run(client, call) {
  const { op, params } = call;
  if (op === 'create_payment')
    return client.payments.create(params, { idempotencyKey: call.idempotency_key ?? undefined });
  if (op === 'get_payment') return client.payments.retrieve(params.id);
  if (op === 'list_payments') {
    const ids = [];
    for await (const item of client.payments.list({ account: params.account_id, limit: params.limit }))
      ids.push(item.id);
    return ids;
  }
  throw new Error(`unknown op ${op}`);
}

test('there are scenarios to replay', () => assert.ok(scenarios.length >= 10));

for (const scenario of scenarios) {
  test(`conformance: ${scenario.name}`, async () => {
    await control('POST', `load/${scenario.name}`);
    const client = new Payd({
      apiKey: scenario.api_key,
      baseUrl,
      maxRetries: scenario.client.max_retries,
      baseDelayMs: scenario.client.base_delay_ms,
      maxDelayMs: scenario.client.max_delay_ms,
      timeoutMs: 10000,
    });
    let outcome;
    let failure;
    try {
      outcome = await run(client, scenario.call);
    } catch (error) {
      failure = error;
    }
    const { expect } = scenario;
    if (expect.error) {
      assert.ok(failure instanceof PaydError, `expected an error, got ${JSON.stringify(outcome)} ${failure}`);
      const fields = { status: failure.status, code: failure.code, param: failure.param, request_id: failure.requestId };
      for (const [name, value] of Object.entries(expect.error))
        assert.deepEqual(fields[name], value, `error.${name}`);
    } else {
      assert.equal(failure, undefined, `unexpected error: ${failure?.stack}`);
      if (expect.items) assert.deepEqual(outcome, expect.items);
      for (const [name, value] of Object.entries(expect.result ?? {}))
        assert.deepEqual(outcome[name], value, `result.${name}`);
    }
    const report = await control('GET', 'report');
    assert.ok(report.ok, `server report: ${JSON.stringify(report.failures)}`);
    if (scenario.call.idempotency_key && scenario.call.op === 'create_payment')
      for (const request of report.requests) assert.equal(request.idempotency_key, scenario.call.idempotency_key);
  });
}
