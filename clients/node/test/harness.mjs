// Starts the real payd for the end-to-end tests the way tests/api/conftest.py does: a fresh
// SQLite database in a temporary directory, a free loopback port, users and API keys made with
// `payd user create`.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, openSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

export const PAYD_BIN = process.env.PAYD_BIN ?? fileURLToPath(new URL('../../../build/payd', import.meta.url));
export const paydAvailable = existsSync(PAYD_BIN);

export async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** PAYD_TEST_BACKEND=postgres runs the end-to-end tests on PostgreSQL, as the API tests do. */
export const BACKEND = process.env.PAYD_TEST_BACKEND ?? 'sqlite';

// The API tests' throwaway cluster (tests/api/pg.py), held by a small Python process: it prints
// the new database's URL, and stops the cluster when its standard input closes.
const PG_HOLDER = `
import json, sys
sys.path.insert(0, sys.argv[1])
import pg
cluster = pg.cluster()
print(json.dumps({"url": cluster.url(cluster.new_database())}), flush=True)
sys.stdin.read()
`;

async function startPostgres() {
  const apiTests = fileURLToPath(new URL('../../../tests/api', import.meta.url));
  const holder = spawn('python3', ['-c', PG_HOLDER, apiTests], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    let out = '';
    holder.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    holder.once('exit', (code) => reject(new Error(`the PostgreSQL holder exited ${code}`)));
  });
  return { url: JSON.parse(line).url, holder };
}

export class PaydServer {
  constructor(args = []) {
    this.dir = mkdtempSync(join(tmpdir(), 'payd-node-e2e-'));
    this.db = join(this.dir, 'payd.db');
    this.args = args;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    if (BACKEND === 'postgres' && !this.pg) {
      this.pg = await startPostgres();
      this.db = this.pg.url;
    }
    this.port = await freePort();
    this.logPath = join(this.dir, 'payd.log');
    const log = openSync(this.logPath, 'a');
    this.proc = spawn(PAYD_BIN, ['serve', '--listen', `127.0.0.1:${this.port}`, '--db', this.db, ...this.args],
      { stdio: ['ignore', log, log] });
    const deadline = Date.now() + 15000;
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null) throw new Error(`payd exited ${this.proc.exitCode}: ${this.log()}`);
      try {
        if ((await fetch(`${this.url}/healthz`)).status === 200) return this;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    throw new Error('payd did not become healthy');
  }

  log() {
    return readFileSync(this.logPath, 'utf8').slice(-2000);
  }

  /** A new user and its API key: {user_id, api_key}. */
  createUser(name, ...flags) {
    return JSON.parse(execFileSync(PAYD_BIN, ['user', 'create', name, ...flags, '--db', this.db], { encoding: 'utf8' }));
  }

  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((resolve) => this.proc.once('exit', resolve));
      this.proc.kill('SIGTERM');
      await exited;
    }
    if (this.pg) {
      const stopped = new Promise((resolve) => this.pg.holder.once('exit', resolve));
      this.pg.holder.stdin.end();
      await stopped;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A TCP proxy in front of payd that forwards every request but drops the answer on the first
 * `dropAnswers` connections: payd has done the work, the client never hears of it (the lost
 * answer that only the Idempotency-Key makes safe to retry).
 */
export async function lossyProxy(targetPort, dropAnswers = 1) {
  let connections = 0;
  const proxy = net.createServer((client) => {
    const drop = connections++ < dropAnswers;
    const upstream = net.connect(targetPort, '127.0.0.1');
    client.pipe(upstream);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    if (drop)
      upstream.once('data', () => {
        proxy.dropped++;
        client.destroy();
        upstream.destroy();
      });
    else upstream.pipe(client);
  });
  proxy.dropped = 0;
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${proxy.address().port}`;
  return proxy;
}
