// Cognito's SRP-6a password verifier (USER_SRP_AUTH), computed in the browser as
// amazon-cognito-identity-js and pycognito compute it: the password never leaves the page.
// moto's cognito-idp does not check the proof, so tests/unit/test_console_srp.py pins this
// module's output against pycognito's for fixed inputs (a broken proof would pass locally
// and fail on AWS). Pure functions over BigInt and WebCrypto; no DOM.

export const N_HEX =
  'FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD' +
  'EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED' +
  'EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F' +
  '83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B' +
  'E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510' +
  '15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7' +
  'ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C' +
  'BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF';
const N = BigInt('0x' + N_HEX);
const G = 2n;
const INFO = new TextEncoder().encode('Caldera Derived Key\u0001');
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

const subtle = globalThis.crypto.subtle;

// A number (or hex string) as the hex the helpers hash: even length, and a leading 00 when
// the first digit would read as a sign bit.
export function padHex(value) {
  let hex = typeof value === 'string' ? value : value.toString(16);
  if (hex.length % 2 === 1) hex = '0' + hex;
  else if ('89abcdefABCDEF'.includes(hex[0])) hex = '00' + hex;
  return hex;
}

function hexToBytes(hex) {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function bytesToHex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function sha256Hex(bytes) {
  return bytesToHex(await subtle.digest('SHA-256', bytes)).padStart(64, '0');
}

const hexHash = (hex) => sha256Hex(hexToBytes(hex));

async function hmac(key, message) {
  const k = await subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await subtle.sign('HMAC', k, message));
}

function modPow(base, exp, mod) {
  let result = 1n;
  base = ((base % mod) + mod) % mod;
  while (exp > 0n) {
    if (exp & 1n) result = (result * base) % mod;
    base = (base * base) % mod;
    exp >>= 1n;
  }
  return result;
}

// Base64 as Python's b64decode reads it by default: characters outside the alphabet are
// dropped (moto's secret block is a UUID; Cognito's is proper base64).
function base64Bytes(text) {
  const clean = text.replace(/[^A-Za-z0-9+/]/g, '');
  const bin = atob(clean + '='.repeat((4 - (clean.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function base64(bytes) {
  return btoa(String.fromCharCode(...bytes));
}

/** A fresh private value a (128 random bytes mod N, as the helpers draw it). */
export function randomSmallA() {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(128));
  return BigInt('0x' + bytesToHex(bytes)) % N;
}

/** SRP_A: g^a mod N, as hex (what InitiateAuth's SRP_A parameter carries). */
export function srpA(smallA) {
  const A = modPow(G, smallA, N);
  if (A === 0n) throw new Error('SRP safety check failed');
  return A.toString(16);
}

/** Cognito's TIMESTAMP: "Tue Nov 3 09:04:05 UTC 2026" (no leading zero on the day). */
export function cognitoTimestamp(date) {
  const two = (n) => String(n).padStart(2, '0');
  return (
    `${DAYS[date.getUTCDay()]} ${MONTHS[date.getUTCMonth()]} ${date.getUTCDate()} ` +
    `${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())} UTC ${date.getUTCFullYear()}`
  );
}

/**
 * PASSWORD_CLAIM_SIGNATURE for a PASSWORD_VERIFIER challenge.
 * poolId: "us-east-1_Abc"; userIdForSrp, saltHex, srpBHex, secretBlock: the challenge's
 * parameters; smallA: the private value whose srpA went to InitiateAuth.
 */
export async function passwordClaimSignature({ poolId, userIdForSrp, password, saltHex, srpBHex, secretBlock, timestamp, smallA }) {
  const B = BigInt('0x' + srpBHex);
  if (B % N === 0n) throw new Error('SRP safety check failed: B is 0 mod N');
  const A = modPow(G, smallA, N);
  const k = BigInt('0x' + (await hexHash('00' + N_HEX + '02')));
  const u = BigInt('0x' + (await hexHash(padHex(A) + padHex(B))));
  if (u === 0n) throw new Error('SRP safety check failed: u is 0');
  const poolName = poolId.split('_')[1];
  const userHash = await sha256Hex(new TextEncoder().encode(`${poolName}${userIdForSrp}:${password}`));
  const x = BigInt('0x' + (await hexHash(padHex(saltHex) + userHash)));
  const base = (((B - k * modPow(G, x, N)) % N) + N) % N;
  const S = modPow(base, smallA + u * x, N);
  // HKDF-SHA256 (one block): the key the claim is signed with.
  const prk = await hmac(hexToBytes(padHex(u.toString(16))), hexToBytes(padHex(S)));
  const key = (await hmac(prk, INFO)).slice(0, 16);
  const enc = new TextEncoder();
  const message = concat(enc.encode(poolName), enc.encode(userIdForSrp), base64Bytes(secretBlock), enc.encode(timestamp));
  return base64(await hmac(key, message));
}
