package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// TestKeysInTensors: a key taken from a stack of keys draws exactly the
// numbers the key itself draws, with every sampler, and splits and folds
// alike; a stack of keys cannot draw.
func TestKeysInTensors(t *testing.T) {
	keys := tensor.NewKey(42).Split(3)
	stack := tensor.StackKeys(keys)
	require.Equal(t, []int{3}, stack.Shape())
	require.Equal(t, "key<fry>i32[3,2]", stack.String())
	a := tensor.FromFloat32([]float32{0.5, 2, 7})
	logits := tensor.FromFloat32([]float32{0, 1, -1, 2, 0.5, 0}, 2, 3)
	samplers := map[string]func(k tensor.Key) *tensor.Tensor{
		"Uniform":         func(k tensor.Key) *tensor.Tensor { return tensor.Uniform(k, 4) },
		"UniformRange":    func(k tensor.Key) *tensor.Tensor { return tensor.UniformRange(k, -1, 3, 2, 2) },
		"Normal":          func(k tensor.Key) *tensor.Tensor { return tensor.Normal(k, 5) },
		"TruncatedNormal": func(k tensor.Key) *tensor.Tensor { return tensor.TruncatedNormal(k, -2, 2, 5) },
		"Bernoulli":       func(k tensor.Key) *tensor.Tensor { return tensor.Bernoulli(k, 0.3, 6) },
		"RandInt":         func(k tensor.Key) *tensor.Tensor { return tensor.RandInt(k, -5, 5, 6) },
		"RandomBits":      func(k tensor.Key) *tensor.Tensor { return tensor.RandomBits(k, 3) },
		"Permutation":     func(k tensor.Key) *tensor.Tensor { return tensor.Permutation(k, 7) },
		"Gumbel":          func(k tensor.Key) *tensor.Tensor { return tensor.Gumbel(k, 4) },
		"Categorical":     func(k tensor.Key) *tensor.Tensor { return tensor.Categorical(k, logits, 1) },
		"Exponential":     func(k tensor.Key) *tensor.Tensor { return tensor.Exponential(k, 4) },
		"Laplace":         func(k tensor.Key) *tensor.Tensor { return tensor.Laplace(k, 4) },
		"Gamma":           func(k tensor.Key) *tensor.Tensor { return tensor.Gamma(k, a) },
		"LogGamma":        func(k tensor.Key) *tensor.Tensor { return tensor.LogGamma(k, a, 2, 3) },
		"Beta":            func(k tensor.Key) *tensor.Tensor { return tensor.Beta(k, a, a) },
		"Dirichlet":       func(k tensor.Key) *tensor.Tensor { return tensor.Dirichlet(k, a) },
		"Poisson":         func(k tensor.Key) *tensor.Tensor { return tensor.Poisson(k, a) },
		"Choice": func(k tensor.Key) *tensor.Tensor {
			return tensor.Choice(k, a, []int{2}, tensor.ChoiceOptions{WithoutReplacement: true})
		},
		"CategoricalSample": func(k tensor.Key) *tensor.Tensor {
			return tensor.CategoricalSample(k, logits, 1, tensor.CategoricalOptions{Shape: []int{4, 2}})
		},
		"Split":  func(k tensor.Key) *tensor.Tensor { return keyWords(k.Split(3)[2]) },
		"Split2": func(k tensor.Key) *tensor.Tensor { _, b := k.Split2(); return keyWords(b) },
		"FoldIn": func(k tensor.Key) *tensor.Tensor { return keyWords(tensor.FoldIn(k, 9)) },
	}
	for name, f := range samplers {
		for i, k := range stack.Unstack() {
			want, got := f(keys[i]), f(k)
			require.Equal(t, want.DType(), got.DType(), name)
			require.Equal(t, want.Shape(), got.Shape(), name)
			require.Equal(t, want.Float64s(), got.Float64s(), "%s, key %d", name, i)
		}
	}
	require.Equal(t, keys[1].Data(), stack.Unstack()[1].Data())
	requirePanic(t, "tensor.Normal: key<fry>i32[3,2] is a stack of keys; take one (Unstack) or map over them (autodiff.Vmap)",
		func() { tensor.Normal(stack, 2) })
	requirePanic(t, "tensor.Key.Unstack: key<fry>[0 42] is a single key, not a stack of keys", func() { tensor.NewKey(42).Unstack() })
}

// keyWords returns a key's words as an i32[2] tensor.
func keyWords(k tensor.Key) *tensor.Tensor {
	w := k.Data()
	return tensor.FromInt32([]int32{int32(w[0]), int32(w[1])}, 2)
}
