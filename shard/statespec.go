package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// LikeParams returns a SpecTree that places optimizer state like the
// parameters it belongs to, as ZeRO does: each state leaf gets the spec
// that specs gives the parameter whose path is a suffix of the leaf's path
// and whose shape is the leaf's shape (for a block inside Map, as out specs
// see them, the shape of the parameter's block). With params
//
//	MLP{Layers: [Linear{W, B}, ...]}
//
// the Adam moment at "Mu.Layers[0].W" is placed like the parameter
// "Layers[0].W", and so is "Nu.Layers[0].W". When several parameters of
// the leaf's shape have paths that are suffixes of the leaf's path, the
// longest path wins. Scalar leaves (step counts, loss scales) are
// replicated.
//
// A state leaf of rank 1 or more that matches no parameter is an error
// naming it (and the parameter it matches by path only, such as the
// factored second moment of Adafactor), because replicating it silently
// would undo ZeRO. Give such leaves their own specs, for instance with a
// SpecFunc that falls back on another SpecTree.
//
// State built with pytree.Map or pytree.MapN from the parameters keeps
// their logical axis names, so Rules alone already place it like the
// parameters; LikeParams serves every other SpecTree (Specs keyed by
// parameter path, SpecFunc) and state whose leaves lost their names.
//
// The parameters are flattened once, when LikeParams is called; specs is
// asked for a parameter's spec each time a state leaf matches it.
func LikeParams(params any, specs SpecTree) SpecTree {
	paths, leaves := pytree.LeavesWithPath(params)
	l := &likeParams{specs: specs, paths: paths, leaves: leaves, byLast: map[string][]int{}}
	for i, p := range paths {
		k := ""
		if len(p) > 0 {
			k = p[len(p)-1].String()
		}
		l.byLast[k] = append(l.byLast[k], i)
	}
	return l
}

type likeParams struct {
	specs  SpecTree
	paths  []pytree.Path
	leaves []*tensor.Tensor
	byLast map[string][]int // parameter indices by the last element of their path
}

// SpecFor implements SpecTree.
func (l *likeParams) SpecFor(path pytree.Path, x *tensor.Tensor) (Spec, error) {
	if x.Rank() == 0 {
		return Spec{}, nil
	}
	best, byPath := -1, -1 // longest suffix with the leaf's shape; longest suffix
	consider := func(idx []int) {
		for _, i := range idx {
			p := l.paths[i]
			if len(p) > len(path) || !p.Equal(path[len(path)-len(p):]) {
				continue
			}
			if byPath < 0 || len(p) > len(l.paths[byPath]) {
				byPath = i
			}
			if l.sameShape(i, x) && (best < 0 || len(p) > len(l.paths[best])) {
				best = i
			}
		}
	}
	if len(path) > 0 {
		consider(l.byLast[path[len(path)-1].String()])
	}
	consider(l.byLast[""]) // a parameter that is the root of its tree
	if best < 0 {
		if byPath >= 0 {
			return nil, fmt.Errorf("shard.LikeParams: state leaf %s %v matches parameter %s %v by path but not by shape",
				leafName(path), x, leafName(l.paths[byPath]), l.leaves[byPath])
		}
		return nil, fmt.Errorf("shard.LikeParams: state leaf %s %v: no parameter path is a suffix of its path", leafName(path), x)
	}
	p := l.leaves[best]
	s, err := l.specs.SpecFor(l.paths[best], p)
	if err != nil {
		return nil, fmt.Errorf("shard.LikeParams: state leaf %s: parameter %s: %w", leafName(path), leafName(l.paths[best]), err)
	}
	return s, nil
}

// sameShape reports whether state leaf x has the shape of parameter i: the
// same global shape or, for a block inside Map (out specs are asked with
// device blocks), the shape of the parameter's block under its spec.
func (l *likeParams) sameShape(i int, x *tensor.Tensor) bool {
	p := l.leaves[i]
	if slices.Equal(p.Shape(), x.Shape()) {
		return true
	}
	loc := x.Local()
	if loc == nil {
		return false
	}
	env, ok := loc.Env.(*devEnv)
	if !ok {
		return false
	}
	s, err := l.specs.SpecFor(l.paths[i], p)
	if err != nil || s.check(env.mesh, p.Shape()) != "" {
		return false
	}
	return slices.Equal(NewSharding(env.mesh, s).geometry("shard.LikeParams", p.Shape()).block, x.Shape())
}
