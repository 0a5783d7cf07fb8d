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
	parts       []string // SplitRows' replacements
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

// SplitRows divides each tensor whose name, as the rules before it left
// it, matches the regular expression pattern into len(replacements) equal
// parts along its first dimension: part k is named by rewriting the match
// with replacements[k] (as Rename does) and goes through the rules after
// this one on its own. PyTorch's nn.MultiheadAttention keeps its query,
// key and value weights stacked in one in_proj_weight [3·dim, dim]:
//
//	SplitRows(`in_proj_weight$`, "QueryProj.W", "KeyProj.W", "ValueProj.W")
//
// A first dimension that len(replacements) does not divide, or a tensor
// already marked for transposition, is an error.
func SplitRows(pattern string, replacements ...string) Rule {
	return Rule{pattern: pattern, parts: append([]string{}, replacements...)}
}

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

// TorchTransformer returns the rules that load the state dict of a
// PyTorch torch.nn.TransformerEncoderLayer, TransformerDecoderLayer,
// TransformerEncoder, TransformerDecoder or Transformer (1.13's names)
// into gonox's nn type of the same name: encoder., decoder. and
// layers.{i}. become Encoder., Decoder. and Layers[i].; self_attn and
// multihead_attn become SelfAttn and MultiheadAttn, whose in_proj_weight
// [3·d_model, d_model] splits into QueryProj.W, KeyProj.W and
// ValueProj.W (each transposed), in_proj_bias into their biases, and
// out_proj into OutputProj; linear1, linear2 become Linear1, Linear2
// (weights transposed), and norm, norm1, norm2, norm3 the LayerNorms Norm,
// Norm1, Norm2, Norm3 (weight to Weight, bias to Bias). A prefix before
// the names (the module inside a larger model) is kept: add a Rename for
// it.
//
//	enc, _, err := checkpoint.ImportSafetensors("encoder.safetensors",
//		nn.NewTransformerEncoder(key, 512, 8, 6, true, opts),
//		checkpoint.MapNames(checkpoint.TorchTransformer()...))
func TorchTransformer() []Rule {
	return []Rule{
		Rename(`(^|\.)layers\.(\d+)\.`, "${1}Layers[$2]."),
		Rename(`(^|\.)encoder\.`, "${1}Encoder."),
		Rename(`(^|\.)decoder\.`, "${1}Decoder."),
		Rename(`(^|\.)self_attn\.`, "${1}SelfAttn."),
		Rename(`(^|\.)multihead_attn\.`, "${1}MultiheadAttn."),
		SplitRows(`(^|\.)in_proj_weight$`, "${1}QueryProj.W", "${1}KeyProj.W", "${1}ValueProj.W"),
		SplitRows(`(^|\.)in_proj_bias$`, "${1}QueryProj.B", "${1}KeyProj.B", "${1}ValueProj.B"),
		Rename(`(^|\.)out_proj\.`, "${1}OutputProj."),
		Rename(`(^|\.)linear([12])\.`, "${1}Linear${2}."),
		Rename(`(^|\.)norm([123]?)\.weight$`, "${1}Norm${2}.Weight"),
		Rename(`(^|\.)norm([123]?)\.bias$`, "${1}Norm${2}.Bias"),
		Rename(`(^|\.)(OutputProj|Linear[12])\.weight$`, "${1}${2}.W"),
		Rename(`(^|\.)(OutputProj|Linear[12])\.bias$`, "${1}${2}.B"),
		Transpose(`(^|\.)(QueryProj|KeyProj|ValueProj|OutputProj|Linear[12])\.W$`),
	}
}

// MapNames reads a safetensors file whose tensor names are not the tree's
// paths, a PyTorch state_dict say ("0.weight", "encoder.fc1.bias"): each
// name goes through the rules in order, each Rename rewriting it and each
// Transpose marking the tensor for transposition when it matches the name
// as it is at that point; the result is matched to the tree's paths as
// ImportSafetensors matches names. Names no rule matches are used as
// they are. Two names that end up the same, a pattern that does not
// compile, a Transpose of a tensor that is not rank 2, or a SplitRows
// that does not divide the rows is an error.
// MapNames applies to ImportSafetensors and ReadSafetensors; Restore
// refuses it.
func MapNames(rules ...Rule) RestoreOption {
	return func(c *restoreConfig) { c.rules = append(c.rules, rules...) }
}

// applyRules renames the entries, splits those a SplitRows rule matches
// and marks those to transpose, giving them their transposed shape; it
// returns the entries that result.
func applyRules(entries []stEntry, rules []Rule) ([]stEntry, error) {
	if len(rules) == 0 {
		return entries, nil
	}
	res := make([]*regexp.Regexp, len(rules))
	for i, r := range rules {
		re, err := regexp.Compile(r.pattern)
		if err != nil {
			return nil, &Error{Op: "import", Step: -1, Err: fmt.Errorf("MapNames rule %d: %v", i, err)}
		}
		res[i] = re
	}
	out := make([]stEntry, 0, len(entries))
	var run func(e stEntry, from int) error
	run = func(e stEntry, from int) error {
		for i := from; i < len(rules); i++ {
			r := rules[i]
			if !res[i].MatchString(e.Name) {
				continue
			}
			switch {
			case r.transpose:
				e.transpose = !e.transpose
			case r.parts != nil:
				n := len(r.parts)
				if n == 0 || e.transpose || len(e.Shape) == 0 || e.Shape[0]%n != 0 {
					return &Error{Op: "import", Step: -1, Path: e.Name, Err: errf(ErrMismatch,
						"file tensor %q of shape %v (transposed: %v) cannot be split in %d parts along its first dimension", e.File, e.Shape, e.transpose, n)}
				}
				size := (e.End - e.Begin) / int64(n)
				for k, rep := range r.parts {
					p := e
					p.Shape = append([]int{e.Shape[0] / n}, e.Shape[1:]...)
					p.Begin = e.Begin + int64(k)*size
					p.End = p.Begin + size
					p.Name = res[i].ReplaceAllString(e.Name, rep)
					if err := run(p, i+1); err != nil {
						return err
					}
				}
				return nil
			default:
				e.Name = res[i].ReplaceAllString(e.Name, r.replacement)
			}
		}
		out = append(out, e)
		return nil
	}
	for _, e := range entries {
		e.File = e.Name
		if err := run(e, 0); err != nil {
			return nil, err
		}
	}
	byName := map[string]string{}
	for k := range out {
		e := &out[k]
		if first, ok := byName[e.Name]; ok {
			return nil, &Error{Op: "import", Step: -1, Path: e.Name, Err: errf(ErrMismatch, "file tensors %q and %q are both mapped here", first, e.File)}
		}
		byName[e.Name] = e.File
		if e.transpose {
			if len(e.Shape) != 2 {
				return nil, &Error{Op: "import", Step: -1, Path: e.Name, Err: errf(ErrMismatch, "file tensor %q of rank %d cannot be transposed", e.File, len(e.Shape))}
			}
			e.Shape = []int{e.Shape[1], e.Shape[0]}
		}
	}
	return out, nil
}
