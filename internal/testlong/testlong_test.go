package testlong

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"", false}, {"0", false}, {"1", true}, {"yes", true}} {
		t.Setenv(Env, tc.v)
		assert.Equal(t, tc.want && !testing.Short(), Enabled(), "%s=%q", Env, tc.v)
	}
}
