package tensor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// nilOps calls every public op with the given tensor operands, in the
// order of its parameters (a list parameter takes one operand). The other
// arguments are valid but irrelevant: the nil check comes first.
var nilOps = map[string]func(t []*tensor.Tensor){
	"MatMulTo":  func(t []*tensor.Tensor) { tensor.MatMulTo(t[0], t[1], false, false, tensor.Float32) },
	"MatMulAs":  func(t []*tensor.Tensor) { tensor.MatMulAs(t[0], t[1], false, false, tensor.BFloat16, tensor.Float32) },
	"Convert":   func(t []*tensor.Tensor) { tensor.Convert(t[0], tensor.BFloat16) },
	"SGDStep":   func(t []*tensor.Tensor) { tensor.SGDStep(t[0], t[1], nil, 0.9, -0.1, false) },
	"AdamStep":  func(t []*tensor.Tensor) { tensor.AdamStep(t[0], t[1], t[2], t[3], tensor.AdamCoeffs{}) },
	"AdamSteps": func(t []*tensor.Tensor) { tensor.AdamSteps(t[:1], t[1:2], t[2:3], t[3:4], []tensor.AdamCoeffs{{}}) },
	"AdamStepsDonating": func(t []*tensor.Tensor) {
		tensor.AdamStepsDonating(t[:1], t[1:2], t[2:3], t[3:4], []tensor.AdamCoeffs{{}})
	},
	"AdamStepsInto": func(t []*tensor.Tensor) {
		tensor.AdamStepsInto(nil, t[:1], t[1:2], t[2:3], t[3:4], []tensor.AdamCoeffs{{}})
	},
	"AdamStepsIntoOverMoments": func(t []*tensor.Tensor) {
		tensor.AdamStepsIntoOverMoments(nil, t[:1], t[1:2], t[2:3], t[3:4], []tensor.AdamCoeffs{{}})
	},
	"SGDStepInto": func(t []*tensor.Tensor) { tensor.SGDStepInto(nil, t[0], t[1], nil, 0.9, -0.1, false) },
	"AdamStepIntoOverMomentsLater": func(t []*tensor.Tensor) {
		tensor.AdamStepIntoOverMomentsLater(nil, t[0], t[1], t[2], tensor.AdamCoeffs{})
	},
	"SGDStepIntoLater": func(t []*tensor.Tensor) { tensor.SGDStepIntoLater(nil, t[0], nil, 0.9, -0.1, false) },
	"StepFrom":         func(t []*tensor.Tensor) { tensor.StepFrom(func(int, []float32) {}, t[0]) },
	"SumProductsPartThen": func(t []*tensor.Tensor) {
		tensor.SumProductsPartThen(t[:1], t[1:2], 0, 0, 1, func(int, []float32) {})
	},
	"RaggedDot":           func(t []*tensor.Tensor) { tensor.RaggedDot(t[0], t[1], t[2]) },
	"RaggedDotAs":         func(t []*tensor.Tensor) { tensor.RaggedDotAs(t[0], t[1], t[2], tensor.BFloat16) },
	"DotProductAttention": func(t []*tensor.Tensor) { tensor.DotProductAttention(t[0], t[1], t[2], nil, 0, false) },
	"DotProductAttentionAs": func(t []*tensor.Tensor) {
		tensor.DotProductAttentionAs(t[0], t[1], t[2], nil, 0, false, tensor.BFloat16)
	},
	"Equal":        func(t []*tensor.Tensor) { tensor.Equal(t[0], t[1]) },
	"NotEqual":     func(t []*tensor.Tensor) { tensor.NotEqual(t[0], t[1]) },
	"Less":         func(t []*tensor.Tensor) { tensor.Less(t[0], t[1]) },
	"LessEqual":    func(t []*tensor.Tensor) { tensor.LessEqual(t[0], t[1]) },
	"Greater":      func(t []*tensor.Tensor) { tensor.Greater(t[0], t[1]) },
	"GreaterEqual": func(t []*tensor.Tensor) { tensor.GreaterEqual(t[0], t[1]) },
	"LogicalAnd":   func(t []*tensor.Tensor) { tensor.LogicalAnd(t[0], t[1]) },
	"LogicalOr":    func(t []*tensor.Tensor) { tensor.LogicalOr(t[0], t[1]) },
	"LogicalXor":   func(t []*tensor.Tensor) { tensor.LogicalXor(t[0], t[1]) },
	"LogicalNot":   func(t []*tensor.Tensor) { tensor.LogicalNot(t[0]) },
	"IsNaN":        func(t []*tensor.Tensor) { tensor.IsNaN(t[0]) },
	"IsFinite":     func(t []*tensor.Tensor) { tensor.IsFinite(t[0]) },
	"Where":        func(t []*tensor.Tensor) { tensor.Where(t[0], t[1], t[2]) },
	"AsType":       func(t []*tensor.Tensor) { tensor.AsType(t[0], tensor.Int32) },
	"Concat":       func(t []*tensor.Tensor) { tensor.Concat(0, t[0]) },
	"Split":        func(t []*tensor.Tensor) { tensor.Split(t[0], 0, 1) },
	"SplitSizes":   func(t []*tensor.Tensor) { tensor.SplitSizes(t[0], 0, []int{1}) },
	"Stack":        func(t []*tensor.Tensor) { tensor.Stack(0, t[0]) },
	"Unstack":      func(t []*tensor.Tensor) { tensor.Unstack(t[0], 0) },
	"Repeat":       func(t []*tensor.Tensor) { tensor.Repeat(t[0], 2, 0) },
	"Tile":         func(t []*tensor.Tensor) { tensor.Tile(t[0], 2) },
	"Beside":       func(t []*tensor.Tensor) { tensor.Beside(t[0], func() {})() },
	"Bincount":     func(t []*tensor.Tensor) { tensor.Bincount(t[0], nil, 3) },
	"Cumsum":       func(t []*tensor.Tensor) { tensor.Cumsum(t[0], 0) },
	"CumsumExclusive": func(t []*tensor.Tensor) {
		tensor.CumsumExclusive(t[0], 0)
	},
	"CumsumReverse":  func(t []*tensor.Tensor) { tensor.CumsumReverse(t[0], 0) },
	"Add":            func(t []*tensor.Tensor) { tensor.Add(t[0], t[1]) },
	"Sub":            func(t []*tensor.Tensor) { tensor.Sub(t[0], t[1]) },
	"Mul":            func(t []*tensor.Tensor) { tensor.Mul(t[0], t[1]) },
	"Div":            func(t []*tensor.Tensor) { tensor.Div(t[0], t[1]) },
	"Rem":            func(t []*tensor.Tensor) { tensor.Rem(t[0], t[1]) },
	"FloorDiv":       func(t []*tensor.Tensor) { tensor.FloorDiv(t[0], t[1]) },
	"Maximum":        func(t []*tensor.Tensor) { tensor.Maximum(t[0], t[1]) },
	"Minimum":        func(t []*tensor.Tensor) { tensor.Minimum(t[0], t[1]) },
	"Pow":            func(t []*tensor.Tensor) { tensor.Pow(t[0], t[1]) },
	"AddScalar":      func(t []*tensor.Tensor) { tensor.AddScalar(t[0], 1) },
	"MulScalar":      func(t []*tensor.Tensor) { tensor.MulScalar(t[0], 2) },
	"BiasAct":        func(t []*tensor.Tensor) { tensor.BiasAct(t[0], t[1], tensor.ActRelu) },
	"MatMulBiasAct":  func(t []*tensor.Tensor) { tensor.MatMulBiasAct(t[0], t[1], t[2], tensor.ActRelu) },
	"ChannelMoments": func(t []*tensor.Tensor) { tensor.ChannelMoments(t[0]) },
	"BatchNorm":      func(t []*tensor.Tensor) { tensor.BatchNorm(t[0], nil, nil, nil, 1e-5, tensor.ActRelu) },
	"LayerNorm":      func(t []*tensor.Tensor) { tensor.LayerNorm(t[0], nil, nil, 1e-5) },
	"LSTMCell":       func(t []*tensor.Tensor) { tensor.LSTMCell(t[0], nil, t[1]) },
	"GRUCell":        func(t []*tensor.Tensor) { tensor.GRUCell(t[0], t[1], t[2]) },
	"ActMatMul":      func(t []*tensor.Tensor) { tensor.ActMatMul(tensor.ActGelu, t[0], t[1]) },
	"ActRaggedDot":   func(t []*tensor.Tensor) { tensor.ActRaggedDot(tensor.ActGelu, t[0], t[1], t[2]) },
	"ActMatMulAs":    func(t []*tensor.Tensor) { tensor.ActMatMulAs(tensor.ActGelu, t[0], t[1], tensor.BFloat16) },
	"ActRaggedDotAs": func(t []*tensor.Tensor) { tensor.ActRaggedDotAs(tensor.ActGelu, t[0], t[1], t[2], tensor.BFloat16) },
	"ChannelAffine":  func(t []*tensor.Tensor) { tensor.ChannelAffine(t[0], t[1], t[2], tensor.ActRelu) },
	"ChannelAffineAdd": func(t []*tensor.Tensor) {
		tensor.ChannelAffineAdd(t[0], t[1], t[2], t[3], tensor.ActRelu)
	},
	"StopGradient":  func(t []*tensor.Tensor) { tensor.StopGradient(t[0]) },
	"Named":         func(t []*tensor.Tensor) { tensor.Named(t[0], "h") },
	"Take":          func(t []*tensor.Tensor) { tensor.Take(t[0], t[1], 0) },
	"TakeAlongAxis": func(t []*tensor.Tensor) { tensor.TakeAlongAxis(t[0], t[1], 0) },
	"OneHot":        func(t []*tensor.Tensor) { tensor.OneHot(t[0], 3) },
	"WithLocal":     func(t []*tensor.Tensor) { tensor.WithLocal(t[0], nil) },
	"Vary":          func(t []*tensor.Tensor) { tensor.Vary(t[0], nil) },
	"MSE":           func(t []*tensor.Tensor) { tensor.MSE(t[0], t[1]) },
	"Conv":          func(t []*tensor.Tensor) { tensor.Conv(t[0], t[1], tensor.ConvSpec{}) },
	"ConvTranspose": func(t []*tensor.Tensor) { tensor.ConvTranspose(t[0], t[1], tensor.ConvTransposeSpec{}) },
	"ReduceWindow": func(t []*tensor.Tensor) {
		tensor.ReduceWindow(t[0], tensor.WindowMax, tensor.Window{Dims: []int{1}})
	},
	"AdaptivePool": func(t []*tensor.Tensor) { tensor.AdaptivePool(t[0], tensor.WindowMean, 1) },
	"SoftmaxCrossEntropy": func(t []*tensor.Tensor) {
		tensor.SoftmaxCrossEntropy(t[0], t[1])
	},
	"SoftmaxCrossEntropyProbs": func(t []*tensor.Tensor) {
		tensor.SoftmaxCrossEntropyProbs(t[0], t[1])
	},
	"Softplus":   func(t []*tensor.Tensor) { tensor.Softplus(t[0]) },
	"LogSigmoid": func(t []*tensor.Tensor) { tensor.LogSigmoid(t[0]) },
	"SigmoidBinaryCrossEntropy": func(t []*tensor.Tensor) {
		tensor.SigmoidBinaryCrossEntropy(t[0], t[1])
	},
	"MatMul":             func(t []*tensor.Tensor) { tensor.MatMul(t[0], t[1]) },
	"MatMulT":            func(t []*tensor.Tensor) { tensor.MatMulT(t[0], t[1], false, true) },
	"SumProductsPart":    func(t []*tensor.Tensor) { tensor.SumProductsPart(t[:1], t[1:2], 0, 0, 1) },
	"ProductColumnsInto": func(t []*tensor.Tensor) { tensor.ProductColumnsInto(t[0], t[1], t[2], false, 0, 1) },
	"RowsView":           func(t []*tensor.Tensor) { tensor.RowsView(t[0], 0, 1) },
	"AdamUpdate": func(t []*tensor.Tensor) {
		tensor.AdamUpdate(t[0], t[1], t[2], nil, tensor.AdamCoeffs{})
	},
	"Pad":         func(t []*tensor.Tensor) { tensor.Pad(t[0], [][2]int{{1, 1}}, 0) },
	"Categorical": func(t []*tensor.Tensor) { tensor.Categorical(tensor.NewKey(0), t[0], 0) },
	"CategoricalSample": func(t []*tensor.Tensor) {
		tensor.CategoricalSample(tensor.NewKey(0), t[0], 0, tensor.CategoricalOptions{})
	},
	"Choice":             func(t []*tensor.Tensor) { tensor.Choice(tensor.NewKey(0), t[0], []int{2}, tensor.ChoiceOptions{}) },
	"Gamma":              func(t []*tensor.Tensor) { tensor.Gamma(tensor.NewKey(0), t[0]) },
	"LogGamma":           func(t []*tensor.Tensor) { tensor.LogGamma(tensor.NewKey(0), t[0]) },
	"Beta":               func(t []*tensor.Tensor) { tensor.Beta(tensor.NewKey(0), t[0], t[1]) },
	"Dirichlet":          func(t []*tensor.Tensor) { tensor.Dirichlet(tensor.NewKey(0), t[0]) },
	"Poisson":            func(t []*tensor.Tensor) { tensor.Poisson(tensor.NewKey(0), t[0]) },
	"Sum":                func(t []*tensor.Tensor) { tensor.Sum(t[0]) },
	"SumKeep":            func(t []*tensor.Tensor) { tensor.SumKeep(t[0]) },
	"Mean":               func(t []*tensor.Tensor) { tensor.Mean(t[0]) },
	"MeanKeep":           func(t []*tensor.Tensor) { tensor.MeanKeep(t[0]) },
	"Max":                func(t []*tensor.Tensor) { tensor.Max(t[0]) },
	"MaxKeep":            func(t []*tensor.Tensor) { tensor.MaxKeep(t[0]) },
	"Min":                func(t []*tensor.Tensor) { tensor.Min(t[0]) },
	"MinKeep":            func(t []*tensor.Tensor) { tensor.MinKeep(t[0]) },
	"LogSumExp":          func(t []*tensor.Tensor) { tensor.LogSumExp(t[0]) },
	"LogSumExpKeep":      func(t []*tensor.Tensor) { tensor.LogSumExpKeep(t[0]) },
	"ArgMax":             func(t []*tensor.Tensor) { tensor.ArgMax(t[0], 0) },
	"ArgMaxKeep":         func(t []*tensor.Tensor) { tensor.ArgMaxKeep(t[0], 0) },
	"ArgMin":             func(t []*tensor.Tensor) { tensor.ArgMin(t[0], 0) },
	"Any":                func(t []*tensor.Tensor) { tensor.Any(t[0]) },
	"All":                func(t []*tensor.Tensor) { tensor.All(t[0]) },
	"Reshape":            func(t []*tensor.Tensor) { tensor.Reshape(t[0], 3) },
	"Flatten":            func(t []*tensor.Tensor) { tensor.Flatten(t[0]) },
	"ExpandDims":         func(t []*tensor.Tensor) { tensor.ExpandDims(t[0], 0) },
	"Squeeze":            func(t []*tensor.Tensor) { tensor.Squeeze(t[0]) },
	"BroadcastTo":        func(t []*tensor.Tensor) { tensor.BroadcastTo(t[0], 2, 3) },
	"Transpose":          func(t []*tensor.Tensor) { tensor.Transpose(t[0]) },
	"T":                  func(t []*tensor.Tensor) { tensor.T(t[0]) },
	"ScatterAdd":         func(t []*tensor.Tensor) { tensor.ScatterAdd(t[0], t[1], t[2], 0) },
	"SegmentSum":         func(t []*tensor.Tensor) { tensor.SegmentSum(t[0], t[1], 2) },
	"SegmentSumRows":     func(t []*tensor.Tensor) { tensor.SegmentSumRows([][]float32{{1}, {2}, {3}}, t[0], 2, 1) },
	"SegmentWeightedSum": func(t []*tensor.Tensor) { tensor.SegmentWeightedSum(t[0], t[1], t[2], 2) },
	"Slice":              func(t []*tensor.Tensor) { tensor.Slice(t[0], []int{0}, []int{1}) },
	"SliceAxis":          func(t []*tensor.Tensor) { tensor.SliceAxis(t[0], 0, 0, 1) },
	"DynamicSlice":       func(t []*tensor.Tensor) { tensor.DynamicSlice(t[0], []int{0}, []int{1}) },
	"DynamicSliceAxis":   func(t []*tensor.Tensor) { tensor.DynamicSliceAxis(t[0], 0, 0, 1) },
	"DynamicUpdateSlice": func(t []*tensor.Tensor) { tensor.DynamicUpdateSlice(t[0], t[1], []int{0}) },
	"Flip":               func(t []*tensor.Tensor) { tensor.Flip(t[0]) },
	"Roll":               func(t []*tensor.Tensor) { tensor.Roll(t[0], 1, 0) },
	"Softmax":            func(t []*tensor.Tensor) { tensor.Softmax(t[0], 0) },
	"LogSoftmax":         func(t []*tensor.Tensor) { tensor.LogSoftmax(t[0], 0) },
	"ArgSort":            func(t []*tensor.Tensor) { tensor.ArgSort(t[0], 0, false) },
	"Sort":               func(t []*tensor.Tensor) { tensor.Sort(t[0], 0, false) },
	"TopK":               func(t []*tensor.Tensor) { tensor.TopK(t[0], 1) },
	"LexSort":            func(t []*tensor.Tensor) { tensor.LexSort(t[0]) },
	"ZerosLike":          func(t []*tensor.Tensor) { tensor.ZerosLike(t[0]) },
	"OnesLike":           func(t []*tensor.Tensor) { tensor.OnesLike(t[0]) },
	"FullLike":           func(t []*tensor.Tensor) { tensor.FullLike(t[0], 2) },
	"WithLogicalAxes":    func(t []*tensor.Tensor) { tensor.WithLogicalAxes(t[0], "batch") },
	"Neg":                func(t []*tensor.Tensor) { tensor.Neg(t[0]) },
	"Abs":                func(t []*tensor.Tensor) { tensor.Abs(t[0]) },
	"Sign":               func(t []*tensor.Tensor) { tensor.Sign(t[0]) },
	"Exp":                func(t []*tensor.Tensor) { tensor.Exp(t[0]) },
	"Log":                func(t []*tensor.Tensor) { tensor.Log(t[0]) },
	"Sqrt":               func(t []*tensor.Tensor) { tensor.Sqrt(t[0]) },
	"Rsqrt":              func(t []*tensor.Tensor) { tensor.Rsqrt(t[0]) },
	"Square":             func(t []*tensor.Tensor) { tensor.Square(t[0]) },
	"Tanh":               func(t []*tensor.Tensor) { tensor.Tanh(t[0]) },
	"Sigmoid":            func(t []*tensor.Tensor) { tensor.Sigmoid(t[0]) },
	"Relu":               func(t []*tensor.Tensor) { tensor.Relu(t[0]) },
	"Silu":               func(t []*tensor.Tensor) { tensor.Silu(t[0]) },
	"Gelu":               func(t []*tensor.Tensor) { tensor.Gelu(t[0]) },
	"GeluExact":          func(t []*tensor.Tensor) { tensor.GeluExact(t[0]) },
	"Clamp":              func(t []*tensor.Tensor) { tensor.Clamp(t[0], 0, 1) },
	"Recycling": func(t []*tensor.Tensor) {
		tensor.Recycling(func(in []*tensor.Tensor) []*tensor.Tensor { return in }, t[0])
	},
}

