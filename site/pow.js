// The queue's proof-of-work, solved in the page: find a decimal nonce such that
// SHA-256(challenge + ':' + nonce) starts with `bits` zero bits (racecap.fairness.work).
// Plain SHA-256 in JS, not crypto.subtle: one digest per promise would cost more than the
// hash itself. The challenge's whole 64-byte blocks are hashed once (the "midstate"), so
// each try hashes only the last one or two blocks. It runs in slices of ~40 ms on the
// page's own thread, so the page stays responsive without a Worker (a Worker's script
// would need its own fingerprinted URL, and a blob: worker is refused by the CSP).

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const W = new Uint32Array(64);

function block(H, bytes, o) {
  for (let i = 0; i < 16; i++, o += 4) W[i] = (bytes[o] << 24) | (bytes[o + 1] << 16) | (bytes[o + 2] << 8) | bytes[o + 3];
  for (let i = 16; i < 64; i++) {
    const a = W[i - 15];
    const b = W[i - 2];
    const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
    const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
  for (let i = 0; i < 64; i++) {
    const t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7)))
      + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10)))
      + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  H[0] = (H[0] + a) | 0; H[1] = (H[1] + b) | 0; H[2] = (H[2] + c) | 0; H[3] = (H[3] + d) | 0;
  H[4] = (H[4] + e) | 0; H[5] = (H[5] + f) | 0; H[6] = (H[6] + g) | 0; H[7] = (H[7] + h) | 0;
}

// Leading zero bits of the digest's first 64 bits (the server never asks for more than 32).
function zeros(H) {
  return H[0] ? Math.clz32(H[0]) : 32 + Math.clz32(H[1]);
}

// Resolves to the nonce (a string). onProgress(tries) after each slice; rejects on abort.
export async function solve(challenge, bits, { signal, onProgress } = {}) {
  const prefix = new TextEncoder().encode(`${challenge}:`);
  const whole = prefix.length - (prefix.length % 64);
  const mid = Int32Array.from(IV);
  for (let o = 0; o < whole; o += 64) block(mid, prefix, o);
  const rest = prefix.subarray(whole);
  const buf = new Uint8Array(192);
  buf.set(rest);
  const H = new Int32Array(8);
  for (let n = 0; ; ) {
    const until = performance.now() + 40;
    do {
      const digits = String(n);
      let len = rest.length;
      for (let i = 0; i < digits.length; i++) buf[len++] = digits.charCodeAt(i);
      const total = prefix.length + digits.length;
      buf[len++] = 0x80;
      const end = len + 8 <= 64 ? 64 : 128;
      buf.fill(0, len, end);
      const bitLen = total * 8;
      buf[end - 4] = bitLen >>> 24; buf[end - 3] = bitLen >>> 16; buf[end - 2] = bitLen >>> 8; buf[end - 1] = bitLen;
      H.set(mid);
      block(H, buf, 0);
      if (end === 128) block(H, buf, 64);
      if (zeros(H) >= bits) return digits;
      n++;
    } while ((n & 255) || performance.now() < until);
    if (onProgress) onProgress(n);
    await new Promise((ok) => setTimeout(ok, 0));
    if (signal && signal.aborted) throw signal.reason || new DOMException('Aborted', 'AbortError');
  }
}
