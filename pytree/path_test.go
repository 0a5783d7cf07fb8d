package pytree_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestPathString(t *testing.T) {
	F, I, K := pytree.Field, pytree.Index, pytree.Key
	tests := []struct {
		path pytree.Path
		want string
	}{
		{nil, ""},
		{pytree.Path{F("W")}, "W"},
		{pytree.Path{F("Layers"), I(2), F("W")}, "Layers[2].W"},
		{pytree.Path{F("Experts"), K("up"), F("B")}, `Experts["up"].B`},
		{pytree.Path{I(0), F("W")}, "[0].W"},
		{pytree.Path{K(`a "quoted".key`)}, `["a \"quoted\".key"]`},
		{pytree.Path{I(1), I(2)}, "[1][2]"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.path.String())
		assert.Equal(t, "x="+tc.want, string(tc.path.AppendString([]byte("x="))))
		back, err := pytree.ParsePath(tc.want)
		require.NoError(t, err, tc.want)
		assert.True(t, tc.path.Equal(back), "%q parsed as %#v", tc.want, back)
	}
	assert.Equal(t, ".W", F("W").String())
	assert.Equal(t, "[3]", I(3).String())
	assert.Equal(t, `["k"]`, K("k").String())
	assert.False(t, pytree.Path{F("A")}.Equal(pytree.Path{F("A"), F("B")}))
	assert.False(t, pytree.Path{F("A")}.Equal(pytree.Path{K("A")}))
	// A map lookup by the appended bytes builds no string.
	m := map[string]int{"Layers[2].W": 1}
	p := pytree.Path{F("Layers"), I(2), F("W")}
	var buf [64]byte
	assert.Zero(t, testing.AllocsPerRun(10, func() {
		if m[string(p.AppendString(buf[:0]))] != 1 {
			t.Fatal("lookup by AppendString missed")
		}
	}))
}

func TestParsePath(t *testing.T) {
	p, err := pytree.ParsePath(".Layers[10].W")
	require.NoError(t, err)
	assert.Equal(t, "Layers[10].W", p.String())

	bad := map[string]string{
		"Layers[":                `pytree: bad path "Layers[": missing ] after offset 6`,
		"Layers[x]":              `pytree: bad path "Layers[x]": bad index "x"`,
		"Layers[-1]":             `pytree: bad path "Layers[-1]": bad index "-1"`,
		"Layers[+1]":             `pytree: bad path "Layers[+1]": bad index "+1"`,
		"A..B":                   `pytree: bad path "A..B": empty field name at offset 2`,
		"A.":                     `pytree: bad path "A.": empty field name at offset 2`,
		"A[0]B":                  `pytree: bad path "A[0]B": unexpected 'B' at offset 4`,
		"A]":                     `pytree: bad path "A]": unexpected ']' at offset 1`,
		`M["k]`:                  `pytree: bad path "M[\"k]": unterminated map key at offset 1`,
		`M["k"`:                  `pytree: bad path "M[\"k\"": missing ] at offset 5`,
		`M["k"]]`:                `pytree: bad path "M[\"k\"]]": unexpected ']' at offset 6`,
		"[99999999999999999999]": `pytree: bad path "[99999999999999999999]": bad index "99999999999999999999"`,
	}
	for in, want := range bad {
		_, err := pytree.ParsePath(in)
		if assert.Error(t, err, in) {
			assert.Equal(t, want, err.Error())
		}
	}
	assert.Equal(t, `pytree: bad path "A..B": empty field name at offset 2`,
		panicMessage(t, func() { pytree.MustParsePath("A..B") }))
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"", "W", "Layers[2].W", `Experts["up"].B`, "[0][1]", `["a.b"]`, ".X", "A[", `M["\x00"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := pytree.ParsePath(s)
		if err != nil {
			return
		}
		// What parses prints back to something that parses to the same path.
		q, err := pytree.ParsePath(p.String())
		require.NoError(t, err, "%q printed as %q", s, p.String())
		require.True(t, p.Equal(q), "%q -> %q -> %#v", s, p.String(), q)
	})
}

func FuzzPathGlob(f *testing.F) {
	for _, s := range []string{"Layers[*].W", "**.B", "A.**.W", "Enc.**", `E["k"].*`, `A\*`, "A***", "[", `"`} {
		f.Add(s, "Layers[0].W")
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		var pred pytree.Predicate
		func() {
			defer func() {
				if r := recover(); r != nil {
					msg, _ := r.(string)
					require.True(t, strings.HasPrefix(msg, "pytree.PathGlob("), "unexpected panic %v", r)
				}
			}()
			pred = pytree.PathGlob(pattern)
		}()
		if pred == nil {
			return
		}
		if p, err := pytree.ParsePath(path); err == nil {
			pred(p, nil) // must not panic
		}
		// A pattern without wildcards that is a path in canonical form
		// matches exactly that path.
		if strings.ContainsAny(pattern, "*?\\") {
			return
		}
		p, err := pytree.ParsePath(pattern)
		if err != nil || p.String() != pattern {
			return
		}
		require.True(t, pred(p, nil), "%q does not match itself", pattern)
	})
}

