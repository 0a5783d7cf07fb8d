package optim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// halfModel has a float32 weight and a half one.
type halfModel struct {
	W *tensor.Tensor // f32[3]
	E *tensor.Tensor // bf16 or f16 [2,3]
}

// TestHalfParametersPanic: a bfloat16 or float16 parameter (or gradient)
// is refused by every transform with a panic naming its path and type,
// instead of getting no state and no update; frozen (Masked, and a nil
// gradient), it is kept as it is while the float32 leaves train.
func TestHalfParametersPanic(t *testing.T) {
	lr := optim.Constant(0.1)
	txs := []struct {
		name   string
		tx     optim.Transform
		op     string
		initOp string // if Init's panic names another transform
	}{
		{"sgd", optim.SGD(lr), "optim.SGD", ""},
		{"sgd momentum", optim.SGD(lr, optim.SGDOptions{Momentum: 0.9}), "optim.SGD", ""},
		{"adam", optim.Adam(lr), "optim.Adam", ""},
		{"adamw", optim.AdamW(lr), "optim.AdamW", ""},
		{"lion", optim.Lion(lr), "optim.Lion", ""},
		{"rmsprop", optim.RMSProp(lr), "optim.RMSProp", ""},
		{"adafactor", optim.Adafactor(lr), "optim.Adafactor", ""},
		{"trace", optim.Trace(0.9, false), "optim.Trace", ""},
		{"scale", optim.Scale(2), "optim.Scale", ""},
		{"clip", optim.Clip(1), "optim.Clip", ""},
		{"clip block rms", optim.ClipByBlockRMS(1), "optim.ClipByBlockRMS", ""},
		{"clip global norm", optim.ClipByGlobalNorm(1), "optim.ClipByGlobalNorm", ""},
		{"learning rate", optim.ScaleByLearningRate(lr), "optim.ScaleByLearningRate", ""},
		{"decayed weights", optim.AddDecayedWeights(0.1, nil), "optim.AddDecayedWeights", ""},
		{"multisteps", optim.MultiSteps(optim.SGD(lr), 2), "optim.MultiSteps", ""},
		{"chain", optim.Chain(optim.ClipByGlobalNorm(1), optim.Adam(lr)), "optim.ClipByGlobalNorm", "optim.Adam"},
	}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		params := halfModel{W: tensor.FromFloat32([]float32{1, 2, 3}, 3), E: tensor.Convert(tensor.Ones(tensor.Float32, 2, 3), dt)}
		grads := halfModel{W: tensor.FromFloat32([]float32{0.5, -1, 2}, 3), E: tensor.Convert(tensor.Ones(tensor.Float32, 2, 3), dt)}
		typ := params.E.Type()
		for _, c := range txs {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				msg := func(role string) string {
					op := c.op
					if role == "parameter" && c.initOp != "" {
						op = c.initOp
					}
					return op + ": " + role + " E is " + typ + ": optimizers update float32 parameters only"
				}
				// Init refuses the half parameter (stateless transforms
				// keep nothing, so Update is where they refuse it).
				stateless := map[string]bool{"scale": true, "clip": true, "clip block rms": true, "clip global norm": true, "learning rate": true, "decayed weights": true}
				var state optim.State
				func() {
					defer func() {
						r := recover()
						if stateless[c.name] {
							require.Nil(t, r)
							return
						}
						require.NotNil(t, r, "Init of a half parameter must panic")
						require.Contains(t, r, msg("parameter"))
					}()
					state = c.tx.Init(params)
				}()
				if state == nil {
					state = c.tx.Init(halfModel{W: params.W})
				}
				defer func() {
					r := recover()
					require.NotNil(t, r, "Update of a half gradient must panic")
					s := r.(string)
					if !contains(s, msg("gradient")) && !contains(s, msg("update")) && !contains(s, msg("parameter")) {
						t.Fatalf("panic %q does not name E and its type", s)
					}
				}()
				c.tx.Update(grads, state, params)
			})
		}
		t.Run(dt.String()+"/fused step", func(t *testing.T) {
			for _, tx := range []optim.Transform{optim.Adam(lr), optim.SGD(lr)} {
				state := tx.Init(halfModel{W: params.W})
				require.Panics(t, func() { optim.Step(tx, params, grads, state) })
			}
		})
		t.Run(dt.String()+"/masked", func(t *testing.T) {
			tx := optim.Masked(optim.Adam(lr), pytree.Not(pytree.PathGlob("E")))
			state := tx.Init(params)
			frozen := halfModel{W: grads.W} // E frozen: a nil gradient
			updates, _ := tx.Update(frozen, state, params)
			next := optim.Apply(params, updates)
			require.Equal(t, params.E.Bits16(), next.E.Bits16(), "E left as it is")
			require.NotEqual(t, params.W.Float32s(), next.W.Float32s(), "W trains")
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
