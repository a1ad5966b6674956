// Client-side checks that mirror the API's VALIDATION_ERROR rules, so runners see
// problems inline before a round trip. The server stays the authority. The event's age rule
// is the API's (minAge, maxAge and its wording, from the race page or the hold): no number
// of it is written here, only the same arithmetic (whole years on race day).

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const MAX_AGE_YEARS = 120; // a mistyped year, as the API's plausibility check

// Accept "1990-04-23", "1990/4/23", "1990 04 23" or "19900423" (numeric mobile
// keypads have no dash) and return YYYY-MM-DD, or the input unchanged.
export function normaliseDate(value) {
  const v = String(value || '').trim();
  let m = /^(\d{4})\D+(\d{1,2})\D+(\d{1,2})$/.exec(v);
  if (!m) m = /^(\d{4})(\d{2})(\d{2})$/.exec(v);
  return m ? `${m[1]}-${m[2].padStart(2, '0')}-${m[3].padStart(2, '0')}` : v;
}

// Today's date (local calendar) as [y, m, d]; `now` is injectable for tests.
function today(now) {
  const d = now ? new Date(now) : new Date();
  return [d.getFullYear(), d.getMonth() + 1, d.getDate()];
}

// Whole years on `day` ([y, m, d]) for someone born on [y, m, d].
export function ageOn([by, bm, bd], [y, m, d]) {
  return y - by - ((m - bm) * 100 + (d - bd) < 0 ? 1 : 0);
}

// rule: { eventName, minAge, maxAge, ageRule, raceDate } as the API gives them, or null.
export function checkDateOfBirth(value, now, rule) {
  const v = normaliseDate(value);
  if (!v) return 'Enter your date of birth.';
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(v);
  if (!m) return 'Enter your date of birth as YYYY-MM-DD, for example 1990-04-23.';
  const [y, mo, d] = m.slice(1).map(Number);
  const dt = new Date(0);
  dt.setUTCFullYear(y, mo - 1, d); // unlike Date.UTC, keeps years below 100 as written
  if (dt.getUTCFullYear() !== y || dt.getUTCMonth() !== mo - 1 || dt.getUTCDate() !== d) {
    return 'Enter a real date of birth.';
  }
  const [ty, tm, td] = today(now);
  const cmp = (a, b, c) => (a - ty) * 10000 + (b - tm) * 100 + (c - td);
  if (cmp(y, mo, d) >= 0) return 'Date of birth must be in the past.';
  if (cmp(y + MAX_AGE_YEARS + 1, mo, d) <= 0) return 'Please check the year of birth.';
  const day = rule && /^(\d{4})-(\d{2})-(\d{2})$/.exec(rule.raceDate || '');
  if (day && rule.minAge != null) {
    const age = ageOn([y, mo, d], day.slice(1).map(Number));
    if (age < rule.minAge || (rule.maxAge != null && age > rule.maxAge)) {
      return `${rule.eventName} is for ${rule.ageRule} (${rule.raceDate}); this runner will be ${age} then.`;
    }
  }
  return '';
}

function checkName(value, label) {
  const v = String(value || '').trim();
  if (!v) return `Enter your ${label}.`;
  if (v.length > 100) return `Your ${label} must be 100 characters or fewer.`;
  return '';
}

export const CHECKS = {
  email: (v) => {
    const s = String(v || '').trim();
    if (!s) return 'Enter your email address.';
    if (s.length > 254 || !EMAIL.test(s)) return 'Enter an email address like name@example.com.';
    return '';
  },
  firstName: (v) => checkName(v, 'first name'),
  lastName: (v) => checkName(v, 'last name'),
  dateOfBirth: (v, now, rule) => checkDateOfBirth(v, now, rule),
};

// Returns {field: message} for every failing field among `names`; `rule` is the event's age rule.
export function validate(values, names = Object.keys(CHECKS), now, rule) {
  const errors = {};
  for (const n of names) {
    const msg = CHECKS[n](values[n], now, rule);
    if (msg) errors[n] = msg;
  }
  return errors;
}

// The exact body sent to the API (trimmed), so a retry can resend it unchanged.
export function registrationBody(values) {
  return {
    email: String(values.email || '').trim(),
    firstName: String(values.firstName || '').trim(),
    lastName: String(values.lastName || '').trim(),
    dateOfBirth: normaliseDate(values.dateOfBirth),
  };
}
