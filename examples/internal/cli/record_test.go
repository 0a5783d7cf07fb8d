package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

func TestRecordSettings(t *testing.T) {
	diff := func(saved, current any) checkpoint.Difference {
		return checkpoint.Difference{Setting: "X", Saved: saved, Current: current}
	}
	s := Unchecked("-data")
	assert.Equal(t, "-data", s.Flag)
	assert.Equal(t, "", s.Changed(diff("a", "b")))

	s = Placement()
	assert.Equal(t, "-strategy", s.Flag)
	assert.Equal(t, "(saved under single on one device; the state is resharded for dp on Mesh('dp': 8))",
		s.Changed(diff("single on one device", "dp on Mesh('dp': 8)")))

	s = Length("-epochs", "epochs", 3, func(was, now int) string { return "longer" })
	assert.Equal(t, "-epochs", s.Flag)
	assert.Equal(t, "(-epochs 2: the checkpoint has 3 epochs done already, so none is left to train)", s.Changed(diff(5, 2)))
	assert.Equal(t, "(-epochs 3: the checkpoint has 3 epochs done already, so none is left to train)", s.Changed(diff(5, 3)))
	assert.Equal(t, "longer", s.Changed(diff(5, 4)))

	// A linear decay from 1 to 0 over the run: at step 100, 0.5 of a run
	// of 200 steps and 0.75 of one of 400.
	linear := func(n int) optim.Schedule { return optim.Linear(1, 0, n, 0) }
	s = Steps(100, linear)
	assert.Equal(t, "-steps", s.Flag)
	assert.Equal(t, "(-steps 400: the checkpoint's run was of 200 steps, so the learning-rate schedule now decays over 400: at step 100 the rate is 0.75 where it would have been 0.5)",
		s.Changed(diff(200, 400)))
	assert.Equal(t, "(-steps 50: the checkpoint has 100 steps done already, so none is left to train)", s.Changed(diff(200, 50)))
}

func TestDataDigest(t *testing.T) {
	a := data.FromTensors(tensor.FromFloat32([]float32{1, -2, 0.5, 3, 4, 5}, 2, 3), tensor.FromInt32([]int32{7, 1}, 2))
	b := data.FromTensors(tensor.FromFloat32([]float32{1}, 1, 1), tensor.FromInt32([]int32{-1}, 1))
	// The same bytes, written out by hand.
	var buf []byte
	le32 := func(u uint32) { buf = append(buf, byte(u), byte(u>>8), byte(u>>16), byte(u>>24)) }
	buf = append(buf, "[2 3] [2];"...)
	for _, x := range []float32{1, -2, 0.5, 3, 4, 5} {
		le32(math.Float32bits(x))
	}
	le32(7)
	le32(1)
	buf = append(buf, "[1 1] [1];"...)
	le32(math.Float32bits(1))
	le32(math.MaxUint32) // int32(-1)
	sum := sha256.Sum256(buf)
	assert.Equal(t, hex.EncodeToString(sum[:])[:16], DataDigest(a, b))
	assert.NotEqual(t, DataDigest(a, b), DataDigest(b, a), "the order counts")
	c := data.FromTensors(a.X, tensor.FromInt32([]int32{7, 2}, 2))
	assert.NotEqual(t, DataDigest(a), DataDigest(c), "a label counts")
}
