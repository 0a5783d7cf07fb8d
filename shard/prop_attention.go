package shard

import (
	"slices"

	"github.com/gonox/gonox/tensor"
)

// attentionRule: attention and its backward op (tensor.ShardAttention).
// Every head of every example computes alone, so the batch and head
// dimensions keep the mesh axes the operands give them (the largest
// operand's first, as elementwise merges) and everything else is
// gathered: the float operands of rank 4 are [batch, length, heads,
// features], those of rank 3 [batch, heads, length], and the bool mask
// [batch, heads, queries, keys], whose dimensions of size 1 broadcast and
// stay replicated. The results are laid out by the same convention.
func attentionRule(c *opCall) *step {
	q := c.in[0]
	if q.Rank() != 4 {
		return nil
	}
	B, N := q.Dim(0), q.Dim(2)
	var bAx, nAx DimSpec
	used := map[string]bool{}
	take := func(dst *DimSpec, ax DimSpec) {
		if len(*dst) > 0 || len(ax) == 0 || len(without(ax, used)) != len(ax) {
			return
		}
		*dst = slices.Clone(ax)
		for _, a := range ax {
			used[a] = true
		}
	}
	for _, i := range bySize(c.in) {
		b, n, ok := attentionDims(c.in[i])
		if !ok {
			return nil
		}
		x := c.in[i]
		if x.Dim(b) == B {
			take(&bAx, c.spec(i).dim(b))
		}
		if x.Dim(n) == N {
			take(&nAx, c.spec(i).dim(n))
		}
	}
	at := func(x *tensor.Tensor) Sharding {
		b, n, _ := attentionDims(x)
		s := make(Spec, x.Rank())
		if x.Dim(b) == B {
			s[b] = slices.Clone(bAx)
		}
		if x.Dim(n) == N {
			s[n] = slices.Clone(nAx)
		}
		return NewSharding(c.mesh, s)
	}
	st := &step{in: make([]Sharding, len(c.in))}
	for i, x := range c.in {
		st.in[i] = at(x)
	}
	// The backward op (q, k, v, out, lse, g, ...): dq, dk, dv like q, k,
	// v. Attention (q, k, v[, mask]): out like q (rank 4), the
	// log-sum-exps [batch, heads, length].
	if len(c.in) >= 6 {
		st.out = []Sharding{st.in[0], st.in[1], st.in[2]}
	} else {
		lse := make(Spec, 3)
		lse[0], lse[1] = slices.Clone(bAx), slices.Clone(nAx)
		st.out = []Sharding{st.in[0], NewSharding(c.mesh, lse)}
	}
	st.local = implLocal(c)
	return st
}

// attentionDims returns the batch and head dimensions of an operand of
// attention by the convention of attentionRule.
func attentionDims(x *tensor.Tensor) (b, n int, ok bool) {
	switch {
	case x.DType() == tensor.Bool && x.Rank() == 4:
		return 0, 1, true
	case x.DType() != tensor.Bool && x.Rank() == 4:
		return 0, 2, true
	case x.DType() != tensor.Bool && x.Rank() == 3:
		return 0, 1, true
	}
	return 0, 0, false
}
