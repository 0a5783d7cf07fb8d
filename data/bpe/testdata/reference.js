// reference.js writes gpt2-reference.jsonl.gz: 10 000 test inputs and the
// token ids the reference GPT-2 encoder gives them (the npm package
// gpt-3-encoder, version 1.1.4, a port of OpenAI's encoder.py to
// JavaScript). The Go encoder's tests compare against this file.
//
//	cd "$(mktemp -d)" && npm install gpt-3-encoder@1.1.4
//	NODE_PATH="$PWD/node_modules" node /path/to/gonox/data/bpe/testdata/reference.js
//
// Each line of the output is a JSON object {"kind": ..., "in": base64 of
// the input bytes, "ids": [...]}. Inputs are Opticks lines and passages
// (data/opticks.txt.gz), random Unicode strings, whitespace runs, emoji
// sequences and invalid UTF-8. The reference takes a JavaScript string, so
// every input is decoded as WHATWG's TextDecoder does (each maximal
// invalid subsequence becomes U+FFFD) before it is encoded: that is the
// behaviour on invalid UTF-8 the Go encoder reproduces. The inputs come
// from a seeded generator, so the file is the same on every run with the
// same node (its Unicode version matters: see ../gen_tables.js).
'use strict'
const fs = require('fs')
const path = require('path')
const zlib = require('zlib')
const { encode, decode } = require('gpt-3-encoder')

const here = __dirname
const opticks = zlib.gunzipSync(fs.readFileSync(path.join(here, '../../opticks.txt.gz')))

