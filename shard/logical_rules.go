package shard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Rule maps one logical axis name to the mesh axes a dimension with that
// name is split over, major to minor; nil (or empty) Mesh axes replicate
// it.
//
// Rule is an alias of an unnamed struct type so that rules can be written
// without field names, as in the Rules example, without go vet's
// composites check complaining; Rule{Logical: "mlp", Mesh: Axes{"tp"}}
// works too.
type Rule = struct {
	Logical string
	Mesh    Axes
}

// Rules are Flax's logical axis rules: they map the logical axis names set
// on parameters (tensor.WithLogicalAxes, as nn constructors do) to mesh
// axes, so that a model is written once with names such as "embed" and
// "mlp" and placed on any mesh by choosing rules:
//
//	rules := shard.Rules{
//		{"batch", shard.Axes{"dp"}},
//		{"embed", nil},           // replicated
//		{"mlp", shard.Axes{"tp"}},
//		{"heads", shard.Axes{"tp"}},
//	}
//	model = shard.FilterShard(model, mesh, rules)
//
// Rules is a SpecTree: a leaf's spec has one entry per dimension, the mesh
// axes of the rule for the dimension's logical name. Dimensions are
// replicated when
//
//   - the leaf has no logical names, or the dimension's name is "";
//   - no rule names the logical axis. This is what Flax's
//     logical_to_mesh_axes does (unassigned axes become None); note that
//     Flax NNX's sharding_rules instead pass an unknown name through as a
//     mesh axis name. A misspelt name therefore replicates silently: use
//     Validate to catch names that no rule mentions.
//
// Unlike Flax, gonox never resolves a conflict silently. Flax's rules are
// a priority list in which a rule is skipped when its mesh axes are already
// used by another dimension, and a logical name may have fallback rules;
// here each logical name has exactly one rule (a second one is an error),
// and two dimensions of one tensor that map to the same mesh axis are an
// error naming both logical names, the tensor's path and the mesh axis.
// One logical name on two dimensions is allowed when it maps to no mesh
// axis (Flax rejects it always).
type Rules []Rule

// validate checks the rules themselves: non-empty, distinct logical names
// and no mesh axis repeated within a rule.
func (r Rules) validate() error {
	for i, rule := range r {
		if rule.Logical == "" {
			return fmt.Errorf("shard.Rules: rule %d has an empty logical name", i)
		}
		for j := range i {
			if r[j].Logical == rule.Logical {
				return fmt.Errorf("shard.Rules: logical axis %q has two rules (%d and %d); give each name one rule", rule.Logical, j, i)
			}
		}
		for k, a := range rule.Mesh {
			if a == "" {
				return fmt.Errorf("shard.Rules: rule %q has an empty mesh axis name", rule.Logical)
			}
			if slices.Index(rule.Mesh, a) != k {
				return fmt.Errorf("shard.Rules: rule %q lists mesh axis %q twice", rule.Logical, a)
			}
		}
	}
	return nil
}

// lookup returns the rule for a logical name, or nil.
func (r Rules) lookup(name string) *Rule {
	for i := range r {
		if r[i].Logical == name {
			return &r[i]
		}
	}
	return nil
}

// resolve maps logical names to a spec; what names the tensor in errors.
func (r Rules) resolve(what string, names []string) (Spec, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	spec := make(Spec, len(names))
	owner := map[string]int{} // mesh axis -> dimension that uses it
	for i, n := range names {
		if n == "" {
			continue
		}
		rule := r.lookup(n)
		if rule == nil || len(rule.Mesh) == 0 {
			continue
		}
		for _, a := range rule.Mesh {
			if j, ok := owner[a]; ok {
				return nil, fmt.Errorf("shard.Rules: %s: logical axes %q (dim %d) and %q (dim %d) both map to mesh axis %q",
					what, names[j], j, n, i, a)
			}
			owner[a] = i
		}
		spec[i] = DimSpec(slices.Clone(rule.Mesh))
	}
	return spec, nil
}

// SpecFor implements SpecTree: the spec of x from its logical axis names.
// A leaf without names is replicated (P()).
func (r Rules) SpecFor(path pytree.Path, x *tensor.Tensor) (Spec, error) {
	names := x.LogicalAxes()
	if names == nil {
		if err := r.validate(); err != nil {
			return nil, err
		}
		return Spec{}, nil
	}
	what := fmt.Sprintf("%s %v %q", leafName(path), x, names)
	if len(names) != x.Rank() {
		return nil, fmt.Errorf("shard.Rules: %s: %d logical names for %d dimensions", what, len(names), x.Rank())
	}
	return r.resolve(what, names)
}

// Spec returns the spec of a tensor whose dimensions have the given
// logical names, for values that carry no names themselves (activations,
// batches) — Flax's logical_to_mesh_axes:
//
//	inSpecs := shard.Specs{"X": rules.Spec("batch", "embed"), "Model": rules}
//
// It panics if the rules are malformed or two names map to one mesh axis.
func (r Rules) Spec(names ...string) Spec {
	what := "Spec(" + strings.Trim(fmt.Sprintf("%q", names), "[]") + ")"
	s, err := r.resolve(strings.ReplaceAll(what, `" "`, `", "`), names)
	if err != nil {
		panic(err.Error())
	}
	return s
}

// Validate checks the rules against a tree whose leaves carry logical
// axis names: it reports malformed rules, logical names on the leaves
// that no rule mentions (which Rules replicate; often a typo) and leaves
// whose names map two dimensions to one mesh axis. A rule for a name no
// leaf uses is fine (rules are shared between models and activations).
func (r Rules) Validate(tree any) error {
	if err := r.validate(); err != nil {
		return err
	}
	paths, leaves := pytree.LeavesWithPath(tree)
	var unknown []string
	where := map[string]string{}
	for i, x := range leaves {
		if _, err := r.SpecFor(paths[i], x); err != nil {
			return err
		}
		for _, n := range x.LogicalAxes() {
			if n == "" || r.lookup(n) != nil {
				continue
			}
			if _, seen := where[n]; !seen {
				where[n] = leafName(paths[i])
				unknown = append(unknown, n)
			}
		}
	}
	if len(unknown) > 0 {
		parts := make([]string, len(unknown))
		for i, n := range unknown {
			parts[i] = fmt.Sprintf("%q (on %s)", n, where[n])
		}
		return fmt.Errorf("shard.Rules: no rule for logical axes %s", strings.Join(parts, ", "))
	}
	return nil
}

// String prints the rules as Flax writes them:
// (('batch', 'dp'), ('embed', None), ('mlp', ('tp', 'dp'))).
func (r Rules) String() string {
	parts := make([]string, len(r))
	for i, rule := range r {
		var m string
		switch len(rule.Mesh) {
		case 0:
			m = "None"
		case 1:
			m = "'" + rule.Mesh[0] + "'"
		default:
			m = "(" + strings.Join(pyQuoteNames(rule.Mesh), ", ") + ")"
		}
		parts[i] = fmt.Sprintf("('%s', %s)", rule.Logical, m)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func pyQuoteNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		if n == "" {
			out[i] = "None"
		} else {
			out[i] = "'" + n + "'"
		}
	}
	return out
}