func TestPathGlob(t *testing.T) {
	x := seqTensor(0, 1)
	tests := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"W", []string{"W"}, []string{"", "WW", "A.W", "[0].W"}},
		{"Layers[*].W", []string{"Layers[0].W", "Layers[12].W"}, []string{"Layers[0].B", "Layers.W", "X.Layers[0].W", "Layers[0].W.X"}},
		{"*.B", []string{"Head.B", "Layers[3].B", "[0].B"}, []string{"B", "Enc.Layers[3].B", "Head.Bias"}},
		{"**.W", []string{"W", "Layers[0].W", "Enc.Attn.W", `E["a.b"].W`}, []string{"NW", "Layers[0].W2", "Layers[0].Wx.B"}},
		{"Enc.**", []string{"Enc", "Enc.W", "Enc[0]", "Enc.A.B[1]"}, []string{"Encoder", "Dec.Enc.W", "EncX.W"}},
		{"A.**.W", []string{"A.W", "A.B.W", "A[2].W", "A.B[2].C.W"}, []string{"AB.W", "A.W.X", "X.A.W"}},
		{"**", []string{"", "W", "A.B[3]"}, nil},
		{"*", []string{"W", "Layers[3]", ""}, []string{"A.B"}},
		{"Layers[?].W", []string{"Layers[1].W"}, []string{"Layers[10].W"}},
		{"Layers**", []string{"Layers", "Layers[0].W", "LayersX"}, []string{"XLayers"}},
		{`Experts["up"].*`, []string{`Experts["up"].W`}, []string{`Experts["down"].W`}},
		{`Experts[*].W`, []string{`Experts["up"].W`, `Experts[3].W`}, nil},
		{`A\*`, []string{"A*"}, []string{"AB"}},
		{`A\?\\`, []string{`A?\`}, []string{"AB\\"}},
		{"", []string{""}, []string{"W"}},
	}
	for _, tc := range tests {
		pred := pytree.PathGlob(tc.pattern)
		for _, s := range tc.yes {
			assert.True(t, pred(mustPath(t, s), x), "%q should match %q", tc.pattern, s)
		}
		for _, s := range tc.no {
			assert.False(t, pred(mustPath(t, s), x), "%q should not match %q", tc.pattern, s)
		}
	}
}

// mustPath parses a path, or builds one field for names that do not
// parse (like "A*").
func mustPath(t *testing.T, s string) pytree.Path {
	p, err := pytree.ParsePath(s)
	if err != nil {
		return pytree.Path{pytree.Field(s)}
	}
	return p
}

func TestPathGlobInvalid(t *testing.T) {
	bad := map[string]string{
		"A***":     `pytree.PathGlob("A***"): *** is not a valid wildcard`,
		"Layers[*": `pytree.PathGlob("Layers[*"): unbalanced [`,
		"Layers]":  `pytree.PathGlob("Layers]"): unbalanced ]`,
		"A[[0]]":   `pytree.PathGlob("A[[0]]"): nested [`,
		`M["up]`:   `pytree.PathGlob("M[\"up]"): unterminated quote`,
		`A\`:       `pytree.PathGlob("A\\"): trailing backslash`,
		"A\xff":    `pytree.PathGlob("A\xff"): not valid UTF-8`,
	}
	for pattern, want := range bad {
		assert.Equal(t, want, panicMessage(t, func() { pytree.PathGlob(pattern) }), pattern)
	}
	// Brackets inside a quoted key are fine.
	assert.NotPanics(t, func() { pytree.PathGlob(`M["[x"]`) })
	_ = tensor.Float32
}