// mulberry32: a small seeded generator, so the inputs are reproducible.
let state = 0x9e3779b9
function rand() {
  state = (state + 0x6d2b79f5) | 0
  let t = state
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const randInt = (n) => Math.floor(rand() * n)
const pick = (a) => a[randInt(a.length)]
const utf8 = (s) => Buffer.from(s, 'utf8')

const inputs = []
const add = (kind, bytes) => inputs.push({ kind, bytes: Buffer.from(bytes) })

// 4000 lines of the book, spread over all of it, with their newline.
const lines = opticks.toString('latin1').split('\n').filter((l) => l.length > 0)
for (let i = 0; i < 4000; i++) {
  const l = lines[Math.floor((i * lines.length) / 4000)]
  add('opticks-line', Buffer.concat([Buffer.from(l, 'latin1'), Buffer.from('\n')]))
}
// 1500 passages cut at arbitrary byte offsets (several lines, paragraphs).
for (let i = 0; i < 1500; i++) {
  const start = randInt(opticks.length)
  add('opticks-passage', opticks.subarray(start, Math.min(opticks.length, start + 1 + randInt(600))))
}

// Characters to draw from: each class of the pre-tokeniser and its edges.
const pools = {
  ascii: 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?"()[]{}<>/\\|@#$%^&*-_=+~`',
  apos: ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'x", "'", "''", " 's", "’s"],
  space: [' ', ' ', ' ', '\t', '\n', '\r', '\v', '\f', '\u00a0', '\u1680', '\u2000', '\u2007', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff', '\u200b', '\u180e', '\u0085'],
  letters: ['é', 'ß', 'Ω', 'ж', 'Ж', 'ע', 'ع', 'क', 'ก', '中', '文', '字', 'あ', 'カ', '한', 'ǅ', 'ʰ', 'ª', 'ﬁ', 'ı', 'İ', '𝔄', '𐐀', '𠀀'],
  marks: ['\u0301', '\u0308', '\u093f', '\u0e31', '\u20dd', '\ufe0f', '\u200d', '\u034f'],
  numbers: ['٣', '۴', '३', '๕', '²', '½', 'Ⅻ', 'ⅷ', '①', '𝟘', '〇', '𐄇', '１'],
  punct: ['—', '–', '…', '«', '»', '¿', '¡', '€', '£', '©', '°', '·', '※', '、', '。', '「', '」', '\u0000', '\u0001', '\u007f', '\u0080', '\u009f', '\ue000', '\ufffd', '\uffff', '\u{10ffff}'],
}
// Characters assigned in Unicode 15.1 to 17.0: where Go's unicode tables
// (15.0) and the reference's disagree.
const recent = ['\u{2ebf0}', '\u{2ee5d}', '\u{10d40}', '\u{10d4a}', '\u{11bc0}', '\u{16d40}', '\u{1e5d0}', '\u{105c0}', '\u{1ccf0}', '\u{16ff4}', '\u{11b60}']
function randomCodePoint() {
  for (;;) {
    const r = rand()
    const cp = r < 0.5 ? randInt(0x800) : r < 0.85 ? randInt(0x10000) : randInt(0x110000)
    if (cp < 0xd800 || cp > 0xdfff) return String.fromCodePoint(cp)
  }
}
for (let i = 0; i < 2000; i++) {
  const n = 1 + randInt(40)
  let s = ''
  for (let j = 0; j < n; j++) {
    const r = rand()
    if (r < 0.25) s += pick(pools.ascii)
    else if (r < 0.35) s += pick(pools.apos)
    else if (r < 0.5) s += pick(pools.space)
    else if (r < 0.6) s += pick(pools.letters)
    else if (r < 0.65) s += pick(pools.marks)
    else if (r < 0.72) s += pick(pools.numbers)
    else if (r < 0.8) s += pick(pools.punct)
    else if (r < 0.85) s += pick(recent)
    else s += randomCodePoint()
  }
  add('unicode', utf8(s))
}

// 1000 whitespace runs between words, at the start and at the end.
const words = ['the', 'Light', 'of', '1704', 'Rays', ',', '.', "'s", '--', 'é', '中文']
for (let i = 0; i < 1000; i++) {
  let s = ''
  const n = 1 + randInt(6)
  for (let j = 0; j < n; j++) {
    const run = randInt(8)
    for (let k = 0; k < run; k++) s += pick(pools.space.slice(0, 8).concat([' ', ' ', ' ', '\n', '\n']))
    if (j < n - 1 || rand() < 0.5) s += pick(words)
  }
  add('whitespace', utf8(s))
}

// 500 emoji: skin tones, ZWJ sequences, flags, keycaps, variation selectors.
const emoji = ['😀', '👍', '👍🏽', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷', '🇯🇵', '#️⃣', '❤️', '☺', '✌🏿', '🧑🏻‍🔬', '🫠', '🪿', '🏴󠁧󠁢󠁳󠁣󠁴󠁿']
for (let i = 0; i < 500; i++) {
  let s = ''
  const n = 1 + randInt(8)
  for (let j = 0; j < n; j++) {
    const r = rand()
    s += r < 0.6 ? pick(emoji) : r < 0.8 ? pick([' ', '', '\n', ' ']) : pick(words)
  }
  add('emoji', utf8(s))
}

// 1000 invalid UTF-8: stray and truncated sequences, overlong forms,
// surrogates, code points past U+10FFFF, bytes F5-FF, amid valid text.
const bad = [[0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xc2], [0xe2, 0x82], [0xe0, 0x80, 0x80], [0xe0, 0x9f, 0xbf],
  [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf0, 0x8f, 0xbf, 0xbf], [0xf0, 0x9f, 0x98], [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80], [0xfe], [0xff], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x28, 0xa1], [0xc3, 0x28]]
for (let i = 0; i < 1000; i++) {
  const parts = []
  const n = 1 + randInt(6)
  for (let j = 0; j < n; j++) {
    const r = rand()
    if (r < 0.4) parts.push(Buffer.from(pick(bad)))
    else if (r < 0.55) {
      const b = Buffer.alloc(1 + randInt(6))
      for (let k = 0; k < b.length; k++) b[k] = randInt(256)
      parts.push(b)
    } else parts.push(utf8(pick(words.concat([' ', '  ', '\n', 'é', '😀', "'s"]))))
  }
  add('invalid', Buffer.concat(parts))
}

if (inputs.length !== 10000) throw new Error(`${inputs.length} inputs`)
// fatal: false: U+FFFD for maximal subparts; ignoreBOM: a leading U+FEFF is
// text like any other, not a byte-order mark to drop.
const decoder = new TextDecoder('utf-8', { ignoreBOM: true })
const out = []
for (const { kind, bytes } of inputs) {
  const text = decoder.decode(bytes)
  const ids = encode(text)
  if (ids.some((id) => typeof id !== 'number')) throw new Error(`reference gave a non-id for ${JSON.stringify(text)}`)
  // The reference's decode drops a leading U+FEFF (its TextDecoder takes
  // it for a byte-order mark); the ids hold it all the same.
  if (decode(ids) !== text.replace(/^\ufeff/, '')) throw new Error(`reference does not round-trip ${JSON.stringify(text)}`)
  out.push(JSON.stringify({ kind, in: bytes.toString('base64'), ids }))
}
const file = path.join(here, 'gpt2-reference.jsonl.gz')
fs.writeFileSync(file, zlib.gzipSync(out.join('\n') + '\n', { level: 9 }))
console.log(`wrote ${out.length} reference encodings to ${file}`)