// Graph plumbing, not ops: their tensor arguments are lists the caller
// builds (Backward's cotangents may be nil), checked by their own rules.
var nilExempt = map[string]bool{"Apply": true, "ApplyN": true, "Backward": true, "Remat": true, "Residuals": true, "ResidualTensors": true,
	// BlockParams is part of the sharding seam (it rewrites op params for
	// blocks), not an op.
	"BlockParams": true,
	// CallBlock and CallBlockN are the sharding seam's way to run an op's
	// implementation on a device's blocks (like Apply), not ops.
	"CallBlock": true, "CallBlockN": true,
	// Donate accepts nil and donated tensors (it is idempotent).
	"Donate": true}

// Operands documented as optional.
var nilAllowed = map[string]bool{"Bincount.weights": true, "AdamUpdate.p": true, "SGDStep.t": true, "AdamStepsInto.dst": true, "AdamStepsIntoOverMoments.dst": true, "SGDStepInto.dst": true, "SGDStepInto.t": true,
	"AdamStepIntoOverMomentsLater.dst": true, "SGDStepIntoLater.dst": true, "SGDStepIntoLater.t": true, "DotProductAttention.mask": true, "DotProductAttentionAs.mask": true,
	"LayerNorm.weight": true, "LayerNorm.bias": true, "LSTMCell.hh": true,
	"BatchNorm.weight": true, "BatchNorm.bias": true, "BatchNorm.residual": true,
	// WithLocals passes nil entries through (blocks of other processes).
	"WithLocals.xs": true}

