#!/usr/bin/env node
// Writes src/types.gen.d.ts: one TypeScript type per schema of docs/openapi.json
// (components.schemas), so the client's declarations follow the API document. Plain Node, no
// dependency. `--check` writes nothing and exits 1 when the checked-in file is stale.
//
//   node scripts/gen-types.mjs            regenerate
//   node scripts/gen-types.mjs --check    compare (the test suite runs this comparison too)

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const openapiPath = fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url));
export const outputPath = fileURLToPath(new URL('../src/types.gen.d.ts', import.meta.url));

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const refName = (ref) => {
  const prefix = '#/components/schemas/';
  if (!ref.startsWith(prefix)) throw new Error(`unsupported $ref ${ref}`);
  return ref.slice(prefix.length);
};
const literal = (value) => JSON.stringify(value);
const union = (types) => {
  const unique = [...new Set(types)];
  return unique.length === 1 ? unique[0] : unique.map((t) => (/[&]/.test(t) ? `(${t})` : t)).join(' | ');
};
const comment = (text, indent) => {
  if (!text) return '';
  const lines = text.replace(/\*\//g, '*\\/').split('\n');
  return `${indent}/** ${lines.join(`\n${indent} * `)} */\n`;
};

function typeOf(schema, indent) {
  if (schema === true || schema === undefined || (schema && Object.keys(schema).length === 0)) return 'unknown';
  if (schema.$ref) return refName(schema.$ref);
  if ('const' in schema) return literal(schema.const);
  if (schema.enum) return union(schema.enum.map(literal));
  if (schema.oneOf || schema.anyOf) return union((schema.oneOf ?? schema.anyOf).map((s) => typeOf(s, indent)));
  if (schema.allOf)
    return schema.allOf.map((s) => typeOf(s, indent))
      .map((t) => (t.includes(' | ') && !t.startsWith('{') ? `(${t})` : t)).join(' & ');
  if (Array.isArray(schema.type)) return union(schema.type.map((type) => typeOf({ ...schema, type }, indent)));
  switch (schema.type) {
    case 'string': return 'string';
    case 'integer': case 'number': return 'number';
    case 'boolean': return 'boolean';
    case 'null': return 'null';
    case 'array': {
      const item = typeOf(schema.items, indent);
      return /[ |&]/.test(item) ? `Array<${item}>` : `${item}[]`;
    }
    case 'object': case undefined:
      if (schema.type === undefined && !schema.properties && !schema.additionalProperties) return 'unknown';
      return objectType(schema, indent);
    default: throw new Error(`unsupported schema type ${schema.type}`);
  }
}

function objectType(schema, indent) {
  const inner = `${indent}  `;
  const required = new Set(schema.required ?? []);
  let body = '';
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const key = IDENTIFIER.test(name) ? name : literal(name);
    body += comment(property.description, inner);
    body += `${inner}${key}${required.has(name) ? '' : '?'}: ${typeOf(property, inner)};\n`;
  }
  const extra = schema.additionalProperties;
  if (extra && extra !== false) body += `${inner}[name: string]: ${typeOf(extra, inner)};\n`;
  else if (!schema.properties && extra === undefined) body += `${inner}[name: string]: unknown;\n`;
  return body ? `{\n${body}${indent}}` : 'Record<string, never>';
}

/** The text of src/types.gen.d.ts for an OpenAPI document. */
export function generate(document) {
  let out = '// Generated from docs/openapi.json by scripts/gen-types.mjs: do not edit.\n';
  out += `// ${document.info.title} ${document.info.version}\n`;
  for (const [name, schema] of Object.entries(document.components.schemas)) {
    out += `\n${comment(schema.description, '')}export type ${name} = ${typeOf(schema, '')};\n`;
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = generate(JSON.parse(readFileSync(openapiPath, 'utf8')));
  if (process.argv.includes('--check')) {
    if (readFileSync(outputPath, 'utf8') !== text) {
      console.error(`${outputPath} is stale: run node scripts/gen-types.mjs`);
      process.exit(1);
    }
  } else {
    writeFileSync(outputPath, text);
  }
}
