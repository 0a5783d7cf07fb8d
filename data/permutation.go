package data

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Permutation is a random permutation of [0, n) computed one position at a
// time, in constant memory and time per position, for datasets too large
// for tensor.Permutation's array of n indices (Grain's index_shuffle plays
// this part in JAX). It is a Feistel network over the smallest domain of
// 4^h ≥ n integers, with rounds keyed by Threefry (tensor.FoldIn), walking
// the cycle of a position until it lands below n. The same key and n always
// give the same permutation; different keys give independent ones.
type Permutation struct {
	n    int
	half uint
	keys [feistelRounds]tensor.Key
}

const feistelRounds = 6

// NewPermutation returns the permutation of [0, n) of key. It panics if n
// is negative.
func NewPermutation(key tensor.Key, n int) Permutation {
	if n < 0 {
		panic(fmt.Sprintf("data.NewPermutation: size %d is negative", n))
	}
	p := Permutation{n: n, half: 1}
	for n > 1 && uint64(n-1)>>(2*p.half) != 0 {
		p.half++
	}
	for r := range p.keys {
		p.keys[r] = tensor.FoldIn(key, uint32(r))
	}
	return p
}

// Len returns n.
func (p Permutation) Len() int { return p.n }

// At returns the element at position i. It panics if i is outside [0, n).
func (p Permutation) At(i int) int {
	if i < 0 || i >= p.n {
		panic(fmt.Sprintf("data.Permutation.At: position %d out of range [0,%d)", i, p.n))
	}
	x := uint64(i)
	for {
		x = p.feistel(x)
		if x < uint64(p.n) {
			return int(x)
		}
	}
}

// feistel is a bijection of [0, 4^half).
func (p Permutation) feistel(x uint64) uint64 {
	mask := uint64(1)<<p.half - 1
	l, r := x>>p.half, x&mask
	for _, k := range p.keys {
		d := tensor.FoldIn(k, uint32(r)).Data()
		l, r = r, l^(uint64(d[0]^d[1])&mask)
	}
	return l<<p.half | r
}