// publicOps parses the package source and returns every exported function
// that takes *Tensor operands, with the names of those parameters (a
// []*Tensor or ...*Tensor parameter is written name[0]).
func publicOps(t *testing.T) map[string][]string {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	ops := map[string][]string{}
	fs := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fs, f, nil, 0)
		require.NoError(t, err)
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || nilExempt[fd.Name.Name] {
				continue
			}
			var names []string
			for _, p := range fd.Type.Params.List {
				suffix, typ := "", p.Type
				switch tt := typ.(type) {
				case *ast.ArrayType:
					suffix, typ = "[0]", tt.Elt
				case *ast.Ellipsis:
					suffix, typ = "[0]", tt.Elt
				}
				if s, ok := typ.(*ast.StarExpr); ok {
					if id, ok := s.X.(*ast.Ident); ok && id.Name == "Tensor" {
						for _, n := range p.Names {
							if !nilAllowed[fd.Name.Name+"."+n.Name] {
								names = append(names, n.Name+suffix)
							}
						}
					}
				}
			}
			if len(names) > 0 {
				ops[fd.Name.Name] = names
			}
		}
	}
	return ops
}

// TestNilOperands checks that every public op given a nil operand panics
// with a message naming the op and the operand.
func TestNilOperands(t *testing.T) {
	ops := publicOps(t)
	require.Greater(t, len(ops), 100)
	for name := range nilOps {
		require.Contains(t, ops, name, "nilOps has an entry for %s, which takes no tensor operand", name)
	}
	x := tensor.FromFloat32([]float32{1, 2, 3}, 3)
	for name, params := range ops {
		call, ok := nilOps[name]
		if !assert.True(t, ok, "public op %s(%v) is missing from nilOps", name, params) {
			continue
		}
		// Operands before k are valid, k is nil (and later ones too: k is
		// the first nil one).
		for k := range params {
			in := make([]*tensor.Tensor, 4)
			for j := range k {
				in[j] = x
			}
			want := "tensor." + name + ": operand " + params[k] + " is nil"
			require.Equal(t, want, panicMessage(func() { call(in) }), "%s with operand %s nil", name, params[k])
		}
	}
}
