// The waiting room's proof of work (SECKILL_ROOM_POW_BITS): find a nonce
// such that SHA-256 of "challenge:nonce" starts with `bits` zero bits. A
// synchronous SHA-256 (Web Crypto's is asynchronous: a promise per hash
// was tens of times slower), run in slices so the page stays responsive.
"use strict";

const sha256K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const sha256W = new Uint32Array(64);

// sha256First is the first 32 bits of SHA-256 of m's first n bytes; m
// must have room for the padding (n + 9 bytes, rounded up to 64), and
// its bytes past n are overwritten.
function sha256First(m, n) {
  const blocks = Math.ceil((n + 9) / 64);
  m.fill(0, n, blocks * 64);
  m[n] = 0x80;
  const bitLen = n * 8, end = blocks * 64;
  m[end - 4] = bitLen >>> 24; m[end - 3] = bitLen >>> 16; m[end - 2] = bitLen >>> 8; m[end - 1] = bitLen;
  let h0 = 0x6a09e667, h1 = 0xbb67ae85, h2 = 0x3c6ef372, h3 = 0xa54ff53a, h4 = 0x510e527f, h5 = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19;
  const w = sha256W;
  for (let off = 0; off < end; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = (m[off + 4 * i] << 24) | (m[off + 4 * i + 1] << 16) | (m[off + 4 * i + 2] << 8) | m[off + 4 * i + 3];
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15], b = w[i - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7;
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (h + S1 + ((e & f) ^ (~e & g)) + sha256K[i] + w[i]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    h0 = (h0 + a) | 0; h1 = (h1 + b) | 0; h2 = (h2 + c) | 0; h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0; h5 = (h5 + f) | 0; h6 = (h6 + g) | 0; h7 = (h7 + h) | 0;
  }
  return h0 >>> 0;
}

// solvePow counts nonces up from 0 until one solves the challenge (bits
// at most 32: the server's bound). Resolves to the nonce. The challenge's
// bytes are written once; each try writes its decimal digits after them.
async function solvePow(challenge, bits) {
  const prefix = new TextEncoder().encode(challenge + ":");
  const m = new Uint8Array(Math.ceil((prefix.length + 16 + 9) / 64) * 64);
  m.set(prefix);
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  for (let n = 0; ; n++) {
    const digits = String(n);
    for (let i = 0; i < digits.length; i++) m[prefix.length + i] = digits.charCodeAt(i);
    if ((sha256First(m, prefix.length + digits.length) & mask) >>> 0 === 0) return digits;
    if (n % 50000 === 49999) await new Promise((done) => setTimeout(done, 0));
  }
}
