// bench/bpe_node.js: the reference GPT-2 encoder (npm gpt-3-encoder) on
// Newton's Opticks, the text of gonox's BenchmarkBPEEncode (data/bpe), in
// MB/s. Both encode the book paragraph by paragraph (pieces ending at a
// blank line): the reference's encode grows its result with Array.concat
// per word, which is quadratic in the length of one input, so a whole
// book at once would measure that rather than the encoder. The first pass fills the encoder's cache of words (printed as
// "cold"); the median of the passes after it is the steady state, which
// BenchmarkBPEEncode measures. Prints lines in go test's benchmark format.
//
//	NODE_PATH=/path/to/node_modules node bench/bpe_node.js [SECONDS]
'use strict'
const fs = require('fs')
const path = require('path')
const zlib = require('zlib')
const { encode } = require('gpt-3-encoder')

const seconds = Number(process.argv[2] || 3)
const text = zlib.gunzipSync(fs.readFileSync(path.join(__dirname, '../data/opticks.txt.gz'))).toString('utf8')
const bytes = Buffer.byteLength(text, 'utf8')
const pieces = text.split(/(?<=\n\n)/)

const time = () => {
  const t0 = process.hrtime.bigint()
  let n = 0
  for (const p of pieces) n += encode(p).length
  return [Number(process.hrtime.bigint() - t0) / 1e9, n]
}
const [cold, n] = time()
const runs = []
const end = Date.now() + seconds * 1000
while (Date.now() < end || runs.length < 3) runs.push(time()[0])
runs.sort((a, b) => a - b)
const warm = runs[Math.floor(runs.length / 2)]
const line = (name, s, extra) =>
  console.log(`${name}\t${runs.length}\t${(s * 1e9).toFixed(0)} ns/op\t${(bytes / s / 1e6).toFixed(2)} MB/s${extra}`)
line('BenchmarkNodeBPEEncodeCold', cold, '')
line('BenchmarkNodeBPEEncode', warm, `\t${(bytes / n).toFixed(3)} bytes/token`)
