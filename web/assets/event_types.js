// The event types payd records (docs/openapi.json, EventType): the events page filters by them
// and a webhook endpoint subscribes to them.
import { h } from './dom.js';

export const EVENT_TYPES = [
  'account.created', 'payment.succeeded', 'payment.failed', 'payment.authorized',
  'payment.captured', 'payment.canceled', 'refund.succeeded', 'order.created',
  'order.status_changed', 'transfer.succeeded', 'transfer.failed', 'reservation.created',
  'webhook_endpoint.disabled',
];

export function typeOptions() {
  return EVENT_TYPES.map((type) => h('option', { value: type }, type));
}

export function typeCheckboxes() {
  return EVENT_TYPES.map((type) => h('label', {}, h('input', { type: 'checkbox', value: type }), ` ${type}`));
}
