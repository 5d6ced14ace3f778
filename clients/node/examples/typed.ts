// A small typed program, checked by `tsc --noEmit` (test/types.test.mjs) against the package's
// declarations: it must compile, so the declarations stay usable as documented.
import http from 'node:http';
import { Payd, PaydError, CardError, verifyWebhook, WebhookVerificationError } from '@payd/client';
import type { Balance, BalanceTransaction, Event, Payment } from '@payd/client';

const payd = new Payd({ apiKey: process.env.PAYD_API_KEY ?? '', maxRetries: 4, deadlineMs: 60_000 });

export async function payAndList(accountId: string): Promise<number> {
  try {
    const payment: Payment = await payd.payments.create(
      { account_id: accountId, amount: 4200, currency: 'USD', source: 'tok_visa' },
      { idempotencyKey: 'order-1234-payment' },
    );
    const status: Payment['status'] = payment.status;
    console.log(payment.id, status);
  } catch (error) {
    if (error instanceof CardError) console.log('declined', error.problem?.code, error.attempts);
    else if (error instanceof PaydError && error.retryable) console.log('resume with', error.idempotencyKey);
    else throw error;
  }
  let total = 0;
  for await (const payment of payd.payments.list({ account: accountId, limit: 100 })) total += payment.amount;
  const page = await payd.events.list({ type: 'payment.succeeded' }).page();
  const events: Event[] = page.data;
  return total + events.length;
}

// What the account holds, and its refunds' lines, newest first.
export async function refundsOf(accountId: string): Promise<[Balance, BalanceTransaction[]]> {
  const balance: Balance = await payd.accounts.balance(accountId);
  const lines: BalanceTransaction[] = [];
  for await (const line of payd.balanceTransactions.list({ account_id: accountId, type: 'refund', limit: 100 })) {
    const amount: number = line.amount; // signed: a refund's line is negative
    if (amount < 0) lines.push(await payd.balanceTransactions.retrieve(line.id));
  }
  return [balance, lines];
}

export function receiver(secret: string): http.Server {
  return http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        const event = verifyWebhook({ secret, headers: req.headers, payload: Buffer.concat(chunks) });
        console.log(event.type, event.data.object.id);
        res.writeHead(204).end();
      } catch (error) {
        res.writeHead(error instanceof WebhookVerificationError ? 400 : 500).end();
      }
    });
  });
}
