package shard_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func placed(m *shard.Mesh, spec shard.Spec, shape ...int) *tensor.Tensor {
	return shard.Put(tensor.Zeros(tensor.Float32, shape...), shard.NewSharding(m, spec))
}

func TestCheckMatches(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	rows := placed(m, shard.P("dp"), 16, 32)                    // f32[16@dp,32]
	both := placed(m, shard.P([]string{"dp", "tp"}), 16, 32)    // f32[16@(dp,tp),32]
	act := placed(m, shard.P("dp", nil, "tp", nil), 8, 4, 6, 2) // f32[8@dp,4,6@tp,2]
	lead := placed(m, shard.P(nil, nil, nil, "tp"), 2, 3, 4, 6) // f32[2,3,4,6@tp]
	host := tensor.Zeros(tensor.Float32, 2, 3, 4)               // f32[2,3,4]
	scalar := placed(m, shard.P(), []int{}...)                  // f32[]
	for _, tc := range []struct {
		x    *tensor.Tensor
		spec string
	}{
		{rows, "batch@dp d"},
		{rows, "16@dp 32"},
		{rows, "  16@dp\t32\n"},
		{rows, "_@dp _"},
		{rows, "_batch@dp _d"},
		{rows, "rows=16@dp cols=32"},
		{rows, "batch@dp ..."},
		{rows, "batch@dp *rest"},
		{rows, "batch@dp *"},
		{rows, "batch@dp *_rest"},
		{both, "b@(dp,tp) d"},
		{both, "b@( dp , tp ) d"},
		{act, "batch@dp seq heads@tp d"},
		{act, "batch@dp ... heads@tp d"},
		{act, "8@dp 4 6@tp 2"},
		{lead, "*lead d@tp"},
		{lead, "... d@tp"},
		{lead, "a b c ... d@tp"},
		{lead, "a ... b c d@tp"},
		{host, "a b c"},
		{host, "..."},
		{host, "2 *rest"},
		{tensor.Scalar(1), ""},
		{tensor.Scalar(1), "..."},
		{scalar, ""},
		{scalar, "  "},
		{placed(m, shard.P(), 1024, 256), "1_024 256"},
	} {
		t.Run(fmt.Sprintf("%v %q", tc.x, tc.spec), func(t *testing.T) {
			assert.NoError(t, shard.Check(tc.x, tc.spec))
		})
	}
}

func TestCheckMismatches(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	rows := placed(m, shard.P("dp"), 16, 32)
	both := placed(m, shard.P([]string{"dp", "tp"}), 16, 32)
	lead := placed(m, shard.P(nil, "tp", nil), 2, 4, 6)
	host := tensor.Zeros(tensor.Float32, 16, 32)
	for _, tc := range []struct {
		x          *tensor.Tensor
		spec, want string
	}{
		{placed(m, shard.P("dp"), 1024, 4096), "batch@dp seq@tp",
			`shard.Check: float32[1024@dp,4096] against "batch@dp seq@tp": dim 1 (seq) is replicated, want sharded over tp`},
		{rows, "batch d e", `rank 2, want 3 dimensions`},
		{rows, "batch", `rank 2, want 1 dimension`},
		{rows, "a b c ...", `rank 2, want at least 3 dimensions`},
		{rows, "16@dp 33", `dim 1 is 32, want 33`},
		{rows, "rows=8@dp cols", `dim 0 (rows) is 16, want 8`},
		{rows, "batch d", `dim 0 (batch) is sharded over dp, want replicated`},
		{rows, "batch@tp d", `dim 0 (batch) is sharded over dp, want sharded over tp`},
		{rows, "batch@(dp,tp) d", `dim 0 (batch) is sharded over dp, want sharded over (dp,tp)`},
		{both, "batch@(tp,dp) d", `dim 0 (batch) is sharded over (dp,tp), want sharded over (tp,dp)`},
		{both, "_@dp d", `dim 0 is sharded over (dp,tp), want sharded over dp`},
		{both, "_b@dp d", `dim 0 (_b) is sharded over (dp,tp), want sharded over dp`},
		{rows, "batch@dp d@tp", `dim 1 (d) is replicated, want sharded over tp`},
		{rows, "batch@dp d@mp", `dim 1 (d) is replicated, want sharded over mp (mesh Mesh('dp': 4, 'tp': 2) has no axis mp)`},
		{rows, "batch@data d", `dim 0 (batch) is sharded over dp, want sharded over data (mesh Mesh('dp': 4, 'tp': 2) has no axis data)`},
		{rows, "b@dp b", `dim 1 (b) is 32, but b is 16 in dim 0`},
		{lead, "*lead d", `dim 1 (in *lead) is sharded over tp, want replicated`},
		{lead, "... d", `dim 1 (in ...) is sharded over tp, want replicated`},
		{host, "batch@dp d", `float32[16,32] against "batch@dp d": dim 0 (batch) is not sharded (a host tensor), want sharded over dp`},
		{host, "batch 16", `dim 1 is 32, want 16`},
		{tensor.Scalar(1), "n", `float32[] against "n": rank 0, want 1 dimension`},
		{rows, "", `rank 2, want 0 dimensions`},
	} {
		t.Run(fmt.Sprintf("%v %q", tc.x, tc.spec), func(t *testing.T) {
			err := shard.Check(tc.x, tc.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), fmt.Sprintf("shard.Check: %s against %q: ", tc.x.Type(), tc.spec))
		})
	}
	assert.EqualError(t, shard.Check(nil, "a"), `shard.Check: nil tensor against "a"`)
}

