package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
)

func TestDevicesFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
		err  string
	}{
		{env: "", want: 8},
		{env: "3", want: 3},
		{env: "0", err: `shard: GONOX_DEVICES="0": want a positive integer (at most 4096)`},
		{env: "-1", err: `shard: GONOX_DEVICES="-1": want a positive integer (at most 4096)`},
		{env: "abc", err: `shard: GONOX_DEVICES="abc": want a positive integer (at most 4096)`},
		{env: "2.5", err: `shard: GONOX_DEVICES="2.5": want a positive integer (at most 4096)`},
		{env: "4096", want: 4096},
		{env: "4097", err: `shard: GONOX_DEVICES="4097": at most 4096 simulated devices`},
		{env: "2147483647", err: `shard: GONOX_DEVICES="2147483647": at most 4096 simulated devices`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(shard.DevicesEnv, tc.env)
			n, err := shard.DevicesFromEnv()
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, n)
		})
	}
}
