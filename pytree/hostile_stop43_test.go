package pytree_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
)

// Hostile elements for Path.AppendString (stop 42): it appends exactly
// String's bytes after b's, whatever the elements hold — keys with quotes,
// newlines or bytes that are not UTF-8 (quoted so ParsePath reads them
// back), a negative index, an element of no kind — and leaves the bytes of
// b and of any slice sharing its array before len(b) alone.
func TestHostilePathAppendString(t *testing.T) {
	F, I, K := pytree.Field, pytree.Index, pytree.Key
	for _, c := range []struct {
		path      pytree.Path
		want      string
		roundTrip bool
	}{
		{nil, "", true},
		{pytree.Path{}, "", true},
		{pytree.Path{K("a\nb\x00\xff\"]")}, `["a\nb\x00\xff\"]"]`, true},
		{pytree.Path{F("Layers"), K(""), I(0)}, `Layers[""][0]`, true},
		{pytree.Path{F("W"), I(-1)}, "W[-1]", false}, // no path has a negative index
		{pytree.Path{F("W"), {}}, "W<invalid>", false},
	} {
		assert.Equal(t, c.want, c.path.String())
		assert.Equal(t, c.want, string(c.path.AppendString(nil)))
		prefix := []byte("x=yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy")
		shared := prefix[:2]
		got := c.path.AppendString(shared)
		assert.Equal(t, "x="+c.want, string(got))
		assert.Equal(t, "x=", string(shared), "b's own bytes")
		if c.roundTrip {
			back, err := pytree.ParsePath(c.want)
			require.NoError(t, err, c.want)
			assert.True(t, c.path.Equal(back) || len(c.path) == 0 && len(back) == 0, "%q parsed as %#v", c.want, back)
		} else {
			back, err := pytree.ParsePath(c.want)
			assert.False(t, err == nil && c.path.Equal(back), "%q parsed as %#v", c.want, back)
		}
	}
}