func TestCheckScope(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := placed(m, shard.P("dp"), 1024, 64)
	w := placed(m, shard.P(nil, "tp"), 64, 16)
	y := placed(m, shard.P("dp", "tp"), 1024, 16)
	short := placed(m, shard.P("dp"), 512, 64)

	s := shard.NewScope()
	require.NoError(t, s.Check(x, "batch@dp d"))
	require.NoError(t, s.Check(w, "d heads@tp"))
	require.NoError(t, s.Check(y, "batch@dp heads@tp"))
	n, ok := s.Dim("batch")
	assert.True(t, ok)
	assert.Equal(t, 1024, n)
	_, ok = s.Dim("seq")
	assert.False(t, ok)
	assert.Equal(t, "Scope{batch=1024, d=64, heads=16}", s.String())

	assert.EqualError(t, s.Check(short, "batch@dp d"),
		`shard.Check: float32[512@dp,64] against "batch@dp d": dim 0 (batch) is 512, but batch was bound to 1024 by an earlier check`)
	assert.EqualError(t, s.Check(w, "heads@tp d"),
		`shard.Check: float32[64,16@tp] against "heads@tp d": dim 0 (heads) is 64, but heads was bound to 16 by an earlier check`)

	// A failed check binds nothing.
	var z shard.Scope
	require.Error(t, z.Check(tensor.Zeros(tensor.Float32, 2, 3, 4), "a b 5"))
	_, ok = z.Dim("a")
	assert.False(t, ok)
	require.Error(t, z.Check(tensor.Zeros(tensor.Float32, 2, 3, 4), "*lead c@dp"))
	_, ok = z.Dims("lead")
	assert.False(t, ok)
	assert.Equal(t, "Scope{}", z.String())

	// Variadic names bind tuples of sizes.
	require.NoError(t, z.Check(tensor.Zeros(tensor.Float32, 2, 3, 4), "*lead c"))
	lead, ok := z.Dims("lead")
	assert.True(t, ok)
	assert.Equal(t, []int{2, 3}, lead)
	require.NoError(t, z.Check(tensor.Zeros(tensor.Float32, 2, 3, 7, 4), "*lead 7 c"))
	assert.EqualError(t, z.Check(tensor.Zeros(tensor.Float32, 2, 4), "*lead c"),
		`shard.Check: float32[2,4] against "*lead c": *lead (dim 0) is [2], but *lead was bound to [2 3] by an earlier check`)
	assert.EqualError(t, z.Check(tensor.Zeros(tensor.Float32, 4), "*lead c"),
		`shard.Check: float32[4] against "*lead c": *lead (no dims) is [], but *lead was bound to [2 3] by an earlier check`)
	assert.EqualError(t, z.Check(tensor.Zeros(tensor.Float32, 1, 2, 3, 4), "*lead c"),
		`shard.Check: float32[1,2,3,4] against "*lead c": *lead (dims 0-2) is [1 2 3], but *lead was bound to [2 3] by an earlier check`)
	assert.Equal(t, "Scope{c=4, *lead=[2 3]}", z.String())

	// The package-level Check uses a fresh scope each time.
	require.NoError(t, shard.Check(short, "batch@dp d"))
}

