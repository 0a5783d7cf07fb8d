package mpi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
)

// Every variable EnvSettings reads is refused, naming it and what it
// wants, for a value that would be ignored, overflow or be out of bounds;
// defaults and good values give one Canon per setting.
func TestEnvSettings(t *testing.T) {
	for _, tc := range []struct{ name, value, msg string }{
		{"GONOX_DEVICES", "0", `shard: GONOX_DEVICES="0": want a positive integer (at most 4096)`},
		{"GONOX_DEVICES", "x", `shard: GONOX_DEVICES="x": want a positive integer`},
		{"GONOX_DEVICES", "2.5", `shard: GONOX_DEVICES="2.5": want a positive integer`},
		{"GONOX_DEVICES", "4097", `shard: GONOX_DEVICES="4097": at most 4096 simulated devices`},
		{"GONOX_DEVICES", "2147483647", `shard: GONOX_DEVICES="2147483647": at most 4096 simulated devices`},
		{"GONOX_DEVICES", "99999999999", `shard: GONOX_DEVICES="99999999999": at most 4096 simulated devices`},
		{"GONOX_DEVICES", "99999999999999999999999", `shard: GONOX_DEVICES="99999999999999999999999": want a positive integer`},
		{"GONOX_DEBUG", "true", `shard: GONOX_DEBUG="true": want 0 or 1`},
		{"GONOX_DEBUG", "2", `shard: GONOX_DEBUG="2": want 0 or 1`},
		{"GONOX_TIMEOUT", "10", `shard: GONOX_TIMEOUT="10": want a duration such as 90s or 10m`},
		{"GONOX_TIMEOUT", "-1s", `shard: GONOX_TIMEOUT="-1s": want a duration`},
		{"GONOX_TIMEOUT", "10ms", `shard: GONOX_TIMEOUT="10ms": want a duration such as 90s or 10m (0 waits forever, else at least 1s)`},
		{"GONOX_ASYNC_PROGRESS", "-1", `shard: GONOX_ASYNC_PROGRESS="-1": want a duration such as 100us, from 0 to 1s`},
		{"GONOX_ASYNC_PROGRESS", "abc", `shard: GONOX_ASYNC_PROGRESS="abc": want a duration`},
		{"GONOX_ASYNC_PROGRESS", "2s", `shard: GONOX_ASYNC_PROGRESS="2s": want a duration such as 100us, from 0 to 1s`},
		{"GONOX_MPI_THREAD", "single", `mpi: GONOX_MPI_THREAD="single": want multiple (the default) or funneled`},
		{"GONOX_MPI_SHM", "yes", `mpi: GONOX_MPI_SHM="yes": want 0 (off) or 1 (on, the default)`},
		{"GONOX_MPI_SHM", "true", `mpi: GONOX_MPI_SHM="true": want 0 (off) or 1`},
		{"GONOX_MPI_SPIN", "-1us", `mpi: GONOX_MPI_SPIN="-1us": want a duration from 0 to 10s (default 1ms)`},
		{"GONOX_MPI_SPIN", "100", `mpi: GONOX_MPI_SPIN="100": want a duration`},
		{"GONOX_MPI_SPIN", "11s", `mpi: GONOX_MPI_SPIN="11s": want a duration from 0 to 10s`},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			_, err := mpi.EnvSettings()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
			if tc.name != "GONOX_MPI_THREAD" && tc.name != "GONOX_MPI_SHM" && tc.name != "GONOX_MPI_SPIN" {
				_, err := shard.EnvSettings()
				require.Error(t, err, "package shard's own parser")
				assert.Contains(t, err.Error(), tc.msg)
			}
		})
	}
	canon := func(t *testing.T) map[string]string {
		s, err := mpi.EnvSettings()
		require.NoError(t, err)
		out := map[string]string{}
		for _, v := range s {
			out[v.Name] = v.Canon
		}
		return out
	}
	for _, name := range []string{"GONOX_DEVICES", "GONOX_DEBUG", "GONOX_TIMEOUT", "GONOX_ASYNC_PROGRESS", "GONOX_MPI_THREAD", "GONOX_MPI_SHM", "GONOX_MPI_SPIN"} {
		t.Setenv(name, "")
	}
	t.Run("defaults", func(t *testing.T) {
		got := canon(t)
		assert.Equal(t, "", got["GONOX_DEVICES"], "the default depends on the launcher")
		assert.Equal(t, "false", got["GONOX_DEBUG"])
		assert.Equal(t, "10m0s", got["GONOX_TIMEOUT"])
		assert.Equal(t, "100µs", got["GONOX_ASYNC_PROGRESS"])
		assert.Equal(t, "multiple", got["GONOX_MPI_THREAD"])
		assert.Equal(t, "1", got["GONOX_MPI_SHM"])
		assert.Equal(t, "1ms", got["GONOX_MPI_SPIN"])
		assert.NotEmpty(t, got["GONOX_KERNELS"], "the kernel set in use")
	})
	t.Run("spellings", func(t *testing.T) {
		t.Setenv("GONOX_TIMEOUT", "1m30s")
		a := canon(t)
		t.Setenv("GONOX_TIMEOUT", "90s")
		assert.Equal(t, a, canon(t), "90s and 1m30s are one setting")
		t.Setenv("GONOX_DEBUG", "0")
		t.Setenv("GONOX_DEVICES", "4096")
		t.Setenv("GONOX_TIMEOUT", "0")
		t.Setenv("GONOX_ASYNC_PROGRESS", "0")
		t.Setenv("GONOX_MPI_SPIN", "0.5ms")
		got := canon(t)
		assert.Equal(t, "false", got["GONOX_DEBUG"], "0 is unset's value")
		assert.Equal(t, "4096", got["GONOX_DEVICES"])
		assert.Equal(t, "0s", got["GONOX_TIMEOUT"])
		assert.Equal(t, "0s", got["GONOX_ASYNC_PROGRESS"])
		assert.Equal(t, "500µs", got["GONOX_MPI_SPIN"])
		n, err := shard.DevicesFromEnv()
		require.NoError(t, err)
		assert.Equal(t, 4096, n)
	})
}
