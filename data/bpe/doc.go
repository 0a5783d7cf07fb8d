// Package bpe is a byte-level byte-pair-encoding tokenizer: GPT-2's
// algorithm, reading and writing GPT-2's vocabulary files, and training a
// new vocabulary from a corpus.
//
// # Encoding
//
// Text is first cut into pre-tokens by GPT-2's pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (Words; a hand-written scanner, since Go's regexp has no lookahead),
// then the bytes of each pre-token are merged pair by pair, the pair of
// lowest rank first, into tokens of the vocabulary. Every byte has a token,
// so any text encodes and Decode gives it back. The letters, numbers and
// white space of the pattern are those of the JavaScript engine the
// reference encodings were made with (Unicode 17.0; tables.go is generated
// by gen_tables.js), not those of Go's unicode package, whatever its
// version. Invalid UTF-8 is replaced first, each maximal invalid
// subsequence by one U+FFFD, as WHATWG's decoder (and so the reference)
// does (Sanitize); valid text round-trips exactly.
//
//	tok, err := bpe.Load("encoder.json", "vocab.bpe") // GPT-2's files
//	ids := tok.Encode("Light is refracted.")         // [15047 318 1006 20216 13]
//	text := tok.Decode(ids)
//
// Encodings equal those of the npm package gpt-3-encoder (a port of
// OpenAI's encoder.py) on 10,000 test strings: lines and passages of
// Newton's Opticks, random Unicode, whitespace runs, emoji and invalid
// UTF-8 (testdata/reference.js writes them). Encoding the Opticks
// paragraph by paragraph is about 40 times as fast as that encoder under
// node 20 on the same machine, with warm caches and cold (medians of 3
// rounds of bench/bpe.sh, which interleaves BenchmarkBPEEncode with
// bench/bpe_node.js, on a shared 2-core AMD EPYC with AVX-512).
//
// # Vocabulary files
//
// Read and Load take GPT-2's encoder.json (token to id) and vocab.bpe (the
// merges in rank order), gzipped or not; Write and Save write them. Files
// from the outside world are checked: ids 0..n-1 each once, a token for
// every byte, every merge joining two tokens into a third; an error names
// the file and what is wrong, and no file larger than MaxFileBytes is read.
// GPT-2's own files (MIT-licensed) are in testdata, gzipped, with their
// provenance.
//
// # Training
//
// Train learns a vocabulary of a given size from a corpus as GPT-2's was
// learnt: starting from the 256 bytes, the most frequent adjacent pair
// within pre-tokens is merged, again and again; ties go to the pair whose
// bytes sort first, so training is deterministic. The last token is
// EndOfText.
//
//	tok := bpe.Train(data.Opticks(), 2000) // 2,000 tokens: bytes, 1,743 merges, <|endoftext|>
//
// A Tokenizer satisfies data.Tokenizer, so data.WriteTokens can turn a
// text stream into a token file with it.
package bpe
