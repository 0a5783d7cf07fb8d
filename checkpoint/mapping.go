package checkpoint

import (
	"fmt"
	"regexp"
	"strconv"
)

// A Rule rewrites the tensor names of a safetensors file on their way to
// tree paths (Rename), or transforms the tensors under some names
// (Transpose). MapNames applies a list of them.
type Rule struct {
	pattern     string
	replacement string
	transpose   bool
}

// Rename rewrites the part of each name that matches the regular
// expression pattern (RE2 syntax) into replacement, in which $1, ${name}
// and so on stand for submatches, as regexp.Regexp.ReplaceAllString
// does: Rename(`\.weight$`, ".W").
func Rename(pattern, replacement string) Rule {
	return Rule{pattern: pattern, replacement: replacement}
}

// Transpose swaps the two dimensions of each rank-2 tensor whose name,
// as the rules before it left it, matches the regular expression
// pattern. PyTorch's nn.Linear keeps its weight as [out, in] and computes
// x·Wᵀ; gonox's nn.Linear keeps [in, out] and computes x·W.
func Transpose(pattern string) Rule { return Rule{pattern: pattern, transpose: true} }

// TorchMLP returns the rules that load the nn.Linear layers of a PyTorch
// nn.Sequential (activations between them have no parameters, so the
// Linear layers sit at indices such as 0, 2, 4) into a gonox nn.MLP: the
// Linear at Sequential index indices[k] becomes Layers[k], its weight
// (transposed) W and its bias B.
//
//	mlp, _, err := checkpoint.ImportSafetensors("mlp.safetensors", like,
//		checkpoint.MapNames(checkpoint.TorchMLP(0, 2)...))
func TorchMLP(indices ...int) []Rule {
	var rules []Rule
	for k, i := range indices {
		rules = append(rules, Rename(`^`+strconv.Itoa(i)+`\.`, "Layers["+strconv.Itoa(k)+"]."))
	}
	return append(rules,
		Rename(`^(Layers\[\d+\])\.weight$`, "$1.W"),
		Rename(`^(Layers\[\d+\])\.bias$`, "$1.B"),
		Transpose(`^Layers\[\d+\]\.W$`))
}

// TorchRNN returns the rules that load the state dict of a PyTorch
// torch.nn.LSTM, GRU or RNN of the given number of layers, bidirectional
// or not, into gonox's nn.LSTM, nn.GRU or nn.RNN: the parameters of layer
// k (and direction d, 1 for PyTorch's _reverse) become Weights[k·D+d],
// weight_ih_l{k}{_reverse} its WeightIH (transposed from [gates·hidden,
// in] to [in, gates·hidden]), weight_hh its WeightHH (transposed),
// bias_ih and bias_hh its BiasIH and BiasHH, and an LSTM's weight_hr (of
// proj_size) its WeightHR (transposed). A prefix before the names
// ("rnn.weight_ih_l0", the layer inside a larger model) is kept: add a
// Rename for it.
//
//	lstm, _, err := checkpoint.ImportSafetensors("lstm.safetensors",
//		nn.NewLSTM(key, in, hidden, opts), checkpoint.MapNames(checkpoint.TorchRNN(2, true)...))
func TorchRNN(layers int, bidirectional bool) []Rule {
	dirs := []string{""}
	if bidirectional {
		dirs = append(dirs, "_reverse")
	}
	fields := []struct{ torch, gonox string }{
		{"weight_ih", "WeightIH"}, {"weight_hh", "WeightHH"}, {"bias_ih", "BiasIH"},
		{"bias_hh", "BiasHH"}, {"weight_hr", "WeightHR"},
	}
	var rules []Rule
	for k := range layers {
		for d, sfx := range dirs {
			for _, f := range fields {
				rules = append(rules, Rename(`(^|\.)`+f.torch+"_l"+strconv.Itoa(k)+sfx+`$`,
					"${1}Weights["+strconv.Itoa(k*len(dirs)+d)+"]."+f.gonox))
			}
		}
	}
	return append(rules, Transpose(`(^|\.)Weights\[\d+\]\.Weight(IH|HH|HR)$`))
}

// MapNames reads a safetensors file whose tensor names are not the tree's
// paths, a PyTorch state_dict say ("0.weight", "encoder.fc1.bias"): each
// name goes through the rules in order, each Rename rewriting it and each
// Transpose marking the tensor for transposition when it matches the name
// as it is at that point; the result is matched to the tree's paths as
// ImportSafetensors matches names. Names no rule matches are used as
// they are. Two names that end up the same, a pattern that does not
// compile, or a Transpose of a tensor that is not rank 2 is an error.
// MapNames applies to ImportSafetensors and ReadSafetensors; Restore
// refuses it.
func MapNames(rules ...Rule) RestoreOption {
	return func(c *restoreConfig) { c.rules = append(c.rules, rules...) }
}

// applyRules renames the entries and marks those to transpose, giving
// them their transposed shape.
func applyRules(entries []stEntry, rules []Rule) error {
	if len(rules) == 0 {
		return nil
	}
	res := make([]*regexp.Regexp, len(rules))
	for i, r := range rules {
		re, err := regexp.Compile(r.pattern)
		if err != nil {
			return &Error{Op: "import", Step: -1, Err: fmt.Errorf("MapNames rule %d: %v", i, err)}
		}
		res[i] = re
	}
	byName := map[string]string{}
	for k := range entries {
		e := &entries[k]
		e.File = e.Name
		for i, r := range rules {
			if !res[i].MatchString(e.Name) {
				continue
			}
			if r.transpose {
				e.transpose = !e.transpose
			} else {
				e.Name = res[i].ReplaceAllString(e.Name, r.replacement)
			}
		}
		if first, ok := byName[e.Name]; ok {
			return &Error{Op: "import", Step: -1, Path: e.Name, Err: errf(ErrMismatch, "file tensors %q and %q are both mapped here", first, e.File)}
		}
		byName[e.Name] = e.File
		if e.transpose {
			if len(e.Shape) != 2 {
				return &Error{Op: "import", Step: -1, Path: e.Name, Err: errf(ErrMismatch, "file tensor %q of rank %d cannot be transposed", e.File, len(e.Shape))}
			}
			e.Shape = []int{e.Shape[1], e.Shape[0]}
		}
	}
	return nil
}
