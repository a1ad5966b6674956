// A race's times are entered and shown in the race's own time zone (an IANA name), whatever
// the director's browser is set to; the API stores instants in UTC. Converted with Intl alone
// (no time-zone library): the browser already carries the tz database.

const formatters = new Map();

function partsFormatter(zone) {
  if (!formatters.has(zone)) {
    formatters.set(zone, new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    }));
  }
  return formatters.get(zone);
}

/** Is `zone` a time zone this browser knows (what the API's zoneinfo knows, near enough)? */
export function knownZone(zone) {
  try {
    partsFormatter(zone);
    return true;
  } catch {
    return false;
  }
}

/** The IANA names for the zone picker (the browser's list, plus UTC, which some omit). */
export function zoneNames() {
  const names = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return names.includes('UTC') ? names : ['UTC', ...names];
}

export function browserZone() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

// The wall-clock fields of `ms` in `zone`, as a UTC timestamp of the same digits.
function wallAsUtc(ms, zone) {
  const p = Object.fromEntries(partsFormatter(zone).formatToParts(new Date(ms)).map((x) => [x.type, x.value]));
  return Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute), Number(p.second));
}

/** An instant (ISO text) as <input type=datetime-local>'s value in `zone`: "YYYY-MM-DDTHH:MM". */
export function toZoneInput(iso, zone) {
  const ms = new Date(iso).getTime();
  if (Number.isNaN(ms)) return '';
  return new Date(wallAsUtc(ms, zone)).toISOString().slice(0, 16);
}

/** "YYYY-MM-DDTHH:MM" read as a wall-clock time in `zone`, as an ISO instant in UTC. A time
 * that a clock change skips is moved forward by the gap, as the API's zoneinfo does. */
export function fromZoneInput(value, zone) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})$/.exec(value || '');
  if (!m) return value; // the API names the field and says what it wants
  const wall = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]));
  let guess = wall - (wallAsUtc(wall, zone) - wall);
  // A second pass settles the offset when the first guess fell on the other side of a change.
  guess = wall - (wallAsUtc(guess, zone) - guess);
  return new Date(guess).toISOString().replace('.000Z', 'Z');
}

/** A short "UTC+02:00"-style label of the zone's offset at an instant. */
export function offsetLabel(zone, at = Date.now()) {
  const minutes = Math.round((wallAsUtc(at, zone) - Math.floor(at / 1000) * 1000) / 60000);
  const sign = minutes < 0 ? '-' : '+';
  const abs = Math.abs(minutes);
  return `UTC${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/** An instant shown in the race's zone, e.g. "May 1, 2027, 09:00 (Europe/Paris)". */
export function showInZone(iso, zone) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  const text = new Intl.DateTimeFormat('en-US', { timeZone: zone, dateStyle: 'medium', timeStyle: 'short', hourCycle: 'h23' }).format(d);
  return `${text} (${zone})`;
}

/** An instant's time of day in the race's zone, to the second, e.g. "09:00:07 (Europe/Paris)". */
export function timeInZone(iso, zone) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  const text = new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(d);
  return `${text} (${zone})`;
}

// -- money in the currency's own units ----------------------------------------------------------
// The API counts in the smallest unit the provider charges (cents; yen for JPY, a zero-decimal
// currency). Intl knows how many decimals each currency has.
export function decimals(currency) {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits;
}

export function money(minor, currency) {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(minor / 10 ** decimals(currency));
}

/** "45.00" (or "4500" for JPY) → the smallest unit; NaN for anything that is not an amount. */
export function minorFrom(value, currency) {
  const text = String(value ?? '').trim().replace(/[\s,]/g, '');
  if (!/^\d+(\.\d+)?$/.test(text)) return NaN;
  const d = decimals(currency);
  const [whole, frac = ''] = text.split('.');
  if (frac.length > d) return NaN; // 45.005 dollars, or 4500.5 yen, is not an amount one can pay
  return Number(whole) * 10 ** d + Number((frac + '0'.repeat(d)).slice(0, d) || 0);
}

/** The smallest unit as the amount a director types: "45.00", or "4500" for JPY. */
export function inputFromMinor(minor, currency) {
  const d = decimals(currency);
  return (minor / 10 ** d).toFixed(d);
}
