// The declarations follow docs/openapi.json: src/types.gen.d.ts must be what the generator makes
// of the document today (a stale checked-in file fails here), and, when the dev dependencies are
// installed (npm ci), the declarations and examples/typed.ts must pass `tsc --noEmit`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { generate, openapiPath, outputPath } from '../scripts/gen-types.mjs';

const document = JSON.parse(readFileSync(openapiPath, 'utf8'));

test('src/types.gen.d.ts is up to date with docs/openapi.json', () => {
  assert.equal(readFileSync(outputPath, 'utf8'), generate(document),
    'stale: run `node scripts/gen-types.mjs` in clients/node and commit the result');
});

test('every schema of the document has its type', () => {
  const text = readFileSync(outputPath, 'utf8');
  for (const name of Object.keys(document.components.schemas))
    assert.match(text, new RegExp(`^export type ${name} = `, 'm'));
});

test('the generator follows a change of the document', () => {
  const changed = structuredClone(document);
  changed.components.schemas.Payment.properties.brand_new = { type: 'string' };
  assert.notEqual(generate(changed), generate(document));
  assert.match(generate(changed), /brand_new\?: string;/);
});

const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
// CI installs the dev dependencies (scripts/install-deps.sh test), so there a missing tsc fails.
const skip = !existsSync(tsc) && !process.env.CI && 'typescript is not installed (npm ci in clients/node)';
test('tsc --noEmit: the declarations and a typed example', { skip }, () => {
  assert.ok(existsSync(tsc), 'typescript is not installed: scripts/install-deps.sh test');
  const project = fileURLToPath(new URL('..', import.meta.url));
  try {
    execFileSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8', stdio: 'pipe' });
  } catch (error) {
    assert.fail(`tsc: ${error.stdout}${error.stderr}`);
  }
});