func TestMustCheck(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := placed(m, shard.P("dp"), 16, 8)
	assert.Same(t, x, shard.MustCheck(x, "b@dp d"))
	assert.PanicsWithValue(t, `shard.Check: float32[16@dp,8] against "b d": dim 0 (b) is sharded over dp, want replicated`,
		func() { shard.MustCheck(x, "b d") })
	var s shard.Scope
	assert.Same(t, x, s.MustCheck(x, "b@dp d"))
	assert.PanicsWithValue(t, `shard.Check: float32[16@dp,8] against "d@dp b": dim 0 (d) is 16, but d was bound to 8 by an earlier check`,
		func() { s.MustCheck(x, "d@dp b") })
	assert.PanicsWithValue(t, `shard.Check: bad spec "b@": offset 2: want a mesh axis name after @`,
		func() { shard.MustCheck(x, "b@") })
}

func TestCheckInsideMap(t *testing.T) {
	// Blocks inside Map are checked for their per-device shape; one scope
	// may be shared by all devices.
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := placed(m, shard.P("dp", "tp"), 16, 8)
	var s shard.Scope
	var mu sync.Mutex
	var errs []error
	shard.Map(m, shard.P("dp", "tp"), shard.P("dp", "tp"), func(_ *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		ok := s.Check(b, "rows cols")
		bad := s.Check(b, "rows@dp cols")
		mu.Lock()
		errs = append(errs, ok, bad)
		mu.Unlock()
		return b
	})(x)
	require.Len(t, errs, 16)
	for i := 0; i < len(errs); i += 2 {
		assert.NoError(t, errs[i])
		assert.EqualError(t, errs[i+1], `shard.Check: float32[4,4]{dp,tp} against "rows@dp cols": dim 0 (rows) is a per-device block (inside shard.Map), want sharded over dp`)
	}
	n, _ := s.Dim("rows")
	assert.Equal(t, 4, n)
}

func TestCheckSyntaxErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"batch@", `offset 6: want a mesh axis name after @`},
		{"batch@ d", `offset 6: want a mesh axis name after @, got ' '`},
		{"batch@(dp", `offset 9: unclosed ( in mesh axes`},
		{"batch@(dp,", `offset 10: unclosed ( in mesh axes`},
		{"batch@(dp tp)", `offset 10: want , or ) in mesh axes, got 't'`},
		{"batch@()", `offset 7: want a mesh axis name, got ')'`},
		{"batch@(dp,,tp)", `offset 10: want a mesh axis name, got ','`},
		{"*a *b", `offset 3: second variadic dimension *b (at most one * or ... per spec)`},
		{"... *", `offset 4: second variadic dimension * (at most one * or ... per spec)`},
		{"*a@dp", `offset 2: variadic dimension *a cannot be sharded; write its dimensions out`},
		{"...@dp", `offset 3: variadic dimension ... cannot be sharded; write its dimensions out`},
		{"#b", `offset 0: jaxtyping's '#' modifier is not supported`},
		{"a ?b", `offset 2: jaxtyping's '?' modifier is not supported`},
		{"b-1", `offset 1: unexpected '-' after dimension b; separate dimensions with spaces`},
		{"a,b", `offset 1: unexpected ',' after dimension a; separate dimensions with spaces`},
		{"1x", `offset 1: unexpected 'x' in size 1x`},
		{"1__0", `offset 1: unexpected '_' in size 1__0`},
		{"a@dp b@dp", `offset 7: mesh axis dp used twice (first at offset 2)`},
		{"a@(dp,tp) b@(x,tp)", `offset 15: mesh axis tp used twice (first at offset 6)`},
		{"a@(dp,dp)", `offset 6: mesh axis dp used twice (first at offset 3)`},
		{"rows=", `offset 5: want a size after rows=`},
		{"rows=x", `offset 5: want a size after rows=`},
		{"*1", `offset 1: variadic name "1" starts with a digit`},
		{"99999999999", `offset 0: size 99999999999 is too large`},
		{"a@dp)", `offset 4: unexpected ')' after dimension a@dp; separate dimensions with spaces`},
		{"(a)", `offset 0: unexpected '('; want a dimension (name, size, _, *name or ...)`},
		{"..", `offset 0: unexpected '.'; want a dimension (name, size, _, *name or ...)`},
		{"a@dp@tp", `offset 4: unexpected '@' after dimension a@dp; separate dimensions with spaces`},
		{"\xff", `offset 0: unexpected '�'; want a dimension (name, size, _, *name or ...)`},
		{"é", `offset 0: unexpected 'é'; want a dimension (name, size, _, *name or ...)`},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			err := shard.Check(tensor.Scalar(0), tc.spec)
			assert.EqualError(t, err, fmt.Sprintf("shard.Check: bad spec %q: %s", tc.spec, tc.want))
		})
	}
}
