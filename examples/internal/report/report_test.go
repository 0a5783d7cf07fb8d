package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/tensor"
)

func TestMaxAbsDiff(t *testing.T) {
	type tree struct{ A, B *tensor.Tensor }
	a := tree{tensor.FromFloat32([]float32{1, 2}, 2), tensor.FromFloat32([]float32{3}, 1)}
	b := tree{tensor.FromFloat32([]float32{1, 2.5}, 2), tensor.FromFloat32([]float32{1}, 1)}
	assert.Equal(t, 2.0, MaxAbsDiff(a, b))
	assert.Equal(t, 0.0, MaxAbsDiff(a, a))
	assert.Panics(t, func() { MaxAbsDiff(a, tree{A: a.A}) })
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 67276: "65.7 KiB", 1 << 20: "1.00 MiB", 4739563: "4.52 MiB"} {
		assert.Equal(t, want, Bytes(n), "%d", n)
	}
}

func TestTrained(t *testing.T) {
	var out bytes.Buffer
	Trained(&out, 40, 2500*time.Millisecond, 4*time.Second)
	assert.Equal(t, "trained 40 steps in 2.5s wall, 4.0s CPU (1.60 cores busy)\n", out.String())
}
