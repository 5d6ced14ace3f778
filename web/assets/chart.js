// The volume chart: one bar per bucket from GET /v1/accounts/{id}/payments/stats, drawn as SVG.
// The server leaves out empty buckets; the chart puts them back so time runs evenly. A bar is
// the bucket's charged amount: its net part, and on top of it the part refunded since.
import { svg, h } from './dom.js';
import { compactMoney, money, exponent, DAY_MS, HOUR_MS } from './format.js';

const PAD = { right: 12, top: 14, bottom: 30 };
// The axis labels are 11px text: about this many pixels a character, wide digits included.
const LABEL_CHAR_PX = 7;
const LABEL_GAP_PX = 10;

// The range a choice of the select asks for: bounds on bucket boundaries, as the API requires.
export function rangeFor(choice, now = Date.now()) {
  if (choice === 'hour') {
    const lt = Math.floor(now / HOUR_MS) * HOUR_MS + HOUR_MS;
    return { interval: 'hour', step: HOUR_MS, gte: lt - 24 * HOUR_MS, lt };
  }
  if (choice === 'day') {
    const lt = Math.floor(now / DAY_MS) * DAY_MS + DAY_MS;
    return { interval: 'day', step: DAY_MS, gte: lt - 30 * DAY_MS, lt };
  }
  return { interval: 'day', step: DAY_MS, gte: null, lt: null }; // all time
}

function buckets(stats, range) {
  const byStart = new Map(stats.data.map((b) => [Date.parse(b.bucket_start), b]));
  let { gte, lt } = range;
  if (gte === null) {
    const starts = [...byStart.keys()];
    if (!starts.length) return [];
    gte = Math.min(...starts);
    lt = Math.max(...starts) + range.step;
  }
  const out = [];
  for (let t = gte; t < lt; t += range.step) {
    out.push(byStart.get(t) || { bucket_start: new Date(t).toISOString(), count: 0, amount: 0, refunded_amount: 0, net_amount: 0 });
  }
  return out;
}

function bucketLabel(iso, interval) {
  return interval === 'hour' ? `${iso.slice(11, 13)}:00` : iso.slice(5, 10);
}

// A round number at or above max, so the axis reads 0, ½ and the whole of it.
function niceCeiling(max) {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

export function renderChart(plotEl, totalsEl, stats, range) {
  const { currency, interval } = stats;
  const all = buckets(stats, range);
  // drawn at the size it is shown, so labels keep their size on a phone
  const WIDTH = Math.max(300, Math.round(plotEl.clientWidth || 720));
  const HEIGHT = WIDTH < 500 ? 200 : 260;
  // an empty chart still has a readable axis: up to one whole unit of the currency
  const top = niceCeiling(Math.max(10 ** exponent(currency), ...all.map((b) => b.amount)));
  // the y axis is as wide as its widest label (compact, so a few characters), so none is cut
  const yLabels = [0, 0.5, 1].map((f) => ({ f, text: compactMoney(Math.round(top * f), currency) }));
  const left = LABEL_GAP_PX + LABEL_CHAR_PX * Math.max(...yLabels.map((l) => l.text.length));
  const innerW = WIDTH - left - PAD.right;
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const y = (v) => PAD.top + innerH - (v / top) * innerH;
  const t = stats.total;
  const summary = `${t.count} succeeded payments, ${money(t.amount, currency)} charged, ${money(t.refunded_amount, currency)} refunded`;

  const chart = svg('svg', {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': `Volume by ${interval}: ${summary}`,
    preserveAspectRatio: 'xMidYMid meet',
  });
  for (const { f, text } of yLabels) {
    chart.append(svg('line', { class: f ? 'grid' : 'axis', x1: left, x2: WIDTH - PAD.right, y1: y(top * f), y2: y(top * f) }),
      svg('text', { class: 'label y-label', x: left - 6, y: y(top * f) + 4, 'text-anchor': 'end' }, text));
  }
  if (!stats.total.count) {
    chart.append(svg('text', { class: 'empty', x: left + innerW / 2, y: PAD.top + innerH / 2, 'text-anchor': 'middle' }, 'No succeeded payments in this range'));
  }
  const slot = all.length ? innerW / all.length : innerW;
  const barW = Math.max(1, slot * 0.72);
  const labelEvery = Math.max(1, Math.ceil(all.length / Math.max(2, Math.floor(innerW / 70))));
  all.forEach((b, i) => {
    const x = left + i * slot + (slot - barW) / 2;
    const g = svg('g', { class: 'bucket', 'data-start': b.bucket_start, 'data-count': b.count, 'data-amount': b.amount, 'data-refunded': b.refunded_amount },
      svg('title', {}, `${b.bucket_start.slice(0, interval === 'hour' ? 13 : 10).replace('T', ' ')}${interval === 'hour' ? ':00' : ''} UTC: ${b.count} payments, ${money(b.amount, currency)} charged, ${money(b.refunded_amount, currency)} refunded`));
    if (b.amount > 0) {
      g.append(svg('rect', { class: 'bar-net', x, width: barW, y: y(b.net_amount), height: Math.max(0, y(0) - y(b.net_amount)) }));
      if (b.refunded_amount > 0) {
        g.append(svg('rect', { class: 'bar-refunded', x, width: barW, y: y(b.amount), height: Math.max(0, y(b.net_amount) - y(b.amount)) }));
      }
    }
    chart.append(g);
    if (i % labelEvery === 0) {
      chart.append(svg('text', { class: 'label', x: left + i * slot + slot / 2, y: HEIGHT - 10, 'text-anchor': 'middle' }, bucketLabel(b.bucket_start, interval)));
    }
  });
  plotEl.replaceChildren(chart);

  totalsEl.dataset.count = t.count;
  totalsEl.dataset.amount = t.amount;
  totalsEl.dataset.refunded = t.refunded_amount;
  totalsEl.dataset.net = t.net_amount;
  totalsEl.replaceChildren(
    h('span', {}, h('strong', {}, String(t.count)), ' succeeded payments'),
    h('span', { class: 'legend-net' }, h('strong', {}, money(t.net_amount, currency)), ' net'),
    h('span', { class: 'legend-refunded' }, h('strong', {}, money(t.refunded_amount, currency)), ' refunded'),
    h('span', {}, h('strong', {}, money(t.amount, currency)), ' charged'),
  );
}
